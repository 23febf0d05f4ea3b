"""The library API behind the command line: the same results from Python or a notebook."""

from __future__ import annotations

import asyncio
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundjudge.calibrate.ppi import ppi_mean
from groundjudge.calibrate.record import find_records
from groundjudge.calibrate.trust import TrustRules
from groundjudge.calibrate.verdicts import items_from_judge_section, load_labels, lookup, primary_rater
from groundjudge.config import Config, api_key, apply_environment, load_config
from groundjudge.gate import evaluate_gates
from groundjudge.judge.cache import JudgeCache
from groundjudge.judge.client import ClientSettings, JudgeClient
from groundjudge.judge.engine import Budget, JudgeEngine, JudgeOutcome, JudgeTotals, Pricing
from groundjudge.judge.rubric import Rubric, load_rubric
from groundjudge.load.adapters import detect_format, load_any
from groundjudge.load.dataset import Dataset
from groundjudge.load.errors import InputError
from groundjudge.profiles import ProfileResult, run_profile
from groundjudge.metrics.behavior import DEFAULT_PHRASES, BehaviorRules
from groundjudge.metrics.case import MetricSettings
from groundjudge.metrics.evaluate import MetricsRun, evaluate_dataset
from groundjudge.files import write_json_atomic, write_text_atomic
from groundjudge.report.gates_md import render_gates_markdown
from groundjudge.report.html import render_html
from groundjudge.report.junit import junit_xml
from groundjudge.report.triage import render_triage_markdown, to_jsonl, triage_records
from groundjudge.report.judge_section import judge_document, render_judge_markdown
from groundjudge.report.markdown import render_markdown
from groundjudge.report.metrics_json import metrics_document
from groundjudge.report.trec_json import trec_document
from groundjudge.select import SelectSettings, Selection, judge_item, select_cases

PACKAGE_RUBRICS = Path(__file__).resolve().parents[2] / "rubrics"


def resolve_config(config_path: Path | None = None, flags: dict[str, Any] | None = None,
                   environ: dict[str, str] | None = None) -> Config:
    """Defaults < config file < environment < flags. ``flags`` maps "section.name" to a value;
    ``None`` (and an empty list or tuple) means the flag was not given."""
    config = apply_environment(load_config(config_path), environ)
    data = config.model_dump()
    for dotted, value in (flags or {}).items():
        if value is None or (isinstance(value, (list, tuple)) and not value):
            continue
        section, name = dotted.split(".")
        data[section][name] = list(value) if isinstance(value, tuple) else value
    return Config.model_validate(data)


def metric_settings(config: Config) -> MetricSettings:
    m = config.metrics
    return MetricSettings(
        ks=tuple(sorted(set(m.ks))), offset_window=m.offset_window_bytes, stability_k=m.stability_k,
        rules=BehaviorRules(phrases=m.refusal_phrases or DEFAULT_PHRASES, refusal_token=m.refusal_token),
    )


def _where(config: Config) -> str:
    return str(config.source or "command line")


def load_inputs(config: Config) -> Dataset:
    inputs = config.inputs
    if not inputs.golden or not inputs.traces:
        raise InputError.one(_where(config), None, "golden/traces",
                             "give --golden and at least one --traces (or --qrels and --run)")
    dataset, _ = load_any(inputs.golden, inputs.traces, inputs.corpus, inputs.format)
    return dataset


def compute_metrics(config: Config) -> dict[str, Any]:
    """Load the inputs named by ``config`` and return the metrics document (nothing is written)."""
    inputs = config.inputs
    settings = metric_settings(config)
    if inputs.qrels or inputs.run:
        if not (inputs.qrels and inputs.run):
            raise InputError.one(_where(config), None, "qrels/run", "give both --qrels and --run for TREC files")
        return trec_document(inputs.qrels, inputs.run, settings)
    dataset = load_inputs(config)
    return metrics_document(dataset, evaluate_dataset(dataset, settings), settings)


def profile_report(config: Config, name: str) -> ProfileResult:
    """The replaced system's own report, from the inputs in its own format."""
    inputs = config.inputs
    if not inputs.golden or not inputs.traces:
        raise InputError.one(_where(config), None, "profile", "a profile needs --golden and --traces")
    found = detect_format(inputs.golden, inputs.traces)
    if found != name:
        raise InputError.one(inputs.golden, 1, "format", f"the {name} profile reads {name} files, these look like "
                                                         f"{found} files")
    return run_profile(name, inputs.golden, inputs.traces, inputs.live)


