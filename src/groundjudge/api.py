"""The library API behind the command line: the same results from Python or a notebook.

    import groundjudge as gj
    config = gj.resolve_config("examples/groundjudge.toml")
    with gj.open_judge(config) as judge:
        result = gj.run_eval(config, judge)
    gj.write_run_reports(result, "runs/notebook")

Inputs are loaded and checked before anything else happens; the embedded judge starts only
when a case actually needs a call.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pydantic import ValidationError

from groundjudge.config import Config, apply_environment, load_config
from groundjudge.errors import InputError, InputProblem, StorageError
from groundjudge.files import check_outputs as check_outputs  # noqa: PLC0414 -- re-exported: part of the API

# Stages are imported where they are used: `groundjudge metrics` never loads the judge client
# or scikit-learn, so it starts as fast as a plain script.
if TYPE_CHECKING:
    from groundjudge.calibrate.trust import TrustRules, TrustStatus
    from groundjudge.calibrate.verdicts import ItemKey, ItemLabels
    from groundjudge.gate import GateReport
    from groundjudge.history.record import PendingHistory
    from groundjudge.judge.results import JudgeRun, Usage
    from groundjudge.judge.rubric import Rubric
    from groundjudge.judge.session import JudgeSession
    from groundjudge.load.dataset import Dataset
    from groundjudge.metrics.case import MetricSettings
    from groundjudge.metrics.evaluate import MetricsRun
    from groundjudge.report.document import ReportDocument
    from groundjudge.report.metrics_document import MetricsDocument
    from groundjudge.select import Selection


def resolve_config(config_path: str | Path | None = None, flags: dict[str, Any] | None = None,
                   environ: dict[str, str] | None = None) -> Config:
    """Defaults < config file < environment < flags. ``flags`` maps "section.name" to a value,
    and a profile's knob "profile.<profile>.<knob>" (see :func:`profile_settings`); ``None``
    (and an empty list or tuple) means the flag was not given. Every ``[profile.<name>]``
    table is checked against that profile's settings."""
    config = apply_environment(load_config(config_path), environ)
    data = config.model_dump()
    knob_flags: dict[str, dict[str, Any]] = {}
    for dotted, value in (flags or {}).items():
        if value is None or (isinstance(value, (list, tuple)) and not value):
            continue
        section, name = dotted.split(".", 1)
        if section == "profile":
            profile, knob = name.split(".")
            knob_flags.setdefault(profile, {})[knob] = value
            continue
        data[section][name] = list(value) if isinstance(value, tuple) else value
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:  # a flag's value the settings refuse (--concurrency 1000)
        raise InputError([InputProblem("command line", None, ".".join(map(str, err["loc"])), err["msg"])
                          for err in exc.errors(include_url=False)]) from None
    if config.profile or knob_flags:
        config = _with_profile_settings(config, knob_flags)
    return config


def _with_profile_settings(config: Config, knob_flags: dict[str, dict[str, Any]]) -> Config:
    """``config`` with each ``[profile.<name>]`` table checked (relative paths resolved against
    the config file's folder) and the knobs given as flags laid over it."""
    from groundjudge.profiles import profile_settings

    tables: dict[str, dict[str, Any]] = {}
    for name, table in config.profile.items():
        checked = profile_settings(name, table, source=_where(config),
                                   base=config.source.resolve().parent if config.source else None)
        tables[name] = checked.model_dump(exclude_unset=True)
    for name, given in knob_flags.items():
        checked = profile_settings(name, {**tables.get(name, {}), **given}, flags=True)
        tables[name] = checked.model_dump(exclude_unset=True)
    return config.model_copy(update={"profile": tables})


def profile_settings(config: Config, name: str) -> Any:
    """The settings of profile ``name`` in ``config`` (its defaults where the config sets none)."""
    from groundjudge.profiles import profile_settings as checked

    return checked(name, config.profile.get(name, {}), source=_where(config))


def metric_settings(config: Config) -> MetricSettings:
    from groundjudge.metrics.behavior import DEFAULT_PHRASES, BehaviorRules
    from groundjudge.metrics.case import MetricSettings

    m = config.metrics
    return MetricSettings(
        ks=tuple(sorted(set(m.ks))), offset_window=m.offset_window_bytes, stability_k=m.stability_k,
        rules=BehaviorRules(phrases=m.refusal_phrases or DEFAULT_PHRASES, refusal_token=m.refusal_token),
    )


def _where(config: Config) -> str:
    return str(config.source or "command line")


def check_gate_config(config: Config, rubric: Rubric, dataset: Dataset | None = None) -> None:
    """Refuse gates that could not be evaluated (InputError: unknown metric, uncomputed k,
    judge gate per tag, ...) before anything runs; with ``dataset``, also regression gates
    naming a config the traces do not have."""
    from groundjudge.gate import check_gates
    from groundjudge.metrics.names import metric_names

    check_gates(config.gates, metric_names(metric_settings(config)), {c.metric_name: c.name for c in rubric.criteria},
                _where(config), config_ids=dataset.config_ids if dataset is not None else None)


def load_inputs(config: Config) -> Dataset:
    from groundjudge.load.adapters import load_any

    inputs = config.inputs
    if not inputs.traces or (not inputs.golden and _needs_golden(inputs.format, inputs.traces)):
        raise InputError.one(_where(config), None, "golden/traces",
                             "give --golden and at least one --traces (or --qrels and --run)")
    dataset, _ = load_any(inputs.golden, inputs.traces, inputs.corpus, inputs.format,
                          {"config_attribute": inputs.config_attribute, "case_attribute": inputs.case_attribute})
    return dataset


