"""Run outputs for people and CI: triage files, JUnit XML, the step summary, and compare."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from groundjudge.cli import main
from groundjudge.judge.results import CaseJudgement
from tests.support.judge_replies import verdict_for_request
from tests.support.openai_server import DEFAULT_MODEL, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "groundjudge.toml"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("run")
    summary = tmp / "summary.md"
    summary.write_text("previous step\n")
    with ScriptedOpenAIServer(verdict_for_request) as srv, pytest.MonkeyPatch.context() as mp:
        mp.setenv("GITHUB_STEP_SUMMARY", str(summary))
        for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR"):
            mp.delenv(var, raising=False)
        result = CliRunner().invoke(main, [
            "run", "--config", str(EXAMPLE), "--rubric", "grounded_answer", "--judge-base-url", srv.base_url, "--judge-model", srv.model,
            "--cache-dir", str(tmp / "cache"), "--out", str(tmp / "out"), "--junit", str(tmp / "junit.xml"),
            "--quiet"])
    assert result.exit_code in (0, 1), result.output
    (tmp / "exit_code").write_text(str(result.exit_code))
    return tmp


def test_triage_lists_bad_citations_and_unsupported_claims_with_retrieval_facts(run_dir):
    records = [json.loads(line) for line in (run_dir / "out" / "triage.jsonl").read_text().splitlines()]
    # baseline q025 cites billing-v2#3, which was retrieved but never reached the context
    q025 = [r for r in records if r["case_id"] == "q025" and r["config_id"] == "baseline"
            and r["kind"] == "invalid_citation"]
    assert q025 and q025[0]["problem"] == "cited chunk did not reach the context"
    assert q025[0]["chunks"]["billing-v2#3"]  # the chunk text is there for the reader
    facts = q025[0]["retrieval"]
    assert {"gold_chunks", "gold_retrieved", "gold_in_context"} <= set(facts)
    unsupported = [r for r in records if r["kind"] == "unsupported_claim"]
    assert unsupported and all(r["claim"] == "an extra detail" for r in unsupported)
    markdown = (run_dir / "out" / "triage.md").read_text()
    assert "## `q025` (baseline)" in markdown and "did not reach the context" in markdown


def test_triage_files_written_in_one_pass_are_the_renderings_of_the_record_list(run_dir):
    """The run writes both triage files a case at a time (``write_triage_files``): the bytes are
    those of the list-based renderers over every record."""
    from groundjudge import api
    from groundjudge.report.document import ReportDocument
    from groundjudge.report.triage import jsonl_lines, triage_markdown_chunks, triage_records

    doc = ReportDocument.model_validate_json((run_dir / "out" / "report.json").read_text(encoding="utf-8"))
    records = triage_records(api.load_inputs(api.resolve_config(EXAMPLE)), doc)
    assert len(records) > 10 and {"invalid_citation", "unsupported_claim"} <= {r["kind"] for r in records}
    assert (run_dir / "out" / "triage.jsonl").read_bytes() == b"".join(jsonl_lines(records))
    assert (run_dir / "out" / "triage.md").read_text(encoding="utf-8") == "".join(triage_markdown_chunks(records, doc))
    assert sorted(p.name for p in (run_dir / "out").iterdir() if p.name.startswith(".")) == []  # no temporary left


def test_triage_command_filters(run_dir):
    out = CliRunner().invoke(main, ["triage", str(run_dir / "out"), "--kind", "invalid_citation",
                                    "--config", "baseline", "--json"])
    assert out.exit_code == 0
    rows = [json.loads(line) for line in out.output.splitlines()]
    assert rows and {r["kind"] for r in rows} == {"invalid_citation"} and {r["config_id"] for r in rows} == {"baseline"}
    tagged = CliRunner().invoke(main, ["triage", str(run_dir / "out"), "--tag", "acl", "--json"])
    assert all("acl" in json.loads(line)["tags"] for line in tagged.output.splitlines())


def test_junit_failures_are_exactly_the_failed_blocking_gates(run_dir):
    """SPEC 7. The example's baseline leaks ACL-protected chunks, but only the candidate is
    gated: the verdict is PASS, so the build must not go red. (The leaks used to be written as
    failures of their own, a red build beside PASS and exit code 0.)"""
    report = json.loads((run_dir / "out" / "report.json").read_text())
    suite = ET.parse(run_dir / "junit.xml").getroot()
    cases = list(suite.iter("testcase"))
    assert all(c.get("classname").startswith("groundjudge.gates.") for c in cases)
    assert len(cases) == len(report["gates"]["results"]) == int(suite.get("tests"))
    failing = sorted(c.get("name") for c in cases if c.find("failure") is not None)
    assert failing == sorted(report["gates"]["failed"]) and int(suite.get("failures")) == len(failing)
    assert report["gates"]["passed"] and int((run_dir / "exit_code").read_text()) == 0 and not failing
    leaks = report["gates"]["ungated_acl_leaks"]["baseline"]
    assert leaks and all(f"ACL leak in baseline, a config no gate covers (reported, not gated): {case}:" in
                         suite.findtext("system-out") for case in leaks)


def test_step_summary_is_appended(run_dir):
    text = (run_dir / "summary.md").read_text()
    assert text.startswith("previous step\n") and "## Verdict:" in text


# --- compare ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def metrics_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("metrics")
    assert CliRunner().invoke(main, ["metrics", "--config", str(EXAMPLE), "--out", str(out), "--quiet"]).exit_code == 0
    return out


def test_compare_configs_uses_span_matching_when_chunkers_differ(metrics_dir, tmp_path):
    result = CliRunner().invoke(main, ["compare", str(metrics_dir), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "compare.json").read_text())
    assert data["matching_mode"] == "doc_id+span_overlap>=50%"
    assert "hit@5" not in data["metrics"] and "recall_span@10" in data["metrics"]
    assert data["counts"]["regression"] == sum(v == "regression" for v in data["per_case"].values())
    assert data["per_case"]["q048"] == "regression"  # the candidate lost q048's gold chunk
    assert "Chunk matching: **doc_id+span_overlap>=50%**" in result.output


def test_compare_strict_chunker_version_refuses(metrics_dir):
    result = CliRunner().invoke(main, ["compare", str(metrics_dir), "--strict-chunker-version"])
    assert result.exit_code == 2, result.output
    assert "versions.chunking: 'baseline' was chunked with" in result.stderr
    assert "chunk ids cannot be compared exactly" in result.stderr
    assert "(--strict-chunker-version is set)" in result.stderr


def test_compare_configs_names_both_sides_chunkers_when_it_refuses():
    from groundjudge.errors import ChunkerMismatch, GroundjudgeError
    from groundjudge.report.compare import compare_configs

    side = {"per_case": {"q1": {"hit@5": 1.0}}}
    with pytest.raises(ChunkerMismatch) as err:
        compare_configs(side, side, label_a="r1:base", label_b="r2:cand", chunking=({"v2", "v1"}, {"v3"}),
                        strict_chunker_version=True)
    assert str(err.value).startswith("'r1:base' was chunked with ['v1', 'v2'] and 'r2:cand' with 'v3'; chunk ids "
                                     "cannot be compared exactly")
    assert isinstance(err.value, GroundjudgeError) and err.value.chunker_a == {"v1", "v2"}
    assert compare_configs(side, side, label_a="a", label_b="b", chunking=({"v1"}, {"v1"}),
                           strict_chunker_version=True)["matching_mode"] == "chunk_id"


def test_compare_two_runs_of_the_same_config_is_all_draws_and_noise(metrics_dir):
    result = CliRunner().invoke(main, ["compare", str(metrics_dir), str(metrics_dir), "--config-a", "candidate",
                                       "--config-b", "candidate", "--out", str(metrics_dir / "same")])
    data = json.loads((metrics_dir / "same" / "compare.json").read_text())
    assert result.exit_code == 0 and data["matching_mode"] == "chunk_id"
    assert data["counts"]["draw"] == data["cases_compared"] == 51
    assert all(m["verdict"] == "noise" and m["delta"] == 0 for m in data["metrics"].values())


def test_paired_permutation_test_is_seeded_and_detects_a_real_shift():
    from groundjudge.report.compare import paired_permutation_p

    diffs = [0.3] * 30 + [-0.1] * 5
    assert paired_permutation_p(diffs, seed=1) == paired_permutation_p(diffs, seed=1) < 0.01
    assert paired_permutation_p([0.1, -0.1] * 10, seed=1) > 0.5


# --- the report schema -----------------------------------------------------------------------------

def _validator(name: str):
    import jsonschema

    result = CliRunner().invoke(main, ["schema", name])
    schema = json.loads(result.output)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(validator, doc) -> list[str]:
    return [f"{list(e.path)}: {e.message}" for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.path))]


def test_every_report_validates_against_the_published_schema(run_dir, metrics_dir, tmp_path):
    """The schemas are generated from the models the documents are written from."""
    report, metrics = _validator("report"), _validator("metrics")
    assert not _errors(report, json.loads((run_dir / "out" / "report.json").read_text()))
    assert not _errors(metrics, json.loads((metrics_dir / "metrics.json").read_text()))
    trec = ROOT.parent / "shared" / "data" / "trec" / "trec_eval_test"
    if trec.exists():
        assert CliRunner().invoke(main, ["metrics", "--qrels", str(trec / "qrels.test"), "--run",
                                         str(trec / "results.test"), "--out", str(tmp_path), "--quiet"]).exit_code == 0
        assert not _errors(metrics, json.loads((tmp_path / "metrics.json").read_text()))


def test_the_schema_rejects_a_scored_judge_error_and_a_reasonless_skip(run_dir):
    import copy

    validator = _validator("report")
    doc = json.loads((run_dir / "out" / "report.json").read_text())
    cases = doc["judge"]["per_config"]["candidate"]["cases"]
    judged = next(c for c in cases.values() if c["status"] == "judged")
    scored_error = copy.deepcopy(doc)
    scored_error["judge"]["per_config"]["candidate"]["cases"][judged["case_id"]].update(
        status="judge_error", reason="timed out")
    assert any("criteria" in e or "claims" in e for e in _errors(validator, scored_error))
    skipped = next(cid for cid, c in cases.items() if c["status"] == "skipped")
    reasonless = copy.deepcopy(doc)
    reasonless["judge"]["per_config"]["candidate"]["cases"][skipped]["reason"] = None
    assert _errors(validator, reasonless)


def test_a_report_of_schema_version_1_is_refused_by_name(run_dir, tmp_path):
    old = json.loads((run_dir / "out" / "report.json").read_text())
    old["schema_version"] = 1
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    result = CliRunner().invoke(main, ["calibrate", "--report", str(path), "--labels",
                                       str(ROOT / "calibration" / "labels" / "example_rater_a.jsonl"),
                                       "--records-dir", str(tmp_path / "records")])
    assert result.exit_code == 2
    assert "report schema version 1 is not readable here" in result.output and "run `groundjudge run` again" in result.output


@pytest.mark.parametrize("version", [2, 3])
def test_a_report_of_schema_version_2_or_3_is_still_read(run_dir, tmp_path, version):
    # version 3 only added the `unchecked` claim verdict and `usage.unmetered`; version 4 a
    # metric value's `reason` and null behaviours (none in the native example)
    old = json.loads((run_dir / "out" / "report.json").read_text())
    assert old["schema_version"] == 4 and '"reason"' not in json.dumps(old["aggregate"])
    old["schema_version"] = version
    for claim in (c for cfg in old["judge"]["per_config"].values() for r in cfg["cases"].values() for c in r["claims"]):
        assert claim["verdict"] != "unchecked"
    usages = [old["judge"]["totals"]["usage"], *(r["usage"] for cfg in old["judge"]["per_config"].values()
                                                 for r in cfg["cases"].values())]
    for usage in usages:
        usage.pop("unmetered")
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(old))
    result = CliRunner().invoke(main, ["calibrate", "--report", str(path), "--labels",
                                       str(ROOT / "calibration" / "labels" / "example_rater_a.jsonl"),
                                       "--records-dir", str(tmp_path / "records")])
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "records").glob("*.json"))


def test_report_says_which_configs_are_gated_and_leaks_elsewhere_do_not_block(run_dir):
    report = json.loads((run_dir / "out" / "report.json").read_text())
    assert report["gates"]["gated_configs"] == ["candidate"]
    assert report["gates"]["ungated_acl_leaks"] == {"baseline": ["q013", "q036", "q038", "q041"]}
    markdown = (run_dir / "out" / "report.md").read_text()
    assert "Gates cover config `candidate`; other configs are reported, not gated." in markdown
    assert "No gate covers `baseline`" in markdown and "do not change this verdict" in markdown
    assert "These block a release." not in markdown and "SPEC 6" not in markdown
    html = (run_dir / "out" / "report.html").read_text()
    assert "a config no gate covers: they do not change this verdict" in html


def test_the_judges_trust_status_comes_first_where_its_findings_are_read(run_dir):
    triage = (run_dir / "out" / "triage.md").read_text()
    assert triage.index("Judge trust: untrusted") < triage.index("finding(s)")
    assert "`faithfulness`: untrusted" in triage and "docs/calibration.md" in triage
    html = (run_dir / "out" / "report.html").read_text()
    cases = html[html.index('id="cases"'):]
    assert "Judge untrusted: its findings are advisory" in cases
    assert "judge untrusted, findings advisory" in cases  # beside each case's claims


@pytest.mark.parametrize("top", [0, 1, 3, 1000])
def test_top_failed_cases_are_the_first_rows_of_every_failed_pair_sorted(run_dir, top):
    """report.md's Top failed cases: the first ``top`` of every pair that went wrong somewhere,
    sorted by stage, most failed checks, config and case, and the count of the rest, as a full
    sort of every pair's stage (found per pair, with its claims' classes) gives them."""
    from groundjudge.inert import markdown, markdown_code
    from groundjudge.metrics.failures import DESCRIPTIONS, STAGE_ORDER, deterministic_failures, failure_stage
    from groundjudge.report.document import ReportDocument
    from groundjudge.report.markdown import render_markdown

    doc = ReportDocument.model_validate_json((run_dir / "out" / "report.json").read_text())
    rows = []
    for cfg in doc.configs:
        for cid, values in doc.per_config[cfg].per_case.items():
            verdict = doc.judge.case(cfg, cid)
            stage = failure_stage(values, [c.klass for c in verdict.claims] if verdict is not None else [])
            if stage:
                failed = deterministic_failures(values)
                rows.append((STAGE_ORDER.index(stage), -len(failed), cfg, cid, stage, failed))
    rows.sort()
    assert len(rows) > 3 and len({r[4] for r in rows}) > 1  # several stages to order
    lines = [f"| {markdown_code(cid)} | {markdown(cfg)} | {stage} | "
             f"{'; '.join(DESCRIPTIONS[f] for f in failed) or 'judge findings only'} |"
             for *_, cfg, cid, stage, failed in rows[:top]]
    text = render_markdown(doc, top_failed=top)
    section = text[text.index("## Top failed cases"):]
    table = section.split("\n\n")[2].splitlines()[2:]
    assert table == lines
    more = f"… and {len(rows) - top} more in report.json."
    assert (more in section) == (len(rows) > top)


def test_history_packs_a_report_without_copying_its_rows(run_dir):
    from groundjudge.history.summary import pack, pack_report, per_case_values
    from groundjudge.report.document import ReportDocument

    doc = ReportDocument.model_validate_json((run_dir / "out" / "report.json").read_text())
    assert pack_report(doc) == pack(per_case_values(doc))
    assert any(doc.judge.per_config[c].cases for c in doc.per_config)  # the judge's columns are in it


def test_a_large_run_writes_the_same_report_compact_and_in_pieces(run_dir, tmp_path, monkeypatch):
    """Above api.COMPACT_JSON_ABOVE pairs report.json is one compact line written piece by piece:
    the same document as the indented one (every verdict comes from the first run's cache)."""
    from groundjudge import api

    monkeypatch.setattr(api, "COMPACT_JSON_ABOVE", 0)
    for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(var, raising=False)
    result = CliRunner().invoke(main, [
        "run", "--config", str(EXAMPLE), "--rubric", "grounded_answer", "--judge-base-url", "http://127.0.0.1:9/v1",
        "--judge-model", DEFAULT_MODEL, "--cache-dir", str(run_dir / "cache"), "--out", str(tmp_path / "out"),
        "--quiet", "--no-history"])
    assert result.exit_code in (0, 1), result.output
    compact = (tmp_path / "out" / "report.json").read_text()
    indented = (run_dir / "out" / "report.json").read_text()
    assert compact.count("\n") == 1 and indented.count("\n") > 1

    def comparable(text: str) -> dict:
        doc = json.loads(text)  # less what differs between a run that called and one that read the cache
        for key in ("base_url", "totals", "cache"):
            doc["judge"].pop(key)
        for section in doc["judge"]["per_config"].values():
            for case in section["cases"].values():
                for key in ("seconds", "source", "usage"):
                    case.pop(key)
        return doc

    assert comparable(compact) == comparable(indented)


def _cached_run(run_dir: Path, out: Path, *extra: str):
    return CliRunner().invoke(main, [
        "run", "--config", str(EXAMPLE), "--rubric", "grounded_answer", "--judge-base-url", "http://127.0.0.1:9/v1",
        "--judge-model", DEFAULT_MODEL, "--cache-dir", str(run_dir / "cache"), "--out", str(out), "--quiet", *extra])


def _history_rows(path: Path) -> list:
    import sqlite3

    with sqlite3.connect(path) as conn:
        runs = [json.loads(s) for (s,) in conn.execute("SELECT summary FROM runs ORDER BY id")]
        for r in runs:
            r.pop("started_at")
        return [runs, conn.execute("SELECT run_id, config, ids FROM run_cases ORDER BY config").fetchall(),
                conn.execute("SELECT * FROM run_values ORDER BY config, metric").fetchall()]


@pytest.mark.parametrize("batch", [100_000, 8])
def test_a_run_with_a_process_pool_writes_the_same_bytes_as_one_process(run_dir, tmp_path, monkeypatch, batch):
    """The metrics scored in a pool of two processes (GROUNDJUDGE_WORKERS=2; one batch, or one
    per eight pairs): every output file has the same bytes as the one-process run's, and the
    history the same row."""
    from groundjudge.metrics import evaluate

    for var in ("GROUNDJUDGE_BASE_URL", "GROUNDJUDGE_MODEL", "GROUNDJUDGE_CACHE_DIR", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(evaluate, "BATCH", batch)
    out, history = tmp_path / "out", tmp_path / "history.sqlite"
    monkeypatch.setenv("GROUNDJUDGE_WORKERS", "1")
    alone = _cached_run(run_dir, out, "--history", str(history))
    out.rename(tmp_path / "alone")
    history.rename(tmp_path / "alone.sqlite")
    monkeypatch.setenv("GROUNDJUDGE_WORKERS", "2")
    pools: list[int] = []
    real = evaluate.ProcessPoolExecutor
    monkeypatch.setattr(evaluate, "ProcessPoolExecutor", lambda n, **kw: pools.append(n) or real(n, **kw))
    split = _cached_run(run_dir, out, "--history", str(history))
    assert alone.exit_code == split.exit_code and alone.exit_code in (0, 1), (alone.output, split.output)
    assert pools == ([] if batch > 1000 else [2])  # one batch is scored here; more go to the pool
    names = sorted(p.name for p in (tmp_path / "alone").iterdir())
    assert names == sorted(p.name for p in out.iterdir())
    assert {"report.json", "report.md", "report.html", "triage.jsonl", "triage.md"} <= set(names)
    for name in names:
        assert (tmp_path / "alone" / name).read_bytes() == (out / name).read_bytes(), name
    assert _history_rows(tmp_path / "alone.sqlite") == _history_rows(history)


def test_the_report_is_written_from_the_typed_document_as_its_full_dump_in_either_form(run_dir, tmp_path,
                                                                                        monkeypatch):
    """report.json is written from the typed document: indented, or compact a slice of cases at
    a time; both read back as the document's full dump, key order included."""
    from groundjudge.report import document
    from groundjudge.report.document import ReportDocument, document_chunks, document_json, write_document

    text = (run_dir / "out" / "report.json").read_text()
    typed = ReportDocument.model_validate_json(text)
    full = typed.model_dump(mode="json", by_alias=True, exclude_none=False)
    assert full == json.loads(text) and document_json(typed) == full
    assert json.dumps(document_json(typed)) == json.dumps(full)  # the same key order, all the way down
    monkeypatch.setattr(document, "_SLICE", 1)  # a slice per case: every join between slices is written
    pieces = list(document_chunks(typed))
    cases = sum(len(s.cases) for s in typed.judge.per_config.values())
    assert cases > 1 and len(pieces) > cases
    assert json.dumps(json.loads(b"".join(pieces))) == json.dumps(full)
    for compact in (False, True):
        write_document(tmp_path / "again.json", typed, compact=compact)
        again = (tmp_path / "again.json").read_text()
        assert again.endswith("\n") and (again.count("\n") == 1) == compact
        assert json.dumps(json.loads(again)) == json.dumps(full)


def test_verdicts_written_in_one_step_are_the_bytes_of_their_json_values() -> None:
    """report.json's verdicts are written a slice at a time, and must be the bytes pydantic and
    ``compact_json`` write of the same verdicts as JSON values: hostile and non-ASCII text,
    floats of every spelling, NaN and infinities (null), claims with and without optional
    fields, errors and skipped cases, across slice boundaries."""
    import math

    from pydantic import TypeAdapter

    from groundjudge.files import compact_json
    from groundjudge.judge.claim_result import ClaimResult
    from groundjudge.judge.results import CaseJudgement, CriterionValue, NuggetResult, Usage
    from groundjudge.report import document
    from groundjudge.report.document import json_chunks

    floats = [0.0, -0.0, 1e-05, 0.1, 1 / 3, 1e16, 1.2345678901234568e17, 5e-324, math.nan, math.inf, -math.inf]
    texts = ["plain", "q\"ü\n\t\x1b]0;x\x07\x7f\x9b\u202e\u2028 <b>&amp;</b> 😀", ""]
    cases = {}
    for i in range(2345):
        f, t = floats[i % len(floats)], texts[i % len(texts)]
        cid = f"c{i}{t}"
        if i % 7 == 3:
            cases[cid] = CaseJudgement(case_id=cid, config_id="cfg", status="judge_error", reason=t or "x")
            continue
        claims = (ClaimResult(claim=t, cited=("a", t), verdict="supported", support=(t,), klass="cited_support",
                              confidence=f, start=i, end=i + 2, unfound_terms=(t,) if i % 2 else None,
                              model_confidence=f),
                  ClaimResult(claim=t, verdict="unsupported", klass="unsupported"))
        cases[cid] = CaseJudgement(case_id=cid, config_id="cfg", status="judged", claims=claims if i % 3 else (),
                                   criteria={"faithful": CriterionValue(label=bool(i % 2), value=f, confidence=f)},
                                   usage=Usage(requests=1, cost_usd=f if math.isfinite(f) else 0.5), seconds=f,
                                   nuggets=(NuggetResult(text=t, stated=bool(i % 2), confidence=f),) if i % 5 else (),
                                   raw=t, judge_reason=t)
    # without a float of a positive exponent (msgspec spells 1e+16 as 1e16), the verdicts are
    # written by msgspec in one step; with one, by the slower way: both must give these bytes
    small = {cid: case for cid, case in cases.items()
             if not any(abs(f) >= 1e16 for f in _floats_of(case) if math.isfinite(f))}
    assert 0 < len(small) < len(cases)
    for chosen in (cases, small, dict(list(cases.items())[:1]), {}):
        entries = document._Entries(chosen, document._verdicts, document._verdicts_json)
        values = dict(zip(chosen, document._verdicts(list(chosen.values())), strict=True))
        assert b"".join(json_chunks({"cases": entries})) == compact_json({"cases": values})
        # written as their fields, the verdicts are what pydantic writes for each verdict itself
        each = TypeAdapter(dict[str, CaseJudgement])
        assert document._verdicts_json(chosen) == each.dump_json(chosen, by_alias=True)
        assert compact_json(values) == compact_json(each.dump_python(chosen, mode="json", by_alias=True))
    with pytest.MonkeyPatch.context() as patch:  # the one-step way alone, for the verdicts it can write
        patch.setattr(document, "compact_json", None)
        assert document._verdicts_json(small) == TypeAdapter(dict[str, CaseJudgement]).dump_json(small, by_alias=True)


def _floats_of(case: CaseJudgement) -> list[float]:
    """Every float a verdict holds (its claims', criteria's, usage's and its own)."""
    found = [case.seconds, case.usage.cost_usd]
    found += [v for c in case.criteria.values() for v in (c.value, c.confidence) if isinstance(v, float)]
    found += [v for c in case.claims for v in (c.confidence, c.model_confidence, c.cited_confidence)
              if isinstance(v, float)]
    found += [n.confidence for n in case.nuggets if isinstance(n.confidence, float)]
    return [f for f in found if isinstance(f, float)]


def test_compare_shows_the_judge_beside_the_deterministic_metrics_and_can_fail_on_a_regression(run_dir, tmp_path):
    """The example run: the candidate answers better (behavior_correct, must_contain: real gains)
    but slower and longer (latency and completion tokens: real rises, for the worse)."""
    result = CliRunner().invoke(main, ["compare", str(run_dir / "out"), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output  # without the flag, a comparison only reports
    data = json.loads((tmp_path / "compare.json").read_text())
    rows = data["metrics"]
    for name in ("faithful", "faithfulness", "correct", "citations_supported", "citation_support"):
        assert rows[name]["kind"] == "judge" and rows[name]["advisory"] and rows[name]["n_paired"] > 0, name
    assert rows["faithfulness"]["a"] == pytest.approx(0.5) and rows["faithful"]["a"] == 0.0  # score vs verdict
    assert rows["behavior_correct"]["verdict"] == "real" and not rows["behavior_correct"]["regressed"]
    assert rows["latency_ms.end_to_end"]["regressed"] and rows["latency_ms.end_to_end"]["delta"] > 0
    assert data["regressions"] == ["latency_ms.end_to_end", "latency_ms.generation", "latency_ms.rerank",
                                   "tokens.completion"]
    assert "| faithful | 0.0000 | 0.0000 | +0.0000 |" in result.output
    assert "Metrics that regressed for real: `latency_ms.end_to_end`" in result.output
    failing = CliRunner().invoke(main, ["compare", str(run_dir / "out"), "--fail-on-regression"])
    assert failing.exit_code == 1 and "real (regression)" in failing.output
    same = CliRunner().invoke(main, ["compare", str(run_dir / "out"), str(run_dir / "out"), "--config-a", "candidate",
                                     "--config-b", "candidate", "--fail-on-regression"])
    assert same.exit_code == 0 and "No metric regressed for real." in same.output


def test_an_untrusted_judge_metric_that_regresses_is_advisory_in_compare():
    from groundjudge.report.compare import compare_configs

    side = {"per_case": {f"q{i}": {"recall@10": 1.0} for i in range(10)}}
    worse = {f"q{i}": {"faithful": 0.0} for i in range(10)}
    better = {f"q{i}": {"faithful": 1.0} for i in range(10)}
    untrusted = compare_configs(side, side, label_a="a", label_b="b", judge_a=better, judge_b=worse,
                                judge_trusted={"faithful": False})
    assert untrusted["advisory_regressions"] == ["faithful"] and untrusted["regressions"] == []
    trusted = compare_configs(side, side, label_a="a", label_b="b", judge_a=better, judge_b=worse,
                              judge_trusted={"faithful": True})
    assert trusted["regressions"] == ["faithful"] and trusted["metrics"]["faithful"]["p_value"] < 0.05


def test_triage_lists_only_what_the_trace_recorded_shows(tmp_path):
    """kb-eval records no prompt context: its citations of retrieved chunks used to be listed as
    "invalid citation: cited chunk did not reach the context". A WFGY citation of an id that was
    never retrieved is still listed: the trace records what was retrieved."""
    from groundjudge.load.adapters import load_any
    from groundjudge.report.triage import render_triage_markdown, triage_records
    from tests.support.reports import report_of
    from tests.test_metrics_unrecorded import KB_GOLDEN, KB_RESULTS, WFGY_GOLD, WFGY_TRACE

    (tmp_path / "kb.jsonl").write_text(KB_GOLDEN)
    (tmp_path / "run-a.jsonl").write_text(KB_RESULTS)
    kb, _ = load_any(tmp_path / "kb.jsonl", [tmp_path / "run-a.jsonl"])
    assert triage_records(kb, report_of(["run-a"])) == []
    (tmp_path / "gold.jsonl").write_text(WFGY_GOLD)
    unretrieved = WFGY_TRACE.replace('"citations":["pB#1"]}', '"citations":["pB#9"]}')
    (tmp_path / "trace.jsonl").write_text(unretrieved)
    wfgy, _ = load_any(tmp_path / "gold.jsonl", [tmp_path / "trace.jsonl"])
    [record] = triage_records(wfgy, report_of(["trace"]))
    assert (record["case_id"], record["problem"]) == ("A0003", "cited chunk was not retrieved")
    assert record["retrieval"] == {"gold_chunks": [{"chunk_id": "pB#1", "grade": 3, "rank": 1, "in_context": None}],
                                   "gold_retrieved": True, "gold_in_context": None}
    assert "`pB#1` (grade 3): rank 1, context not recorded" in render_triage_markdown([record])


def test_triage_citation_problems_and_retrieval_facts_follow_the_rule_for_every_kind_of_trace():
    """Triage reads a case's facts from the case and trace in hand and checks each citation by
    a scan of the trace's ids: the same rows as the rule said plainly (sets of the recorded ids,
    the ranking of ``ranking_of``) for full traces, traces that recorded no context or no
    retrieval, rankings out of score order with a chunk retrieved twice, gold never retrieved,
    cases without gold, ids outside the corpus, and with no corpus at all."""
    from groundjudge.contracts import CorpusChunk, GoldenCase, Trace
    from groundjudge.load.dataset import Corpus, Dataset
    from groundjudge.metrics.case import ranking_of
    from groundjudge.report.triage import retrieval_facts, triage_records
    from tests.support.reports import report_of

    cases = {cid: GoldenCase.model_validate({"id": cid, "question": f"q {cid}", "relevance": relevance})
             for cid, relevance in (("a", {"g1": 3, "g2": 1, "x": 0}), ("b", {"g3": 2}), ("c", {}), ("d", {"g4": 1}))}
    retrieved = [{"chunk_id": "n1", "score": 0.2}, {"chunk_id": "g1", "score": 0.9}, {"chunk_id": "n1", "score": 0.95},
                 {"chunk_id": "g2", "score": 0.5}]
    def trace(**fields: object) -> Trace:
        return Trace.model_validate(fields)

    traces = {
        "full": {"a": trace(query_id="a", config_id="full", retrieved_chunks=retrieved,
                            context_chunks=["g1", "n1"], answer="x",
                            citations=["g2", "g1", "nowhere", "n1"]),
                 "b": trace(query_id="b", config_id="full", retrieved_chunks=["n1"],
                            context_chunks=["n1", {"chunk_id": "g3", "text": "trace text"}],
                            citations=["g3", "n1"], answer="y"),
                 "c": trace(query_id="c", config_id="full", retrieved_chunks=["n1"], citations=["g1"], answer="z")},
        "no_context": {"a": trace(query_id="a", config_id="no_context", retrieved_chunks=["g2", "g1"], answer="x",
                                  citations=["g1", "g3"], not_recorded=["context_chunks"]),
                       "d": trace(query_id="d", config_id="no_context", retrieved_chunks=["g4"], answer="w",
                                  citations=["n1"], not_recorded=["context_chunks"])},
        "no_retrieval": {"a": trace(query_id="a", config_id="no_retrieval", context_chunks=["g2"], answer="x",
                                    citations=["g1", "g2"], not_recorded=["retrieved_chunks"])},
    }
    chunks = {cid: CorpusChunk(chunk_id=cid, doc_id=cid[:1], text=f"text of {cid}")
              for cid in ("g1", "g2", "g3", "g4", "n1", "x")}

    def facts_by_rule(case, trace):
        gold = sorted(case.relevant_chunk_ids)
        if not gold:
            return {"gold_chunks": [], "gold_retrieved": None, "gold_in_context": None}
        ranking = ranking_of(trace)
        rank = {g: ranking.index(g) + 1 for g in gold if g in ranking}
        context = {c.chunk_id for c in trace.context_chunks}
        known = "context_chunks" not in trace.not_recorded
        return {"gold_chunks": [{"chunk_id": g, "grade": case.relevance[g], "rank": rank.get(g),
                                 "in_context": (g in context) if known else None} for g in gold],
                "gold_retrieved": bool(rank) if "retrieved_chunks" not in trace.not_recorded else None,
                "gold_in_context": any(g in context for g in gold) if known else None}

    def problems_by_rule(trace, corpus):
        retrieved = ({c.chunk_id for c in trace.retrieved_chunks}
                     if "retrieved_chunks" not in trace.not_recorded else None)
        context = {c.chunk_id for c in trace.context_chunks} if "context_chunks" not in trace.not_recorded else None
        out = []
        for cit in trace.citations:
            if corpus and cit.chunk_id not in corpus.chunks:
                out.append((cit.chunk_id, "cited id exists nowhere in the corpus"))
            elif retrieved is not None and cit.chunk_id not in retrieved:
                out.append((cit.chunk_id, "cited chunk was not retrieved"))
            elif context is not None and cit.chunk_id not in context:
                out.append((cit.chunk_id, "cited chunk did not reach the context"))
        return out

    for corpus in (Corpus(chunks), Corpus()):
        dataset = Dataset(cases=cases, traces={cfg: dict(per) for cfg, per in traces.items()},
                          corpus=corpus, missing_trace={}, missing_text={}, unresolved_chunks={}, sources={})
        rows = triage_records(dataset, report_of(list(traces)))
        expected = []
        for cfg, per in traces.items():
            for cid, trace in per.items():
                assert retrieval_facts(dataset, cfg, cid) == facts_by_rule(cases[cid], trace)
                expected += [(cfg, cid, cited, problem, facts_by_rule(cases[cid], trace))
                             for cited, problem in problems_by_rule(trace, corpus)]
        assert [(r["config_id"], r["case_id"], r["cited"][0], r["problem"], r["retrieval"]) for r in rows] == expected
        assert {r["problem"] for r in rows} >= {"cited chunk was not retrieved", "cited chunk did not reach the context"}
        shown = [(r["config_id"], r["case_id"], r["cited"][0], r["problem"]) for r in rows]
        assert (("full", "a", "nowhere", "cited id exists nowhere in the corpus") in shown) == bool(corpus)
        # a cited chunk's text: the trace's context gave it, else the corpus (if any)
        texts = {(r["config_id"], r["case_id"], r["cited"][0]): r["chunks"] for r in rows}
        assert texts[("full", "b", "g3")] == {"g3": "trace text"}
        assert texts[("full", "a", "g2")] == {"g2": corpus.text_of("g2")}  # not in the trace's context
    assert retrieval_facts(dataset, "full", "d") == {  # no trace: nothing retrieved, nothing in context
        "gold_chunks": [{"chunk_id": "g4", "grade": 1, "rank": None, "in_context": False}],
        "gold_retrieved": False, "gold_in_context": False}
