"""Profiles: each replaced system's own metrics, report and gate, computed with its own
definitions from its own files (SPEC 7), reported beside groundjudge's native metrics.

Each profile module ends with a ``PROFILE`` entry for the format of the same name;
``BUILT_IN`` below registers them (:mod:`.registry` holds the registry).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from groundjudge.load.adapters import wfgy_chunking as chunking_format
from groundjudge.profiles import day39, kb_eval, wfgy, wfgy_chunking
from groundjudge.profiles.registry import (
    CaseOutcomes,
    Flag,
    JudgedCase,
    JudgeFindings,
    Knob,
    Profile,
    ProfileResult,
    ProfileSettings,
    evidence_overlap,
    get_profile,
    profile_knobs,
    profile_names,
    profile_outcomes,
    profile_rubric,
    profile_settings,
    register_profile,
    relative_to_config,
    run_profile,
    unregister_profile,
)

__all__ = [
    "BUILT_IN",
    "CaseOutcomes",
    "Flag",
    "JudgeFindings",
    "JudgedCase",
    "Knob",
    "Profile",
    "ProfileResult",
    "ProfileSettings",
    "get_profile",
    "profile_knobs",
    "profile_names",
    "profile_outcomes",
    "profile_rubric",
    "profile_settings",
    "register_profile",
    "relative_to_config",
    "run_profile",
    "unregister_profile",
]


# TODO(issue 10): move into the wfgy-chunking profile module as its PROFILE once that module is split.
def _chunking_from_files(golden: Path, traces: Sequence[Path], live: Sequence[Path] = (),
                         settings: wfgy_chunking.ChunkingSettings | None = None) -> ProfileResult:
    gold = [g for _, g in chunking_format.read_gold(golden)]
    qids = [g.qid for g in gold]
    runs = {path: [t for _, t in chunking_format.read_traces(path)] for path in (*traces, *live)}
    for path, mine in runs.items():  # every file is evidence about this gold set, or an input error
        evidence_overlap(path, [t.qid for t in mine], golden, qids)
    shadow = [t for path in traces for t in runs[path]]
    live_runs = [t for path in live for t in runs[path]] or None
    options = (settings or wfgy_chunking.ChunkingSettings()).report_options()
    report = wfgy_chunking.report(gold, shadow, live_traces=live_runs, **options)
    return ProfileResult(chunking_format.FORMAT_NAME, report, wfgy_chunking.render_markdown(report),
                         bool(report["pass"]))


BUILT_IN: tuple[Profile, ...] = (
    wfgy.PROFILE,
    Profile(chunking_format.FORMAT_NAME, _chunking_from_files, wfgy_chunking.ChunkingSettings),
    kb_eval.PROFILE,
    day39.PROFILE,
)

for _profile in BUILT_IN:
    register_profile(_profile)