def _needs_golden(fmt: str, traces: Sequence[Path]) -> bool:
    """Whether traces in ``fmt`` (detected from ``traces`` when ``auto``) need a golden set: an
    OpenTelemetry export is graded on its own."""
    from groundjudge.load.adapters import AUTO, NATIVE, detect_format, get_format

    name = detect_format(None, traces) if fmt == AUTO else fmt
    return name == NATIVE or get_format(name).needs_golden


def rubric_for(config: Config) -> Rubric:
    """The rubric named in ``[judge]``: from ``rubrics_dir``, else ``./rubrics`` when it exists,
    else the rubrics installed with the package."""
    from groundjudge.judge.rubric import load_rubric, packaged_rubrics

    folder = config.judge.rubrics_dir or (Path("rubrics") if Path("rubrics").is_dir() else None)
    # a folder that holds only aligned rubrics still resolves their installed bases by name
    if folder is None or not (folder / config.judge.rubric).is_dir():
        with packaged_rubrics() as installed:
            return load_rubric(installed, config.judge.rubric, config.judge.rubric_version)
    return load_rubric(folder, config.judge.rubric, config.judge.rubric_version)


@contextmanager
def open_judge(config: Config, *, rubric: Rubric | None = None, log: IO[str] | None = None,
               quiet: bool = False) -> Iterator[JudgeSession]:
    """The run's judge: rubric, pinned model, decoding, cache and endpoint in one session.

    With no base URL configured, the embedded judge starts on the first call that is needed
    and stops when the block ends, however it ends.
    """
    from groundjudge.judge.session import JudgeSession

    session = JudgeSession(config, rubric or rubric_for(config), log=None if quiet else (log or sys.stderr))
    with session:
        yield session


@contextmanager
def open_escalation(config: Config, *, log: IO[str] | None = None, quiet: bool = False,
                    ) -> Iterator[JudgeSession | None]:
    """The escalation judge named in ``[judge.escalate]`` (None when there is none): its own
    endpoint, model and rubric (default: the first judge's), the same cache and decoding."""
    escalate = config.judge.escalate
    if escalate is None:
        yield None
        return
    same_rubric = escalate.rubric in (None, config.judge.rubric)
    judge = config.judge.model_copy(update={
        "base_url": escalate.base_url, "model": escalate.model, "escalate": None, "model_snapshots": [],
        "rubric": escalate.rubric or config.judge.rubric,
        "rubric_version": config.judge.rubric_version if same_rubric else None})
    second = config.model_copy(update={"judge": judge})
    with open_judge(second, log=log, quiet=quiet) as session:
        yield session


@dataclass(frozen=True)
class RunResult:
    """Everything one run found, typed: reports are written from it, nothing re-reads them."""

    config: Config
    dataset: Dataset
    settings: MetricSettings
    metrics: MetricsRun
    selections: tuple[Selection, ...]
    judge: JudgeRun
    gates: GateReport
    calibration: dict[str, Any] | None  # the record this judge is held to, if any
    bias_corrected: dict[str, Any] | None
    exit_code: int
    escalation: JudgeRun | None = None  # the escalation judge's verdicts on the items sent to it
    stability: Any = None  # calibrate.stability.StabilityCheck: verdicts inside their noise band, or why unknown

    @property
    def passed(self) -> bool:
        return self.gates.passed

    @property
    def judge_stopped(self) -> str | None:
        """Why the judge (or the escalation judge) stopped before every case was asked, if it did."""
        return self.judge.totals.stopped or (self.escalation.totals.stopped if self.escalation is not None else None)


def select(config: Config, dataset: Dataset, metrics: MetricsRun, rubric: Rubric | None = None) -> list[Selection]:
    """Which cases go to the judge, the gated configs' first (with ``rubric``, also both configs
    of a regression gate on one of its judge metrics)."""
    from groundjudge.gate import gate_configs
    from groundjudge.select import SelectSettings, select_cases

    j = config.judge
    gates = config.gates
    judged = {c.metric_name for c in rubric.criteria} if rubric is not None else set()
    # the budget goes first to the configs whose gates need the judge's evidence
    gated = [*gate_configs(gates, dataset.config_ids),
             *(c for g in gates.regression if g.metric in judged for c in (g.baseline, g.candidate))]
    return select_cases(dataset, metrics, SelectSettings(
        smoke=j.smoke, smoke_per_tag=j.smoke_per_tag, max_cases=j.max_cases, baseline_config=j.baseline_config,
        gated_configs=tuple(dict.fromkeys(gated))))


def run_eval(config: Config, judge: JudgeSession, *, progress: Any = None, dataset: Dataset | None = None,
             escalate: JudgeSession | None = None, spent: Usage | None = None) -> RunResult:
    """metrics -> select -> judge -> calibration -> gates. Inputs are checked before any call
    (``dataset``: inputs already loaded from ``config``; ``spent``: what the run's batches cost).
    With ``escalate`` (see ``open_escalation``), items the first judge abstains on, under
    selective trust, and that no person has labelled are judged again by it."""
    from groundjudge.calibrate.ppi import bias_corrected_rates
    from groundjudge.calibrate.record import find_records
    from groundjudge.calibrate.trust import calibration_summary
    from groundjudge.calibrate.verdicts import load_labels
    from groundjudge.gate import evaluate_gates
    from groundjudge.judge.run import judge_run
    from groundjudge.metrics.evaluate import evaluate_dataset

    dataset = dataset if dataset is not None else load_inputs(config)
    check_gate_config(config, judge.rubric, dataset)
    settings = metric_settings(config)
    metrics = evaluate_dataset(dataset, settings)
    selections = select(config, dataset, metrics, judge.rubric)
    records = find_records(config.trust.records_dir)  # before any call: an unreadable record is bad input
    judged = judge_run(judge, dataset, selections, progress, spent)
    humans = load_labels(config.inputs.labels, judged.criteria) if config.inputs.labels else None
    stability = _stability_check(judge.rubric, judged, records)
    selective, escalated = _selective_trust(judged, humans, records, dataset, selections, escalate, progress,
                                            unstable=stability.unstable_keys() if stability is not None else None)
    gates = evaluate_gates(metrics, judged, config.gates, trust_rules(config), records, selective)
    # a judge that could not be reached, or stopped answering, leaves the verdict unknown: exit
    # 3 whatever was judged before it stopped (and the run is no comparable point of the history)
    stopped = judged.totals.stopped or (escalated.totals.stopped if escalated is not None else None)
    exit_code = 3 if stopped else (0 if gates.passed else 1)
    return RunResult(config=config, dataset=dataset, settings=settings, metrics=metrics,
                     selections=tuple(selections), judge=judged, gates=gates,
                     calibration=calibration_summary(judged, records),
                     bias_corrected=bias_corrected_rates(judged, humans) if humans else None, exit_code=exit_code,
                     escalation=escalated, stability=stability)


