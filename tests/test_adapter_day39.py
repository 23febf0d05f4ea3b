"""The day-39 adapter on inputs written from the lesson (seed 004): a golden file whose first
case has no ``user_context`` (optional in the lesson), outputs with and without ``config_id``,
and the document store as the corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.errors import InputError
from groundjudge.load.adapters import day39, detect_format, load_any
from tests.support import day39_seed as seed
from tests.support.day39_seed import write_jsonl, write_seed_files


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    return write_seed_files(tmp_path)


def test_the_first_golden_case_has_no_tenant_so_its_outputs_decide(files: dict[str, Path], tmp_path: Path) -> None:
    first = json.loads(files["golden"].read_text(encoding="utf-8").splitlines()[0])
    assert "user_context" not in first  # the lesson's runner reads it as {}
    assert not day39.looks_like(first, "gold")
    # The lesson's output contract without config_id (the runner's default is "unknown"): no
    # native trace lacks one, so it is a day-39 output.
    bare = {k: v for k, v in seed.CANDIDATE[0].items() if k != "config_id"}
    outputs = write_jsonl(tmp_path / "bare.jsonl", [bare])
    assert detect_format(files["golden"], [outputs]) == "day39"
    # ... and so is one with the contract's expected_behavior_observed
    marked = write_jsonl(tmp_path / "marked.jsonl", [{**seed.CANDIDATE[0], "expected_behavior_observed": "answer"}])
    assert detect_format(files["golden"], [marked]) == "day39"
    # Outputs carrying config_id and nothing day-39-only have the native shape: detection alone
    # cannot tell (--format day39 or --profile day39 does, below).
    assert detect_format(files["golden"], [files["candidate"]]) == "native"


def test_an_output_without_config_id_gets_the_runner_default(files: dict[str, Path], tmp_path: Path) -> None:
    bare = write_jsonl(tmp_path / "bare.jsonl", [{k: v for k, v in o.items() if k != "config_id"}
                                                   for o in seed.CANDIDATE])
    dataset, fmt = load_any(files["golden"], [bare])
    assert fmt == "day39" and dataset.config_ids == ["unknown"]
    assert set(dataset.traces["unknown"]) == {o["query_id"] for o in seed.CANDIDATE}


@pytest.mark.parametrize("how", [["--format", "day39"], []])
def test_profile_reads_a_golden_file_without_tenant(files: dict[str, Path], tmp_path: Path, how: list[str]) -> None:
    """Before: "these look like native files", exit 2, with --format day39 and without it."""
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["metrics", "--profile", "day39", *how, "--golden", str(files["golden"]),
                                       "--traces", str(files["baseline"]), "--traces", str(files["candidate"]),
                                       "--out", str(out), "--quiet"])
    assert result.exit_code == 1, result.output  # the planted failures fail the runner's gate
    doc = json.loads((out / "metrics.json").read_text())
    assert doc["inputs"]["format"] == "day39"  # the native half reads them as day-39 files too
    assert doc["configs"] == ["vector-only", "hybrid-rerank"]
    own = json.loads((out / "profile-day39.json").read_text())
    assert set(own["aggregate"]) == {"vector-only", "hybrid-rerank"}


def test_another_format_named_with_the_profile_is_an_input_error(files: dict[str, Path], tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["metrics", "--profile", "day39", "--format", "kb-eval", "--golden",
                                       str(files["golden"]), "--traces", str(files["candidate"]),
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "the day39 profile reads day39 files, not --format kb-eval" in result.output
    assert not (tmp_path / "out").exists()


def test_the_document_store_is_the_corpus(files: dict[str, Path]) -> None:
    corpus = day39.read_corpus(files["store"])
    chunk = corpus.chunks["it_security_policy:v2026-02:chunk_003"]
    assert chunk.doc_id == "it_security_policy" and chunk.doc_version == "v2026-02"
    assert chunk.text.startswith("Mật khẩu tối thiểu 14 ký tự")
    assert chunk.section_path == ("Mật khẩu",)
    assert chunk.acl is not None and list(chunk.acl.roles) == seed.EVERYONE
    private = corpus.chunks["finance_private_comp:v2026-01:chunk_002"]
    assert private.acl is not None and private.acl.roles == ("finance", "hr")
    # the lesson's other metadata travels with the chunk
    extra = chunk.model_extra or {}
    assert extra["chunking_strategy"] == "markdown_v2_800_120" and extra["text_hash"].startswith("sha256:")
    assert extra["page_start"] == 1 and extra["index_version"] == "rag-index-2026-05-10"


def test_the_store_gives_the_judge_the_text_behind_the_output_ids(files: dict[str, Path]) -> None:
    without, _ = load_any(files["golden"], [files["candidate"]], fmt="day39")
    assert without.missing_text  # ids only: nothing for the judge to read
    dataset, _ = load_any(files["golden"], [files["candidate"]], files["store"], fmt="day39")
    assert dataset.missing_text == {}
    assert dataset.corpus.text_of("hr_leave_policy:v2026-01:chunk_003") is not None


def test_a_chunk_id_that_names_its_document_needs_no_document_id(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "store.jsonl", [
        {"chunk_id": "billing_policy:v2026-01:chunk_004", "text": "Refund hợp lệ được xử lý trong 10 ngày làm việc."},
        {"chunk_id": "loose-7", "doc_id": "notes", "text": "x"}])
    corpus = day39.read_corpus(path)
    refund = corpus.chunks["billing_policy:v2026-01:chunk_004"]
    assert (refund.doc_id, refund.doc_version) == ("billing_policy", "v2026-01")
    assert corpus.chunks["loose-7"].doc_id == "notes"  # the native name is read too


@pytest.mark.parametrize("line, fragment", [
    ({"chunk_id": "loose-7", "text": "x"}, "store.jsonl:1: document_id: required: chunk id 'loose-7' does not name"),
    ({"chunk_id": "a:v1:c1"}, "store.jsonl:1: text: required field is missing"),
    ({"chunk_id": "a:v1:c1", "text": "x", "page_start": -1}, "store.jsonl:1: page_start: Input should be greater"),
    ({"chunk_id": "a:v1:c1", "text": "x", "acl_roles": "employee"}, "store.jsonl:1: acl_roles: Input should be a"),
])
def test_a_bad_store_line_names_file_line_and_field(tmp_path: Path, line: dict, fragment: str) -> None:
    path = write_jsonl(tmp_path / "store.jsonl", [line])
    with pytest.raises(InputError) as exc:
        day39.read_corpus(path)
    assert fragment in str(exc.value)


def test_a_repeated_chunk_id_in_the_store_is_an_input_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "store.jsonl", [{"chunk_id": "a:v1:c1", "text": "x"},
                                                 {"chunk_id": "a:v1:c1", "text": "y"}])
    with pytest.raises(InputError, match="store.jsonl:2: chunk_id: duplicate chunk id 'a:v1:c1' .first on line 1."):
        day39.read_corpus(path)
