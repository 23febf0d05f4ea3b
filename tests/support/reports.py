"""Typed run reports for tests of the renderers: a ``ReportDocument`` holding only the parts a
test gives (a judge run, gates, a stability check), the rest empty."""

from __future__ import annotations

from collections.abc import Sequence

from groundjudge.calibrate.stability import StabilityCheck
from groundjudge.calibrate.trust import TrustRules
from groundjudge.gate import GateReport
from groundjudge.judge.results import JudgeIdentity, JudgeRun, JudgeTotals, RubricRef, Usage
from groundjudge.provenance import provenance
from groundjudge.report.document import (
    Accounting,
    CalibrationSummary,
    MetricsSettings,
    Provenance,
    ReportDocument,
)


def no_judge() -> JudgeRun:
    """A judge run that judged nothing."""
    return JudgeRun(identity=JudgeIdentity(rubric=RubricRef(id="r", version=1, hash="h"), model="m", decoding={}),
                    base_url=None, criteria=[], to_judge=0, skip_reasons={},
                    totals=JudgeTotals(usage=Usage(), cache_hits=0, judge_errors=0, done=0, stopped=None,
                                       output_mode=None),
                    cache={}, per_config={})


def no_gates() -> GateReport:
    return GateReport(passed=True, failed=[], results=[], gated_configs=[], ungated_acl_leaks={}, trust={},
                      rules=TrustRules())


def report_of(configs: Sequence[str], *, judge: JudgeRun | None = None, gates: GateReport | None = None,
              calibration: CalibrationSummary | None = None, stability: StabilityCheck | None = None) -> ReportDocument:
    """The report of a run over ``configs`` with these parts (no metrics, no judgement, no gate
    unless given)."""
    return ReportDocument(
        provenance=Provenance.model_validate(provenance()), inputs={}, settings=MetricsSettings(ks=[]),
        configs=list(configs),
        accounting=Accounting(cases=0, scored={}, missing_trace={}, missing_text={}, unresolved_chunk_ids={}),
        aggregate={}, per_config={}, judge=judge or no_judge(), gates=gates or no_gates(), calibration=calibration,
        stability=stability)