def _stability_check(rubric: Rubric, judged: JudgeRun, records: Sequence[dict[str, Any]]) -> Any:
    """Which verdicts lie inside their criterion's noise band (``calibrate.stability``); None
    when the rubric has no verdict that is a support against a threshold."""
    from groundjudge.calibrate.stability import SUPPORT_SCORES, check_run

    supported = ([c.name for c in rubric.criteria if c.score_kind in SUPPORT_SCORES]
                 if rubric.protocol == "claim_questions" else [])
    return check_run(judged, supported, records)


def _selective_trust(judged: JudgeRun, humans: dict[str, dict[ItemKey, ItemLabels]] | None,
                    records: Sequence[dict[str, Any]], dataset: Dataset, selections: list[Selection],
                    escalate: JudgeSession | None, progress: Any = None,
                    unstable: dict[tuple[str, str, str], str] | None = None) -> tuple[Any, JudgeRun | None]:
    """Who decides each item under selective trust, escalating what the first judge abstains
    on; (None, None) when no record of this judge holds a guaranteed cut-off. ``unstable``: the
    first judge's verdicts inside their noise band, never trusted."""
    from groundjudge.calibrate.cascade import cutoffs_for, decide, to_escalate
    from groundjudge.calibrate.verdicts import primary_rater
    from groundjudge.judge.run import judge_run

    cutoffs = cutoffs_for(judged.identity.model_dump(), records)
    if not cutoffs:
        return None, None
    people = humans[primary_rater(humans)] if humans else None
    escalated = None
    if escalate is not None:
        send = to_escalate(judged, cutoffs, people, unstable=unstable)
        chosen = [s for s in selections if s.judge and (s.case_id, s.config_id) in send]
        if chosen:
            escalated = judge_run(escalate, dataset, chosen, progress)
    later = cutoffs_for(escalated.identity.model_dump(), records) if escalated is not None else {}
    later_check = (_stability_check(escalate.rubric, escalated, records)
                   if escalate is not None and escalated is not None else None)
    return decide(judged, cutoffs, escalation=escalated, escalation_cutoffs=later, humans=people,
                  unstable=unstable,
                  escalation_unstable=later_check.unstable_keys() if later_check is not None else None), escalated


def batch_step(config: Config, judge: JudgeSession, out_dir: str | Path, *, dataset: Dataset | None = None,
               wait_s: float = 0.0, sleep: Any = None) -> Any:
    """One step of a batch run (``groundjudge run --batch``): poll and collect the run's open
    batch, submit what the cache still cannot answer; returns ``judge.batch.Progress``. When it
    says ``done``, finish with ``run_eval(..., spent=progress.state.usage)``."""
    import time

    from groundjudge.judge.batch import advance
    from groundjudge.metrics.evaluate import evaluate_dataset

    dataset = dataset if dataset is not None else load_inputs(config)
    check_gate_config(config, judge.rubric, dataset)
    metrics = evaluate_dataset(dataset, metric_settings(config))
    items = [s.item for s in select(config, dataset, metrics, judge.rubric) if s.judge and s.item is not None]
    return advance(judge, items, Path(out_dir), config_json=config.model_dump(mode="json"), wait_s=wait_s,
                   sleep=sleep or time.sleep)


def trust_rules(config: Config) -> TrustRules:
    from groundjudge.calibrate.trust import TrustRules

    t = config.trust
    return TrustRules(min_items=t.min_items, min_kappa=t.min_kappa, min_kappa_lower=t.min_kappa_lower,
                      min_coverage=t.min_coverage)


def report_document(result: RunResult) -> Any:
    """The typed ``report.json`` of a run."""
    from groundjudge.report.document import CalibrationSummary, ReportDocument, metrics_document

    base = metrics_document(result.dataset, result.metrics, result.settings)
    return ReportDocument(**{**dict(base), "kind": "groundjudge.report"}, judge=result.judge, gates=result.gates,
                          calibration=CalibrationSummary.model_validate(result.calibration)
                          if result.calibration else None, bias_corrected=result.bias_corrected,
                          escalation=result.escalation, stability=result.stability)


COMPACT_JSON_ABOVE = 5_000  # (case, config) pairs: a larger report.json is written compact, which is faster


def history_path(config: Config, out_dir: str | Path) -> Path | None:
    """Where this run's summary goes: ``[output] history``, else ``history.sqlite`` beside the
    run folder (``runs/history.sqlite`` for the default ``runs/<timestamp>``); None when off."""
    if not config.output.keep_history:
        return None
    return config.output.history or Path(out_dir).resolve().parent / "history.sqlite"


