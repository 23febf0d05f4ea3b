"""The day-39 profile (``--profile day39``): the lesson's eval runner and its report template.

- :mod:`.runner`: the runner's definitions, tables, fixed gate and exit code, exactly;
- :mod:`.settings`: ``[profile.day39]`` and the lesson's gate sets (section 13, per domain);
- :mod:`.template`: the report template filled in (summary with PASS / FAIL / PASS_WITH_RISK
  and the traces' versions, aggregate metrics, breakdown by tag, regression summary, top
  failed queries with root causes, release gate, decision);
- :mod:`.judged`, :mod:`.causes`, :mod:`.gates`: its judge columns, root causes and gates.

The judged columns (faithfulness, answer relevance) come from ``groundjudge run``, which
judges with ``claim_check`` v5 (:data:`RUBRIC`) unless the config names another version.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from groundjudge.errors import InputError
from groundjudge.load.adapters.day39 import FORMAT_NAME, read_golden, read_outputs
from groundjudge.profiles.day39.runner import (
    ABSTAIN_PHRASES,
    DEFAULT_GATES,
    K_VALUES,
    MAX_FAILED_ROWS,
    abstained,
    aggregate,
    aggregate_with_latency,
    behavior_score,
    citation_correctness,
    evaluate_one,
    ndcg_at_k,
    p95,
    percentile,
    precision_at_k,
    release_gate,
    report,
)
from groundjudge.profiles.day39.runner import (
    render_markdown as render_runner_markdown,
)
from groundjudge.profiles.day39.settings import GATE_SETS, Day39Settings
from groundjudge.profiles.day39.template import UnknownConfig, full_report, render_markdown
from groundjudge.profiles.registry import JudgeFindings, Profile, ProfileResult

__all__ = [
    "ABSTAIN_PHRASES",
    "DEFAULT_GATES",
    "GATE_SETS",
    "K_VALUES",
    "MAX_FAILED_ROWS",
    "PROFILE",
    "RUBRIC",
    "Day39Settings",
    "abstained",
    "aggregate",
    "aggregate_with_latency",
    "behavior_score",
    "citation_correctness",
    "evaluate_one",
    "from_files",
    "full_report",
    "ndcg_at_k",
    "p95",
    "percentile",
    "precision_at_k",
    "release_gate",
    "render_markdown",
    "render_runner_markdown",
    "report",
]

# The rubric version whose criteria the report's judged columns read: claim_check v5 judges
# faithfulness (as v4 does, verdict for verdict), answer relevance and completeness.
RUBRIC = ("claim_check", 5)


def from_files(golden: Path, traces: Sequence[Path], live: Sequence[Path] = (), *,
               settings: Day39Settings | None = None, judge: JudgeFindings | None = None) -> ProfileResult:
    """The lesson's report from its golden file and output files (and, after ``groundjudge
    run``, what the judge found); its release decision is the verdict: FAIL fails the run."""
    settings = settings or Day39Settings()
    cases = read_golden(golden)
    outputs = read_outputs(list(traces), cases)
    try:
        result = full_report(cases, outputs, settings, judge)
    except UnknownConfig as exc:
        raise InputError.one(traces[0] if traces else golden, None, f"profile.day39.{exc.field}", exc.message) from None
    decisions = {d["status"] for d in result["report_template"]["decision"].values()}
    status = next((s for s in ("FAIL", "PASS_WITH_RISK", "PASS") if s in decisions), None)
    return ProfileResult(FORMAT_NAME, result, render_markdown(result), result["exit_code"] == 0, status=status)


PROFILE = Profile(FORMAT_NAME, from_files, settings=Day39Settings, rubric=RUBRIC, reads_judge=True)
