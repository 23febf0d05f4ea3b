"""Reading a report's judge section for labelling: confidences from claim_check's criterion
confidence when present, the claim-verdict spread otherwise, and only judged items."""

from __future__ import annotations

import pytest

from groundjudge.errors import InputError
from groundjudge.judge.claim_result import ClaimResult
from groundjudge.judge.results import (
    CaseJudgement,
    ConfigJudgement,
    CriterionInfo,
    CriterionValue,
    JudgeIdentity,
    JudgeRun,
    JudgeTotals,
    RubricRef,
    Usage,
    summarize_config,
)
from groundjudge.label.run_source import judged_items

CRITERIA = [CriterionInfo(name="faithful", kind="binary", labels=[True, False], metric="faithfulness")]


def claim(verdict: str, confidence: float | None) -> ClaimResult:
    return ClaimResult(claim=f"a {verdict} claim", verdict=verdict, klass="uncited" if verdict == "supported"
                       else "unsupported" if verdict == "unsupported" else "partial", confidence=confidence)


def judged(case_id: str, claims: list[ClaimResult], label: bool, confidence: float | None) -> CaseJudgement:
    return CaseJudgement(case_id=case_id, config_id="cfg", status="judged", claims=claims,
                         criteria={"faithful": CriterionValue(label=label, value=0.5, confidence=confidence)})


def report() -> dict:
    cases = {
        "claim_check": judged("claim_check", [claim("supported", 0.95), claim("unsupported", 0.2)], False, 0.2),
        "grounded": judged("grounded", [claim("supported", None), claim("unsupported", None),
                                        claim("supported", None), claim("partially_supported", None)], False, None),
        "skipped": CaseJudgement(case_id="skipped", config_id="cfg", status="skipped", reason="decided"),
        "error": CaseJudgement(case_id="error", config_id="cfg", status="judge_error", reason="timeout"),
    }
    run = JudgeRun(identity=JudgeIdentity(rubric=RubricRef(id="claim_check", version=1, hash="h"), model="m",
                                          decoding={}),
                   base_url=None, criteria=CRITERIA, to_judge=4, skip_reasons={},
                   totals=JudgeTotals(usage=Usage(), cache_hits=0, judge_errors=1, done=4, stopped=None,
                                      output_mode=None),
                   cache={}, per_config={"cfg": ConfigJudgement(summary=summarize_config(cases, CRITERIA), cases=cases)})
    return {"schema_version": 2, "judge": run.model_dump(mode="json", by_alias=True)}


def test_confidences_and_spread():
    items = {item.key[0]: item for item in judged_items(report())}
    assert sorted(items) == ["claim_check", "grounded"]
    # unfaithful verdict; P(faithful) = lowest claim support 0.2, so the verdict is right with 0.8
    cc = items["claim_check"]
    assert cc.labels["faithful"] is False and cc.confidence == pytest.approx(0.8)
    assert cc.confidence_source == "claim support" and cc.claims[1]["support"] == 0.2
    grounded = items["grounded"]  # no probabilities: no confidence, the spread instead
    assert grounded.confidence is None and grounded.confidence_source == "none"
    assert grounded.spread == pytest.approx(1 - abs(2 * (2.5 / 4) - 1))
    assert all(c["support"] is None for c in grounded.claims)


def test_not_a_run_report_or_an_old_one():
    with pytest.raises(InputError):
        judged_items({"per_config": {}})
    old = report()
    old["schema_version"] = 1
    with pytest.raises(InputError, match="schema version 1"):
        judged_items(old)