def _input_hashes(config: Config) -> dict[str, str | None]:
    """sha256 of the run's golden set, traces and corpus files (``history.data_hashes``)."""
    from groundjudge.history import data_hashes

    inputs = config.inputs
    return data_hashes(inputs.golden, inputs.traces, inputs.corpus)


def history_record(result: RunResult, document: Any, out_dir: str | Path, path: str | Path,
                   *, hashes: Mapping[str, str | None] | None = None) -> PendingHistory:
    """The run's history record and the trend chart's data for the gated config over the last
    ``[output] trend_runs`` runs, this run included; nothing is written (``append_history``
    appends it). A run whose judge could not be reached or stopped mid-run is recorded as not
    comparable: kept, but never a point of a trend nor the run another is compared with. A
    history database that cannot be read gives a record with ``problem`` set (the run goes on;
    ``append_history`` then adds nothing). ``hashes``: the input files' sha256 (``history.data_hashes``), where
    made already."""
    from groundjudge.history.record import pending_record

    stopped = result.judge_stopped
    return pending_record(document, out_dir, path, hashes=_input_hashes(result.config) if hashes is None else hashes,
                          not_comparable=f"the judge could not judge every case: {stopped}" if stopped else None,
                          gated_configs=result.gates.gated_configs, prefer=list(result.config.gates.metrics),
                          last=result.config.output.trend_runs, metrics=result.metrics)


def _graded_spans(dataset: Dataset) -> dict[tuple[str, str], tuple[str, str]]:
    """(config id, case id) -> the (trace id, span id) its trace was read from, for traces that
    came from OpenTelemetry (the otel input format); other traces have no span."""
    out = {}
    for config_id, per_case in dataset.traces.items():
        for case_id, trace in per_case.items():
            extra = trace.model_extra
            if extra and isinstance(extra.get("otel_trace_id"), str) and isinstance(extra.get("otel_span_id"), str):
                out[config_id, case_id] = (extra["otel_trace_id"], extra["otel_span_id"])
    return out


def write_otel_events(result: RunResult, doc: ReportDocument, path: str | Path, *,
                      report_url: str | None = None) -> tuple[int, int]:
    """Write each verdict of the run (``doc``: its report, as :func:`write_run_reports` returns it) as an
    OpenTelemetry ``gen_ai.evaluation.result`` event linked to its graded span, as OTLP JSON
    Lines at ``path`` (replaced atomically). Returns (events written, judged cases without a
    span to link to)."""
    import time

    import orjson

    from groundjudge.files import write_chunks_atomic
    from groundjudge.report.otel_events import evaluation_events

    lines, written, unlinked = evaluation_events(doc, _graded_spans(result.dataset), time_ns=time.time_ns(),
                                                 report_url=report_url)
    write_chunks_atomic(Path(path), (orjson.dumps(line) + b"\n" for line in lines))
    return written, unlinked


def fetch_phoenix(url: str, project: str, path: str | Path, since: str | None = None) -> int:
    """Write the Phoenix project's spans (those started within ``since``, such as ``24h``, when
    given) to ``path`` as OTLP JSON Lines, to be graded in the otel format; returns how many.
    Needs the ``groundjudge[phoenix]`` extra (an :class:`InputError` says so)."""
    from groundjudge.load.phoenix import fetch_spans, parse_since

    return fetch_spans(url, project, Path(path), since=parse_since(since) if since else None)


def annotate_phoenix(result: RunResult, doc: ReportDocument, url: str, *, report_url: str | None = None) -> int:
    """Write the run's verdicts (``doc``: its report, as :func:`write_run_reports` returns it)
    back to the Phoenix at ``url`` as annotations on each graded trace's root span (a re-run
    updates them); returns how many."""
    from groundjudge.load.phoenix import phoenix_client
    from groundjudge.report.phoenix import annotate

    return annotate(phoenix_client(url), doc, _graded_spans(result.dataset), report_url)


def write_run_reports(result: RunResult, out_dir: str | Path, *, junit: str | Path | None = None,
                      profile: Any = None, history: str | Path | None = None,
                      log: IO[str] | None = None) -> ReportDocument:
    """report.json, cases.parquet, report.md, report.html, triage.md and triage.jsonl (and JUnit XML when asked;
    with ``profile``, the replaced system's own report beside them), all or none of them: a
    full disk half-way leaves the old files and raises ``StorageError``. With ``history``, the
    run is appended to that history once every report is written, and the HTML shows the trend
    with this run; a history that cannot be read or written is said in one line on ``log``
    (default stderr) and costs the run nothing else. Returns the typed document report.json was
    written from (:class:`~groundjudge.report.document.ReportDocument`): the run's metrics,
    verdicts, gates and calibration as records, for :func:`write_otel_events`,
    :func:`annotate_phoenix` or a notebook to read (``doc.gates.passed``,
    ``doc.per_config[cfg].aggregate[metric].value``)."""
    return _write_run_reports(result, Path(out_dir), junit=junit, profile=profile, history=history,
                              log=log if log is not None else sys.stderr)


