"""Atomic report writes: the umask decides who may read the file, and no temporary file is left."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from groundjudge.files import write_json_atomic, write_text_atomic


def written_under(umask: int, path: Path) -> int:
    """Write ``path`` (new, then replaced) under ``umask``; return its permission bits."""
    previous = os.umask(umask)
    try:
        write_text_atomic(path, "first\n")
        write_json_atomic(path, {"second": True})
    finally:
        os.umask(previous)
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_get_the_mode_the_umask_allows(tmp_path: Path, umask: int, mode: int) -> None:
    path = tmp_path / "out" / "report.json"
    assert written_under(umask, path) == mode
    assert json.loads(path.read_text(encoding="utf-8")) == {"second": True}
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    write_json_atomic(path, {"old": 1})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"bad": {1, 2}})  # a set: refused before anything is written
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(path, "half \udcff")  # fails while writing the temporary file
    assert json.loads(path.read_text(encoding="utf-8")) == {"old": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_json_cannot_hold_nan_or_infinity_so_they_are_written_as_null(tmp_path: Path) -> None:
    from groundjudge.files import compact_json

    data = {"a": float("nan"), "b": [float("inf"), -float("inf")], "c": 1e-05}
    write_json_atomic(tmp_path / "r.json", data)
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": None, "b": [None, None], "c": 1e-05}
    assert json.loads(compact_json(data)) == {"a": None, "b": [None, None], "c": 1e-05}


def test_compact_json_in_pieces_is_byte_for_byte_one_dumps() -> None:
    """A document written in pieces (``report.document.json_chunks``: mappings key by key, the
    per-case ones in slices) is exactly what one orjson.dumps call writes, whatever the nesting,
    and the same document as the standard library's json writes."""
    import json as _json
    import random

    import orjson

    from groundjudge.report import document
    from groundjudge.report.document import json_chunks

    rng = random.Random(3)

    def value(depth: int, big: bool) -> object:
        roll = rng.random()
        if depth > 7 or roll < 0.3:
            return rng.choice([1, 2.5, None, True, 'q"ü\n', [1, {"a": None}], {}, []])
        if roll < 0.4:
            return [value(depth + 1, False) for _ in range(rng.randrange(3))]  # slices: in mappings only
        n = rng.choice([999, 1000, 2501]) if big and rng.random() < 0.3 else rng.randrange(4)
        made = {f"k{i}": value(depth + 1, big and n < 10) for i in range(n)}
        # a large mapping is written in slices, as a document's per-case mappings are
        return document._Entries(made, list) if n >= 999 and rng.random() < 0.5 else made

    def plain(v: object) -> object:
        if isinstance(v, document._Entries):
            v = dict(v.mapping)
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return [plain(x) for x in v] if isinstance(v, list) else v

    for _ in range(100):
        doc = value(0, True)
        joined = b"".join(json_chunks(doc))
        doc = plain(doc)
        assert joined == orjson.dumps(doc)
        assert _json.loads(joined) == _json.loads(_json.dumps(doc, ensure_ascii=False))
    with pytest.raises(TypeError):
        b"".join(json_chunks({"deep": document._Entries({f"k{i}": {1, 2} for i in range(1500)}, list)}))