def write_metrics_reports(doc: dict[str, Any], out_dir: Path, profile: ProfileResult | None = None) -> None:
    text = render_markdown(doc)
    if profile is not None:
        doc = {**doc, "profile": {"name": profile.name, "passed": profile.passed, "report": profile.report}}
        write_json_atomic(out_dir / f"profile-{profile.name}.json", profile.report)
        write_text_atomic(out_dir / f"profile-{profile.name}.md", profile.markdown)
        text += f"\n## Profile `{profile.name}` (its own definitions)\n\n" + profile.markdown
    write_json_atomic(out_dir / "metrics.json", doc)
    write_text_atomic(out_dir / "report.md", text)


EMBEDDED_TIMEOUT_S = 900.0


def for_embedded_judge(config: Config) -> Config:
    """Settings the embedded judge needs: it serves one request at a time on the CPU, so more
    than one call in flight only queues on the server and runs into client timeouts."""
    if config.judge.base_url:
        return config
    judge = config.judge.model_copy(update={"concurrency": 1,
                                            "timeout_s": max(config.judge.timeout_s, EMBEDDED_TIMEOUT_S)})
    return config.model_copy(update={"judge": judge})


def rubric_for(config: Config) -> Rubric:
    rubrics_dir = config.judge.rubrics_dir or (Path("rubrics") if Path("rubrics").is_dir() else PACKAGE_RUBRICS)
    return load_rubric(rubrics_dir, config.judge.rubric, config.judge.rubric_version)


def client_settings(config: Config, base_url: str, model: str) -> ClientSettings:
    j = config.judge
    return ClientSettings(
        base_url=base_url, model=model, api_key=api_key(), model_snapshots=tuple(j.model_snapshots),
        temperature=j.temperature, seed=j.seed, max_tokens=j.max_output_tokens, timeout_s=j.timeout_s,
        max_attempts=j.max_attempts, requests_per_minute=j.requests_per_minute, output_mode=j.output_mode,
    )


@dataclass
class RunResult:
    document: dict[str, Any]
    triage: list[dict[str, Any]]
    outcomes: list[JudgeOutcome]
    selections: list[Selection]
    totals: JudgeTotals
    exit_code: int
    dataset: Dataset


def judge_selected(config: Config, rubric: Rubric, selections: list[Selection], base_url: str, model: str,
                   progress: Any = None) -> tuple[list[JudgeOutcome], JudgeTotals, dict[str, Any], dict[str, Any]]:
    j = config.judge
    client = JudgeClient(client_settings(config, base_url, model))
    cache = JudgeCache(config.cache.dir, enabled=config.cache.enabled)
    engine = JudgeEngine(
        rubric=rubric, client=client, cache=cache, concurrency=j.concurrency,
        budget=Budget(max_tokens=j.max_tokens, max_cost_usd=j.max_cost_usd),
        pricing=Pricing(j.price_prompt_per_mtok, j.price_completion_per_mtok),
        on_progress=progress.update if progress is not None else None,
    )
    items = [s.item for s in selections if s.judge and s.item is not None]
    if progress is not None:
        progress.start(len(items))
    try:
        outcomes = asyncio.run(engine.run(items))
        stats = cache.stats()
    finally:
        cache.close()
    return outcomes, engine.totals, stats, client.settings.decoding()


def run_eval(config: Config, *, base_url: str, model: str, progress: Any = None) -> RunResult:
    """metrics -> select -> judge -> report document. Inputs are checked before any call."""
    rubric = rubric_for(config)
    dataset = load_inputs(config)
    settings = metric_settings(config)
    metrics: MetricsRun = evaluate_dataset(dataset, settings)
    j = config.judge
    selections = select_cases(dataset, metrics, SelectSettings(
        smoke=j.smoke, smoke_per_tag=j.smoke_per_tag, max_cases=j.max_cases, baseline_config=j.baseline_config))
    outcomes, totals, cache_stats, decoding = judge_selected(config, rubric, selections, base_url, model, progress)
    doc = metrics_document(dataset, metrics, settings)
    doc["kind"] = "groundjudge.report"
    doc["judge"] = judge_document(dataset, selections, outcomes, totals, cache_stats, rubric=rubric,
                                  model=model, base_url=base_url, decoding=decoding)
    if config.inputs.labels:
        doc["judge"]["bias_corrected"] = bias_corrected_rates(doc, load_labels(config.inputs.labels))
    records = find_records(config.trust.records_dir)
    doc["gates"] = evaluate_gates(doc, config.gates, trust_rules(config), records)
    doc["calibration"] = calibration_summary(doc["gates"], records)
    judged_any = any(o.status == "judged" for o in outcomes)
    if totals.stopped and not judged_any:
        exit_code = 3
    else:
        exit_code = 0 if doc["gates"]["passed"] else 1
    return RunResult(doc, triage_records(dataset, doc), outcomes, selections, totals, exit_code, dataset)