def _write_run_reports(result: RunResult, out_dir: Path, *, junit: str | Path | None, profile: Any,
                       history: str | Path | None, log: IO[str]) -> ReportDocument:
    from concurrent.futures import ThreadPoolExecutor

    from groundjudge.files import together, write_json_atomic, write_text_atomic
    from groundjudge.report.cases_parquet import cases_table, write_cases_parquet
    from groundjudge.report.compare import document_agreement, render_agreement_markdown
    from groundjudge.report.document import write_document
    from groundjudge.report.gates_md import render_gates_markdown
    from groundjudge.report.html import render_html
    from groundjudge.report.judge_section import render_judge_markdown
    from groundjudge.report.junit import junit_xml
    from groundjudge.report.markdown import render_markdown
    from groundjudge.report.selective_section import render_selective_markdown
    from groundjudge.report.stability_section import render_stability_markdown
    from groundjudge.report.triage import write_triage_files

    # the inputs are hashed for the history in a thread while the report is put together
    # (reading and hashing let go of the interpreter)
    with ThreadPoolExecutor(1) as pool:
        hashing = pool.submit(_input_hashes, result.config) if history is not None else None
        typed: ReportDocument = report_document(result)
        text = render_markdown(typed, title="groundjudge report", preface=render_gates_markdown(typed.gates))
        text += ("\n" + render_judge_markdown(typed) + render_selective_markdown(typed)
                 + render_stability_markdown(typed.stability))
        pending = (history_record(result, typed, out_dir, history, hashes=hashing.result())
                   if history is not None and hashing is not None else None)
    if profile is not None:
        text += f"\n## Profile `{profile.name}` (its own definitions)\n\n" + profile.markdown
        agreement = document_agreement(typed, profile.name, profile.report)
        if agreement is not None:
            text += "\n" + render_agreement_markdown(agreement)
    pairs = sum(len(section.per_case) for section in typed.per_config.values())
    try:
        with together():
            if profile is not None:
                write_json_atomic(out_dir / f"profile-{profile.name}.json", profile.report)
                write_text_atomic(out_dir / f"profile-{profile.name}.md", profile.markdown)
            write_document(out_dir / "report.json", typed, compact=pairs > COMPACT_JSON_ABOVE)
            write_text_atomic(out_dir / "report.md", text)
            write_triage_files(result.dataset, typed, out_dir / "triage.jsonl", out_dir / "triage.md")
            write_text_atomic(out_dir / "report.html", render_html(typed, result.dataset,
                                                                   pending.trend if pending else None))
            # last: the memory Arrow takes for it stays with Arrow's allocator after, so the
            # others' memory is not added to it
            write_cases_parquet(out_dir / "cases.parquet", cases_table(result.metrics, result.judge))
            if junit is not None:
                write_text_atomic(Path(junit), junit_xml(typed))
    except OSError as exc:
        where = exc.filename or out_dir
        raise StorageError(f"{where}: could not write the run's reports ({exc.strerror or exc}); none was replaced"
                           + (" and the run was not added to the history" if pending else "")
                           + ". Free space or fix the folder's permissions and run again: every judgment made is "
                             "in the judge cache, so the run costs no call again") from None
    if pending is not None:
        from groundjudge.history.record import append_history

        append_history(pending)
        if pending.problem:
            from groundjudge.inert import terminal

            log.write(f"warning: {terminal(pending.problem)}\n")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write(render_gates_markdown(typed.gates) + "\n")
    return typed


# --- deterministic metrics only ------------------------------------------------------------

def compute_metrics(config: Config) -> MetricsDocument | dict[str, Any]:
    """Load the inputs named by ``config`` and return the metrics document (nothing is written):
    typed (:class:`~groundjudge.report.document.MetricsDocument`) for trace inputs; for TREC
    qrels and run, metrics.json's content as :func:`~groundjudge.report.trec_json.trec_document`
    builds it, a dict (only the settings and accounting TREC inputs have, trec_eval's counts as
    integers), which :func:`write_metrics_reports` writes as it is."""
    inputs = config.inputs
    if inputs.qrels or inputs.run:
        from groundjudge.report.trec_json import trec_document

        if not (inputs.qrels and inputs.run):
            raise InputError.one(_where(config), None, "qrels/run", "give both --qrels and --run for TREC files")
        return trec_document(inputs.qrels, inputs.run, tuple(sorted(set(config.metrics.ks))))
    settings = metric_settings(config)
    from groundjudge.metrics.evaluate import evaluate_dataset
    from groundjudge.report.document import metrics_document

    dataset = load_inputs(config)
    return metrics_document(dataset, evaluate_dataset(dataset, settings), settings)


def _profile_format(config: Config, name: str) -> None:
    """Raise unless the inputs can be read as the profile's format ``name``: named so
    (``--format``), or detected as it, or claimed by no foreign format (the shapes a
    system shares with the native contracts are its own files when its profile is asked for)."""
    from groundjudge.load.adapters import NATIVE, detect_format

    inputs = config.inputs
    if not inputs.golden or not inputs.traces:
        raise InputError.one(_where(config), None, "profile", "a profile needs --golden and --traces")
    if inputs.format == name:
        return
    if inputs.format not in ("auto", name):
        raise InputError.one(_where(config), None, "format", f"the {name} profile reads {name} files, not "
                                                             f"--format {inputs.format}")
    found = detect_format(inputs.golden, inputs.traces)
    if found not in (name, NATIVE):
        raise InputError.one(inputs.golden, 1, "format", f"the {name} profile reads {name} files, these look like "
                                                         f"{found} files")


def for_profile(config: Config, name: str) -> Config:
    """``config`` with its inputs read in the format of profile ``name`` (an input error when
    they are in another system's format) and, where the profile reports judge criteria of a
    rubric version of its own and the config names no version of that rubric, that version."""
    from groundjudge.profiles import profile_rubric

    _profile_format(config, name)
    update: dict[str, Any] = {"inputs": config.inputs.model_copy(update={"format": name})}
    wanted = profile_rubric(name)
    if wanted is not None and config.judge.rubric == wanted[0] and config.judge.rubric_version is None:
        update["judge"] = config.judge.model_copy(update={"rubric_version": wanted[1]})
    return config.model_copy(update=update)


