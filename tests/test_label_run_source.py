"""Reading a report's judge section for labelling: confidences from claim_check fields when
present, the claim-verdict spread otherwise, and only judged items."""

from __future__ import annotations

import pytest

from groundjudge.label.run_source import judged_items
from groundjudge.load.errors import InputError


def case(claims, faithfulness, **scores):
    return {"status": "judged", "scores": {"faithfulness": faithfulness, "correctness": 2,
                                          "citation_support": None, **scores}, "claims": claims}


def claim(verdict, support):
    return {"claim": f"a {verdict} claim", "cited": [], "verdict": verdict, "support": support}


DOC = {"judge": {"provenance": {}, "per_config": {"cfg": {"per_case": {
    "given": case([claim("supported", 0.9)], 1.0, faithful_confidence=0.7),
    "claim_check": case([claim("supported", 0.95), claim("unsupported", 0.2)], 0.5),
    "grounded": case([claim("supported", ["c1"]), claim("unsupported", []), claim("supported", ["c2"]),
                      claim("partially_supported", [])], 0.5),
    "skipped": {"status": "skipped", "reason": "decided deterministically"},
    "error": {"status": "judge_error", "reason": "timeout"},
}}}}}


def test_confidences_and_spread():
    items = {item.key[0]: item for item in judged_items(DOC)}
    assert sorted(items) == ["claim_check", "given", "grounded"]
    given = items["given"]
    assert (given.confidence, given.confidence_source, given.labels["faithful"]) == (0.7, "faithful_confidence", True)
    # unfaithful verdict; P(faithful) = lowest claim support 0.2, so the verdict is right with 0.8
    cc = items["claim_check"]
    assert cc.labels["faithful"] is False and cc.confidence == pytest.approx(0.8)
    assert cc.confidence_source == "claim support" and cc.claims[1]["support"] == 0.2
    grounded = items["grounded"]  # support lists chunk ids there: no confidence, the spread instead
    assert grounded.confidence is None and grounded.confidence_source == "none"
    assert grounded.spread == pytest.approx(1 - abs(2 * (2.5 / 4) - 1))
    assert all(c["support"] is None for c in grounded.claims)


def test_not_a_run_report():
    with pytest.raises(InputError):
        judged_items({"per_config": {}})
