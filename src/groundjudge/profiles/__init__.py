"""Profiles: each replaced system's own metrics, report and gate, computed with its own
definitions from its own files (SPEC 7), reported beside groundjudge's native metrics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundjudge.load.adapters import day39 as day39_format
from groundjudge.load.adapters import kb_eval as kb_format
from groundjudge.load.adapters import wfgy as wfgy_format
from groundjudge.load.adapters import wfgy_chunking as chunking_format
from groundjudge.errors import InputError
from groundjudge.profiles import day39, kb_eval, wfgy, wfgy_chunking


@dataclass(frozen=True)
class ProfileResult:
    name: str
    report: dict[str, Any]
    markdown: str
    passed: bool | None  # the system's own gate verdict; None where it has no gate


def _wfgy(golden: Path, traces: Sequence[Path], live: Sequence[Path]) -> ProfileResult:
    gold = [g for _, g in wfgy_format.read_gold(golden)]
    runs = [t for path in traces for _, t in wfgy_format.read_traces(path)]
    report = wfgy.report(gold, runs)
    return ProfileResult("wfgy", report, wfgy.render_markdown(report), bool(report["pass"]))


def _chunking(golden: Path, traces: Sequence[Path], live: Sequence[Path]) -> ProfileResult:
    gold = [g for _, g in chunking_format.read_gold(golden)]
    shadow = [t for path in traces for _, t in chunking_format.read_traces(path)]
    live_runs = [t for path in live for _, t in chunking_format.read_traces(path)] or None
    report = wfgy_chunking.report(gold, shadow, live_traces=live_runs)
    return ProfileResult("wfgy-chunking", report, wfgy_chunking.render_markdown(report), bool(report["pass"]))


def _kb_eval(golden: Path, traces: Sequence[Path], live: Sequence[Path]) -> ProfileResult:
    queries = kb_format.read_golden(golden)
    runs = [kb_format.read_run(path, queries) for path in traces]
    if len(runs) == 2:
        report = kb_eval.compare_runs(queries, runs[0], runs[1])
    elif len(runs) == 1:
        report = kb_eval.report(queries, runs[0])
    else:
        raise InputError.one(golden, None, "traces", "the kb-eval profile takes one results file, or two to compare")
    return ProfileResult("kb-eval", report, kb_eval.render_markdown(report), None)


def _day39(golden: Path, traces: Sequence[Path], live: Sequence[Path]) -> ProfileResult:
    cases = day39_format.read_golden(golden)
    report = day39.report(cases, day39_format.read_outputs(list(traces), cases))
    return ProfileResult("day39", report, day39.render_markdown(report), report["exit_code"] == 0)


PROFILES: dict[str, Callable[[Path, Sequence[Path], Sequence[Path]], ProfileResult]] = {
    "wfgy": _wfgy, "wfgy-chunking": _chunking, "kb-eval": _kb_eval, "day39": _day39,
}


def run_profile(name: str, golden: Path, traces: Sequence[Path], live: Sequence[Path] = ()) -> ProfileResult:
    """The system's own report from files in its own format (``name`` is also the format)."""
    if name not in PROFILES:
        raise InputError.one(golden, None, "profile", f"unknown profile {name!r}; known: {', '.join(PROFILES)}")
    return PROFILES[name](Path(golden), [Path(t) for t in traces], [Path(p) for p in live])