def judge_findings(result: RunResult) -> Any:
    """What the run's judge found, as the plain values a profile reads
    (:class:`groundjudge.profiles.JudgeFindings`): per (config, case) the verdicts, or why
    there is none (decided without a judge, judge_error, out of budget); per judge metric
    whether the judge is trusted for it."""
    from groundjudge.profiles import JudgedCase, JudgeFindings

    judge = result.judge
    cases: dict[tuple[str, str], JudgedCase] = {}
    for s in result.selections:
        if not s.judge:
            cases[(s.config_id, s.case_id)] = JudgedCase("not_sent", s.reason)
    for cfg, section in judge.per_config.items():
        for cid, case in section.cases.items():
            cases[(cfg, cid)] = JudgedCase(case.status, case.reason,
                                           {n: v.label for n, v in case.criteria.items()},
                                           {n: v.value for n, v in case.criteria.items()})
    ref = judge.identity.rubric
    return JudgeFindings(rubric=f"{ref.id}/v{ref.version}", model=judge.identity.model,
                         criteria={c.name: c.metric for c in judge.criteria},
                         kinds={c.name: c.kind for c in judge.criteria}, cases=cases,
                         trust={m: (t.trusted, t.reason) for m, t in result.gates.trust.items()})


def profile_report(config: Config, name: str, result: RunResult | None = None) -> Any:
    """The replaced system's own report, from the inputs in its own format; with ``result``
    (a run's), what its judge found too, for a profile that reports it."""
    from groundjudge.profiles import run_profile

    _profile_format(config, name)
    inputs = config.inputs
    return run_profile(name, inputs.golden, inputs.traces, inputs.live,  # type: ignore[arg-type]
                       profile_settings(config, name), judge=judge_findings(result) if result is not None else None,
                       corpus=inputs.corpus)


def write_metrics_reports(doc: MetricsDocument | dict[str, Any], out_dir: str | Path,
                          profile: Any = None) -> MetricsDocument:
    """metrics.json and report.md of ``doc`` (what :func:`compute_metrics` returned), and with
    ``profile`` the replaced system's own report beside them and in metrics.json. Returns the
    typed document report.md was rendered from (a TREC document, a dict, validated once)."""
    from groundjudge.files import write_json_atomic, write_text_atomic
    from groundjudge.report.markdown import render_markdown
    from groundjudge.report.metrics_document import MetricsDocument

    out_dir = Path(out_dir)
    if isinstance(doc, MetricsDocument):
        from groundjudge.report.document import document_json

        typed, content = doc, document_json(doc)
    else:  # a TREC document: written as it is (its counts stay integers), rendered from its model
        typed, content = MetricsDocument.model_validate(doc), doc
    text = render_markdown(typed)
    if profile is not None:
        from groundjudge.report.compare import document_agreement, render_agreement_markdown

        section = {"name": profile.name, "passed": profile.passed, "report": profile.report,
                   "notes": list(profile.notes)}
        text += f"\n## Profile `{profile.name}` (its own definitions)\n\n" + profile.markdown
        agreement = document_agreement(typed, profile.name, profile.report)
        if agreement is not None:
            section["agreement"] = agreement
            text += "\n" + render_agreement_markdown(agreement)
        content = {**content, "profile": section}
        write_json_atomic(out_dir / f"profile-{profile.name}.json", profile.report)
        write_text_atomic(out_dir / f"profile-{profile.name}.md", profile.markdown)
    write_json_atomic(out_dir / "metrics.json", content)
    write_text_atomic(out_dir / "report.md", text)
    return typed


# --- calibration ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Calibration:
    """What `calibrate` wrote, and where it stands among this judge's records."""

    record: dict[str, Any]  # as written, with ``_path``
    path: Path
    replaced: bool  # it replaced the earlier record of exactly the same evidence (and no other)
    trust: dict[str, TrustStatus]  # criterion -> trust now, decided by the rule over every record of this judge
    notes: list[str]  # what was written, what else exists for this judge, which record decides


