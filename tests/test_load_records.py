"""Reading JSONL a batch of lines at a time (groundjudge.load.records): the same records on the
same lines as the careful path that reads a line at a time, whatever the batches' edges hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from groundjudge.contracts import GoldenCase, Trace
from groundjudge.errors import InputError
from groundjudge.load import records
from groundjudge.load.records import _checked_records, _jsonl_objects, read_records, read_text

GOLDEN = [json.dumps({"id": f"c{i}", "question": f"q{i}?", "relevance": {f"d{i}#1": 2}, "tags": ["a"] * (i % 3)})
          for i in range(7)]
TRACES = [json.dumps({"query_id": f"c{i}", "config_id": "base", "context_chunks": [f"d{i}#1", "pool#1"],
                      **({"retrieved_chunks": [{"chunk_id": f"d{i}#1", "doc_id": f"d{i}", "score": 0.5}]}
                         if i % 2 else {"latency_ms": {"total": 3.5}})})
          for i in range(7)]

LAYOUTS = {
    "plain": lambda lines: "\n".join(lines) + "\n",
    "no-final-newline": lambda lines: "\n".join(lines),
    "crlf": lambda lines: "\r\n".join(lines) + "\r\n",
    "blank-inside": lambda lines: "\n".join(lines[:3]) + "\n\n \t\n\x0b\n" + "\n".join(lines[3:]) + "\n",
    "blank-around": lambda lines: "\n\n  \n" + "\n".join(lines) + "\n\n\r\n  \n",
    "every-other-blank": lambda lines: "\n\n".join(lines),
}


def careful(path: Path, model: type[Any]) -> list[tuple[int, Any]]:
    return _checked_records(path, ((line, obj, None) for line, obj in _jsonl_objects(path, read_text(path))), model)


@pytest.mark.parametrize("batch_bytes", [1, 100, 300, 1 << 17])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize(("model", "lines"), [(GoldenCase, GOLDEN), (Trace, TRACES)], ids=["golden", "traces"])
def test_batches_read_as_the_careful_path_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                batch_bytes: int, layout: str, model: type[Any],
                                                lines: list[str]) -> None:
    monkeypatch.setattr(records, "BATCH_BYTES", batch_bytes)
    path = tmp_path / "f.jsonl"
    path.write_bytes(LAYOUTS[layout](lines).encode())
    assert records._jsonl_fast(path, model) is not None  # read in batches, not left to the careful path
    assert read_records(path, model) == careful(path, model)


@pytest.mark.parametrize("batch_bytes", [1, 1 << 17])
def test_a_line_of_two_records_is_named_not_read_as_two(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        batch_bytes: int) -> None:
    monkeypatch.setattr(records, "BATCH_BYTES", batch_bytes)
    path = tmp_path / "g.jsonl"
    path.write_text(GOLDEN[0] + "\n" + GOLDEN[1] + ", " + GOLDEN[2] + "\n" + GOLDEN[3] + "\n")
    with pytest.raises(InputError) as caught:
        read_records(path, GoldenCase)
    assert "g.jsonl:2: invalid JSON" in str(caught.value)


@pytest.mark.parametrize("batch_bytes", [1, 1 << 17])
@pytest.mark.parametrize("lines", [
    # a line ending inside a string, whose rest opens the next line; then a line of two records:
    # three lines and three values when joined, though no line but the second is one value
    ['{"query_id": "c1", "config_id": "base", "answer": "}', '{", "error": null}',
     '{"query_id": "c2", "config_id": "base"}, {"query_id": "c3", "config_id": "base"}'],
    # the same with an array left open at the end of a line
    ['{"query_id": "c1", "config_id": "base", "versions": {"a": "b"}, "tokens": {"x": 1}, "citations": [{"chunk_id": "d0#1"}',
     '{"chunk_id": "d1#1"}]}', '{"query_id": "c2", "config_id": "base"}, {"query_id": "c3", "config_id": "base"}'],
], ids=["string", "array"])
def test_lines_that_are_one_value_only_when_joined_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           batch_bytes: int, lines: list[str]) -> None:
    monkeypatch.setattr(records, "BATCH_BYTES", batch_bytes)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([TRACES[0], *lines, TRACES[4]]) + "\n")
    with pytest.raises(InputError) as caught:
        read_records(path, Trace)
    assert "t.jsonl:2: invalid JSON" in str(caught.value)


def test_a_number_the_careful_path_names_is_named_in_any_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "BATCH_BYTES", 100)
    path = tmp_path / "g.jsonl"
    path.write_text("\n".join(GOLDEN[:4]) + '\n{"id": "x", "question": "q", "team_score": NaN}\n' + GOLDEN[5] + "\n")
    with pytest.raises(InputError) as caught:
        read_records(path, GoldenCase)
    assert "g.jsonl:5: team_score: not a finite number" in str(caught.value)


def _cut_whole(data: bytes, batch_bytes: int) -> list[bytes]:
    """The batches of the whole file read at once, cut at the first line feed ``batch_bytes`` past
    each batch's start."""
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    out = []
    while start < len(data):
        end = data.find(b"\n", start + batch_bytes)
        end = len(data) if end < 0 else end
        out.append(data[start:end])
        start = end + 1
    return out


@pytest.mark.parametrize("read_bytes", [1, 2, 5, 64, 1 << 22])
@pytest.mark.parametrize("batch_bytes", [1, 10, 100, 1 << 17])
@pytest.mark.parametrize("text", [
    "\n".join(TRACES) + "\n", "\n".join(TRACES), "\ufeff" + "\n".join(GOLDEN) + "\n", "\n\n\n", "x",
    "\ufeff", "a" * 500 + "\n" + "b" * 3 + "\n" + "c" * 700,  # lines longer than a block
], ids=["plain", "no-final-newline", "bom", "only-newlines", "one-byte", "only-bom", "long-lines"])
def test_a_file_read_in_blocks_gives_the_batches_of_the_whole_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_bytes: int, batch_bytes: int, text: str) -> None:
    monkeypatch.setattr(records, "_READ_BYTES", read_bytes)
    monkeypatch.setattr(records, "BATCH_BYTES", batch_bytes)
    path = tmp_path / "f.jsonl"
    path.write_bytes(text.encode())
    assert list(records._line_batches(path)) == _cut_whole(text.encode(), batch_bytes)
