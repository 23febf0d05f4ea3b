"""The library API behind the command line: the same results from Python or a notebook."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundjudge.config import Config, api_key, apply_environment, load_config
from groundjudge.judge.cache import JudgeCache
from groundjudge.judge.client import ClientSettings, JudgeClient
from groundjudge.judge.engine import Budget, JudgeEngine, JudgeOutcome, JudgeTotals, Pricing
from groundjudge.judge.rubric import Rubric, load_rubric
from groundjudge.load.dataset import Dataset, load_dataset
from groundjudge.load.errors import InputError
from groundjudge.metrics.behavior import DEFAULT_PHRASES, BehaviorRules
from groundjudge.metrics.case import MetricSettings
from groundjudge.metrics.evaluate import MetricsRun, evaluate_dataset
from groundjudge.report.files import write_json_atomic, write_text_atomic
from groundjudge.report.judge_section import judge_document, render_judge_markdown
from groundjudge.report.markdown import render_markdown
from groundjudge.report.metrics_json import metrics_document
from groundjudge.report.trec_json import trec_document
from groundjudge.select import SelectSettings, Selection, select_cases

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
    return load_dataset(inputs.golden, inputs.traces, inputs.corpus)


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


def write_metrics_reports(doc: dict[str, Any], out_dir: Path) -> None:
    write_json_atomic(out_dir / "metrics.json", doc)
    write_text_atomic(out_dir / "report.md", render_markdown(doc))


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
    outcomes: list[JudgeOutcome]
    selections: list[Selection]
    totals: JudgeTotals
    exit_code: int


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
    judged_any = any(o.status == "judged" for o in outcomes)
    exit_code = 3 if totals.stopped and not judged_any else 0
    return RunResult(doc, outcomes, selections, totals, exit_code)


def write_run_reports(doc: dict[str, Any], out_dir: Path) -> None:
    write_json_atomic(out_dir / "report.json", doc)
    write_text_atomic(out_dir / "report.md", render_markdown(doc) + "\n" + render_judge_markdown(doc))