def calibrate(config: Config, *, report_path: Path | None = None, verdicts_path: Path | None = None,
              judge_name: str | None = None, primary_rater: str | None = None, seed: int = 0,
              target_width: float = 0.2, position_probe: dict[str, Any] | None = None,
              stability: dict[str, Any] | None = None) -> Calibration:
    """Join judge verdicts with human labels, write the calibration record beside the judge's
    others, report trust."""
    from groundjudge.calibrate.evidence import write_notes
    from groundjudge.calibrate.record import build_record, find_records, write_record
    from groundjudge.calibrate.trust import exact_records, trust_status
    from groundjudge.calibrate.verdicts import items_from_judge, load_labels, verdicts_from_jsonl, verdicts_from_report
    from groundjudge.judge.results import CriterionInfo

    where = _where(config)
    if not config.inputs.labels:
        raise InputError.one(where, None, "labels", "give human labels with --labels")
    if (report_path is None) == (verdicts_path is None):
        raise InputError.one(where, None, "report/verdicts", "give exactly one of --report and --verdicts")
    find_records(config.trust.records_dir)  # an unreadable record stops us before anything is written
    criteria: list[Any]
    judged = None
    if report_path is not None:
        judged = verdicts_from_report(report_path)
        items, criteria = items_from_judge(judged), judged.criteria
        identity = judged.identity.model_dump()
    else:
        if not judge_name:
            raise InputError.one(where, None, "judge-name", "--verdicts needs --judge-name (the judge's model id)")
        rubric = rubric_for(config)
        criteria = [CriterionInfo(name=c.name, kind=c.kind, labels=list(c.labels), metric=c.metric_name)
                    for c in rubric.criteria]
        items = verdicts_from_jsonl(verdicts_path, criteria)  # type: ignore[arg-type]
        digest = hashlib.sha256(Path(verdicts_path).read_bytes()).hexdigest()  # type: ignore[arg-type]
        identity = {"rubric": {"id": "external", "version": 1, "hash": digest}, "model": judge_name, "decoding": {}}
    humans = load_labels(config.inputs.labels, criteria)
    if primary_rater is not None and primary_rater not in humans:
        raise InputError.one(where, None, "primary-rater", f"no labels from {primary_rater!r}; have {sorted(humans)}")
    record = build_record(items, identity, humans, criteria, primary_rater=primary_rater,
                          label_files=config.inputs.labels, verdicts_file=report_path or verdicts_path, seed=seed,
                          target_width=target_width, target_agreement=config.trust.target_agreement,
                          risk=config.trust.risk)
    if position_probe is not None:
        record["position_probe"] = position_probe
    if stability is not None:
        record["stability"] = stability
    fitting = _fitting(config, identity, humans)
    if fitting is not None:  # an aligned rubric: does this record score labels it was fitted on?
        record["fitting"] = fitting
    review_note = _add_review(config, record, judged, humans)
    path, replaced = write_record(record, config.trust.records_dir)
    records = find_records(config.trust.records_dir)
    written = next(r for r in records if r["_path"] == str(path))
    trust = {c: trust_status(c, identity, records, trust_rules(config)) for c in record["criteria"]}
    notes = write_notes(written, replaced, exact_records(identity, records))
    if fitting is not None and fitting["predictions"] == "in_sample":  # trust.in_sample: it never decides
        notes = [notes[0], f"this record is in-sample ({fitting['reason']}): it never decides trust"]
    elif report_path is not None and _judged_rubric(config, **_ref_args(identity["rubric"])) is None:
        ref = identity["rubric"]
        notes.append(f"rubric {ref['id']}/v{ref['version']} with this hash is neither in the rubrics folder ([judge] "
                     "rubrics_dir) nor installed: were it fitted by `groundjudge align`, whether these labels were "
                     "used to fit it is not checked")
    return Calibration(record=written, path=path, replaced=replaced, trust=trust, notes=notes + review_note)


def _ref_args(ref: dict[str, Any]) -> dict[str, Any]:
    return {"rubric_id": ref["id"], "version": ref["version"], "content_hash": ref["hash"]}


def _judged_rubric(config: Config, rubric_id: str, version: int, content_hash: str) -> Rubric | None:
    """The rubric a report names, from the rubrics folder ``rubric_for`` reads, else from the
    packaged ones; None where neither holds that id and version with that hash."""
    from groundjudge.judge.rubric import load_rubric, packaged_rubrics

    folder = config.judge.rubrics_dir or (Path("rubrics") if Path("rubrics").is_dir() else None)
    for where in ([folder] if folder is not None else []) + [None]:
        try:
            if where is None:
                with packaged_rubrics() as installed:
                    rubric = load_rubric(installed, rubric_id, version)
            else:
                rubric = load_rubric(where, rubric_id, version)
        except InputError:
            continue
        if rubric.content_hash == content_hash:
            return rubric
    return None


def _fitting(config: Config, identity: dict[str, Any], humans: dict[str, Any]) -> dict[str, Any] | None:
    """For a rubric fitted by ``groundjudge align`` (or given demonstrations), the packaged
    default included: whether the labels compared include questions it was fitted on
    (in-sample, never gates) or not (held out). A rubric found nowhere, or another file with the
    same name, is no fitted rubric this run can vouch for: the record stays as any other."""
    from groundjudge.calibrate.align import fitting_of

    ref = identity["rubric"]
    rubric = _judged_rubric(config, **_ref_args(ref))
    questions = {key[0] for labels in humans.values() for key in labels}
    return fitting_of(rubric, questions)


def try_demos(config: Config, report_path: Path, k: int, *, rubric: Rubric | None = None, seed: int = 0,
              go: bool = False, rater: str | None = None, on_budget: Any = None, log: IO[str] | None = None,
              quiet: bool = False) -> Any:
    """Pick ``k`` demonstrations from the run's labelled claims and count what trying them costs;
    with ``go``, ask the judge with them about every labelled answer to the other questions and
    compare with the run's own verdicts (``calibrate.demos``). ``rubric``: the one the report
    was judged with (default: the configured one); ``on_budget(trial)`` is called with the
    demonstrations and the budget before anything is asked. Returns the ``Trial``."""
    from groundjudge.calibrate.demos_trial import plan_trial, read_span_labels, run_trial
    from groundjudge.calibrate.verdicts import verdicts_from_report
    from groundjudge.metrics.evaluate import evaluate_dataset

    where = _where(config)
    if not config.inputs.labels:
        raise InputError.one(where, None, "labels", "give human labels with --labels")
    if k < 2:
        raise InputError.one(where, None, "demos", f"{k} demonstrations: give at least 2 (one supported, one not)")
    base_run = verdicts_from_report(report_path)
    rubric = rubric or rubric_for(config)
    if base_run.identity.rubric.hash != rubric.content_hash:
        raise InputError.one(report_path, None, "judge.identity.rubric",
                             f"the report was judged with {base_run.identity.rubric.id} v{base_run.identity.rubric.version}, "
                             f"not {rubric.key}")
    if rubric.claim_questions is None:
        raise InputError.one(where, None, "judge.rubric", "demonstrations need a claim_check rubric")
    labels = read_span_labels(config.inputs.labels, rater)
    dataset = load_inputs(config)
    selections = select(config, dataset, evaluate_dataset(dataset, metric_settings(config)), rubric)
    with open_judge(config, rubric=rubric, log=log, quiet=quiet) as judge:
        if base_run.identity.model != judge.model:
            raise InputError.one(report_path, None, "judge.identity.model",
                                 f"the report was judged by {base_run.identity.model!r}; the trial would ask "
                                 f"{judge.model!r}, so the two could not be compared")
        trial, trial_sel = plan_trial(rubric, base_run, selections, labels, k, seed, judge)
    if on_budget is not None:
        on_budget(trial)
    if not go:
        return trial

    def judge_with(demo_rubric: Rubric) -> Any:
        return open_judge(config, rubric=demo_rubric, log=log, quiet=quiet)

    return run_trial(trial, trial_sel, base_run, labels, judge_with, seed)