def calibration_summary(gates: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The calibration record this run's judge is held to, if one exists for it exactly."""
    path = next((t["record"] for t in gates["trust"].values() if t.get("record")), None)
    record = next((r for r in records if r.get("_path") == path), None) if path else None
    if record is None:
        return None
    return {"path": path, "primary_rater": record["primary_rater"], "raters": record["raters"],
            "criteria": {name: {"judge_vs_human": st["judge_vs_human"], "inter_rater": st["inter_rater"]}
                         for name, st in record["criteria"].items()},
            "claims": record["claims"]}


def trust_rules(config: Config) -> TrustRules:
    t = config.trust
    return TrustRules(min_items=t.min_items, min_kappa=t.min_kappa, min_kappa_lower=t.min_kappa_lower)


def bias_corrected_rates(doc: dict[str, Any], humans: dict[str, Any]) -> dict[str, Any]:
    """PPI estimates per config and judge rate: the judge on all cases, humans on a subset."""
    primary = primary_rater(humans)
    items, _ = items_from_judge_section(doc["judge"])
    out: dict[str, Any] = {"primary_rater": primary}
    for cfg in doc["judge"]["per_config"]:
        mine = {k: v for k, v in items.items() if k[1] == cfg}
        per: dict[str, Any] = {}
        for metric, criterion in (("faithfulness", "faithful"), ("citation_support", "citations_supported")):
            judge_all = [float(v.labels[criterion]) for v in mine.values() if v.labels[criterion] is not None]
            pairs = [(float(v.labels[criterion]), float(h.labels[criterion])) for k, v in mine.items()
                     if (h := lookup(humans[primary], k)) is not None
                     and v.labels[criterion] is not None and h.labels[criterion] is not None]
            per[f"{criterion}_rate"] = ppi_mean(judge_all, [p[0] for p in pairs], [p[1] for p in pairs])
        out[cfg] = per
    return out


def write_run_reports(result: RunResult, out_dir: Path, *, junit: Path | None = None) -> None:
    """report.json, report.md, triage.md and triage.jsonl (and JUnit XML when asked)."""
    doc = result.document
    text = render_markdown(doc, title="groundjudge report", preface=render_gates_markdown(doc["gates"]))
    write_json_atomic(out_dir / "report.json", doc)
    write_text_atomic(out_dir / "report.md", text + "\n" + render_judge_markdown(doc))
    write_text_atomic(out_dir / "triage.jsonl", to_jsonl(result.triage))
    write_text_atomic(out_dir / "triage.md", render_triage_markdown(result.triage))
    write_text_atomic(out_dir / "report.html", render_html(doc, result.dataset))
    if junit is not None:
        write_text_atomic(junit, junit_xml(doc))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write(render_gates_markdown(doc["gates"]) + "\n")


def calibrate(config: Config, *, report_path: Path | None = None, verdicts_path: Path | None = None,
              judge_name: str | None = None, primary_rater: str | None = None, seed: int = 0,
              target_width: float = 0.2, position_probe: dict[str, Any] | None = None,
              ) -> tuple[dict[str, Any], Path, dict[str, Any]]:
    """Join judge verdicts with human labels, write the calibration record, report trust."""
    from groundjudge.calibrate.record import build_record, write_record
    from groundjudge.calibrate.trust import trust_status
    from groundjudge.calibrate.verdicts import verdicts_from_jsonl, verdicts_from_report

    where = str(config.source or "command line")
    if not config.inputs.labels:
        raise InputError.one(where, None, "labels", "give human labels with --labels")
    if (report_path is None) == (verdicts_path is None):
        raise InputError.one(where, None, "report/verdicts", "give exactly one of --report and --verdicts")
    if report_path is not None:
        items, judge_prov = verdicts_from_report(report_path)
    else:
        if not judge_name:
            raise InputError.one(where, None, "judge-name", "--verdicts needs --judge-name (the judge's model id)")
        items = verdicts_from_jsonl(verdicts_path)
        digest = hashlib.sha256(Path(verdicts_path).read_bytes()).hexdigest()
        judge_prov = {"rubric": {"id": "external", "version": 1, "hash": digest}, "model": judge_name,
                      "decoding": {}}
    humans = load_labels(config.inputs.labels)
    if primary_rater is not None and primary_rater not in humans:
        raise InputError.one(where, None, "primary-rater", f"no labels from {primary_rater!r}; have {sorted(humans)}")
    record = build_record(items, judge_prov, humans, primary_rater=primary_rater, seed=seed,
                          target_width=target_width)
    if position_probe is not None:
        record["position_probe"] = position_probe
    path = write_record(record, config.trust.records_dir)
    records = find_records(config.trust.records_dir)
    trust = {c: trust_status(c, judge_prov, records, trust_rules(config)).__dict__ for c in record["criteria"]}
    return record, path, trust


def _load_run_document(path: Path) -> dict[str, Any]:
    import json

    from groundjudge.load.records import read_text

    if path.is_dir():
        candidates = [path / "report.json", path / "metrics.json"]
        path = next((p for p in candidates if p.exists()), candidates[-1])
    try:
        doc = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError.one(path, exc.lineno, None, f"invalid JSON: {exc.msg}") from None
    if not isinstance(doc, dict) or "per_config" not in doc:
        raise InputError.one(path, None, "per_config", "not a groundjudge metrics.json or report.json")
    return doc


def compare(a: Path, b: Path | None, *, config_a: str | None = None, config_b: str | None = None,
            strict_chunker_version: bool = False, seed: int = 0) -> dict[str, Any]:
    """Compare two runs (or, with ``b`` None, two configs of one run)."""
    from groundjudge.report.compare import ChunkerMismatch, compare_configs

    doc_a = _load_run_document(a)
    doc_b = _load_run_document(b) if b is not None else doc_a
    if b is None:
        configs = doc_a["configs"]
        config_a = config_a or configs[0]
        config_b = config_b or (configs[1] if len(configs) > 1 else None)
        if config_b is None:
            raise InputError.one(a, None, "configs", "one run with a single config: give a second run to compare")
    config_a = config_a or doc_a["configs"][0]
    config_b = config_b or doc_b["configs"][0]
    for doc, cfg, path in ((doc_a, config_a, a), (doc_b, config_b, b or a)):
        if cfg not in doc["per_config"]:
            raise InputError.one(path, None, "config", f"no config {cfg!r}; have {doc['configs']}")
    side_a, side_b = doc_a["per_config"][config_a], doc_b["per_config"][config_b]
    chunking = (set(side_a.get("versions", {}).get("chunking", [])), set(side_b.get("versions", {}).get("chunking", [])))
    label_a = f"{a.name}:{config_a}" if b is not None else config_a
    label_b = f"{b.name}:{config_b}" if b is not None else config_b
    try:
        return compare_configs(side_a, side_b, label_a=label_a, label_b=label_b, chunking=chunking,
                               strict_chunker_version=strict_chunker_version, seed=seed)
    except ChunkerMismatch as exc:
        raise InputError.one(b or a, None, "versions.chunking", str(exc)) from None


def position_probe(config: Config, report_path: Path, *, base_url: str, model: str,
                   progress: Any = None) -> dict[str, Any]:
    """Re-judge the labelled, judged cases with their context order reversed; count verdict flips.

    A judge whose verdicts depend on where a chunk sits in the prompt is less trustworthy than
    its kappa suggests. Each flip rate is over the items judged both ways.
    """
    import dataclasses

    from groundjudge.calibrate.verdicts import CRITERIA, items_from_judge_section, verdicts_from_report

    items, prov = verdicts_from_report(report_path)
    if prov["model"] != model:
        raise InputError.one(report_path, None, "judge.provenance.model",
                             f"report was judged by {prov['model']!r}, the probe would use {model!r}")
    humans = load_labels(config.inputs.labels) if config.inputs.labels else {}
    labelled = {k for k in items if any(lookup(h, k) is not None for h in humans.values())} if humans else set(items)
    dataset = load_inputs(config)
    probe_items = []
    for case_id, config_id in sorted(labelled):
        trace = dataset.trace(config_id, case_id)
        if trace is None:
            continue
        item, _ = judge_item(dataset, trace)
        if item is not None and len(item.contexts) > 1:
            probe_items.append(dataclasses.replace(item, contexts=tuple(reversed(item.contexts))))
    rubric = rubric_for(config)
    if rubric.content_hash != prov["rubric"]["hash"]:
        raise InputError.one(report_path, None, "judge.provenance.rubric", "report was judged with another rubric")
    selections = [Selection(i.case_id, i.config_id, True, "position probe", 0, i) for i in probe_items]
    outcomes, totals, _, _ = judge_selected(config, rubric, selections, base_url, model, progress)
    reversed_items, _ = items_from_judge_section({"per_config": {
        cfg: {"per_case": {o.case_id: {"status": o.status, "scores": o.scores.model_dump() if o.scores else None,
                                       "claims": []} for o in outcomes if o.config_id == cfg}}
        for cfg in {o.config_id for o in outcomes}}, "provenance": prov})
    result: dict[str, Any] = {"items_probed": len(probe_items), "judged_both_ways": len(reversed_items),
                              "requests": totals.requests}
    for criterion in CRITERIA:
        pairs = [(items[k].labels[criterion], v.labels[criterion]) for k, v in reversed_items.items()
                 if items[k].labels[criterion] is not None and v.labels[criterion] is not None]
        flips = sum(1 for a, b in pairs if a != b)
        result[criterion] = {"n": len(pairs), "flips": flips, "flip_rate": flips / len(pairs) if pairs else None}
    return result