def _add_review(config: Config, record: dict[str, Any], judged: JudgeRun | None,
                humans: dict[str, Any]) -> list[str]:
    """Add the disagreement review (``calibrate.review``) to each criterion of the record that
    the judge's claims decide; the note to print where there is none, and why."""
    from groundjudge.calibrate.review import REVIEWED_SCORES, load_spans, review

    if judged is None:
        return ["disagreement review: none (verdicts from a JSONL file carry no claims to review)"]
    ref = judged.identity.rubric
    rubric = _judged_rubric(config, ref.id, ref.version, ref.hash)
    if rubric is None:  # the criteria's scoring is not known, so neither is which claims decided them
        return [(f"disagreement review: none (rubric {ref.id} v{ref.version} with hash {ref.hash[:12]} is "
                 "not found here: set [judge] rubrics_dir to its folder)")]
    names = [c.name for c in rubric.criteria if c.kind == "binary" and c.score_kind in REVIEWED_SCORES]
    primary = record["primary_rater"]
    spans = load_spans(config.inputs.labels).get(primary, {})
    for name, block in review(judged, humans[primary], spans, names).items():
        record["criteria"][name]["review"] = block
    return []


def position_probe(config: Config, report_path: Path, judge: JudgeSession, *, progress: Any = None,
                   ) -> dict[str, Any]:
    """Re-judge the labelled, judged cases of ``report_path`` with their context order reversed;
    count verdict flips (``calibrate.position``). Each flip rate is over the items judged both
    ways. The report must have been judged by this judge's model and rubric (else InputError)."""
    from groundjudge.calibrate.position import flip_rates, reversed_selections
    from groundjudge.calibrate.verdicts import items_from_judge, load_labels, lookup, verdicts_from_report
    from groundjudge.judge.run import judge_selected

    judged = verdicts_from_report(report_path)
    if judged.identity.model != judge.model:
        raise InputError.one(report_path, None, "judge.identity.model",
                             f"report was judged by {judged.identity.model!r}, the probe would use {judge.model!r}")
    if judged.identity.rubric.hash != judge.rubric.content_hash:
        raise InputError.one(report_path, None, "judge.identity.rubric", "report was judged with another rubric")
    items = items_from_judge(judged)
    humans = load_labels(config.inputs.labels, judged.criteria) if config.inputs.labels else {}
    labelled = {k for k in items if any(lookup(h, k) is not None for h in humans.values())} if humans else set(items)
    probe = reversed_selections(load_inputs(config), labelled)
    results, totals = judge_selected(judge, probe, progress)
    return flip_rates(items, judged.criteria, results, probed=len(probe), requests=totals.usage.requests)


def stability_plan(config: Config, report_path: Path, judge: JudgeSession, *, size: int, seed: int) -> Any:
    """The seeded sample of the questions behind ``report_path``'s verdicts that
    ``groundjudge calibrate --stability N`` re-asks (``calibrate.reask.plan``). The report must
    have been judged by this judge's model and rubric, a claim_check rubric (else InputError)."""
    from groundjudge.calibrate.reask import plan
    from groundjudge.calibrate.verdicts import verdicts_from_report

    judged = verdicts_from_report(report_path)
    if judge.rubric.protocol != "claim_questions":
        raise InputError.one(_where(config), None, "stability",
                             f"rubric {judge.rubric.id} asks no one-token questions with probabilities: nothing to "
                             "re-ask (use a claim_check rubric)")
    if judged.identity.model != judge.model:
        raise InputError.one(report_path, None, "judge.identity.model",
                             f"report was judged by {judged.identity.model!r}, the re-asks would use {judge.model!r}")
    if judged.identity.rubric.hash != judge.rubric.content_hash or judged.identity.decoding != judge.decoding():
        raise InputError.one(report_path, None, "judge.identity",
                             "report was judged with another rubric or other decoding settings than the re-asks would use")
    return plan(judge, judged, load_inputs(config), size=size, seed=seed)


def stability_reask(judge: JudgeSession, planned: Any, repeats: int, *, on_call: Any = None) -> dict[str, Any]:
    """Re-ask the planned questions ``repeats`` times each, bypassing the cache; the record's
    ``stability`` block (``calibrate.stability``)."""
    from groundjudge.calibrate.reask import reask

    return reask(judge, planned, repeats, on_call=on_call)


# --- comparing runs ------------------------------------------------------------------------

def compare(a: Path, b: Path | None, *, config_a: str | None = None, config_b: str | None = None,
            strict_chunker_version: bool = False, seed: int = 0) -> dict[str, Any]:
    """Compare two runs (or, with ``b`` None, two configs of one run), each a run folder or its
    metrics.json / report.json: per-metric deltas with a paired test, per-case outcomes, the
    judge's values where both are report.json files, and a profile's own comparison of the
    same two configs beside them (``report.compare.compare_run_files``)."""
    from groundjudge.report.compare import compare_run_files

    return compare_run_files(a, b, config_a=config_a, config_b=config_b,
                             strict_chunker_version=strict_chunker_version, seed=seed)
