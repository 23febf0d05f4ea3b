"""The judge stage's records: a config's summary against the plain reading of its cases."""

from __future__ import annotations

from groundjudge.judge.claim_result import ClaimResult
from groundjudge.judge.results import (
    CaseJudgement,
    ConfigJudgeSummary,
    CriterionInfo,
    CriterionValue,
    summarize_config,
)
from groundjudge.metrics.value import MetricValue

CRITERIA = [CriterionInfo(name="faithful", kind="binary", labels=[True, False], metric="faithfulness"),
            CriterionInfo(name="correct", kind="ordinal", labels=[0, 1, 2, 3], metric="correctness"),
            CriterionInfo(name="cited", kind="binary", labels=[True, False], metric="citation_accuracy")]


def claim(klass: str) -> ClaimResult:
    verdict = {"cited_support": "supported", "misattributed": "supported", "uncited": "supported",
               "partial": "partially_supported"}.get(klass, klass)
    return ClaimResult(claim="a claim", cited=("c#1",) if klass != "uncited" else (), verdict=verdict,  # type: ignore[arg-type]
                       klass=klass)  # type: ignore[arg-type]


def reference(cases: dict[str, CaseJudgement], criteria: list[CriterionInfo]) -> ConfigJudgeSummary:
    """The summary read case by case, criterion by criterion (as it was computed before one pass)."""
    judged = [c for c in cases.values() if c.status == "judged"]
    statuses: dict[str, int] = {}
    for c in cases.values():
        statuses[c.status] = statuses.get(c.status, 0) + 1
    labels: dict[str, dict[str, int]] = {}
    for crit in criteria:
        counts: dict[str, int] = {}
        for c in judged:
            label = c.label(crit.name)
            if label is not None:
                counts[str(label)] = counts.get(str(label), 0) + 1
        labels[crit.name] = counts
    classes: dict[str, int] = {}
    for c in judged:
        for one in c.claims:
            classes[one.klass] = classes.get(one.klass, 0) + 1
    errors = statuses.get("judge_error", 0)
    attempted = len(judged) + errors
    return ConfigJudgeSummary(
        metrics={crit.metric: MetricValue.mean(c.criteria[crit.name].value if crit.name in c.criteria else None
                                               for c in judged) for crit in criteria},
        labels=labels, claims=sum(len(c.claims) for c in judged), claim_classes=classes, status_counts=statuses,
        judge_error_rate=MetricValue(value=errors / attempted if attempted else None, n=attempted))


def test_the_summary_in_one_pass_is_the_plain_reading_to_the_bit() -> None:
    """Means add up in case order (0.1 + 0.2 + ... is not the same float in another order),
    counts keep the order their labels and classes are first met in; a criterion a case lacks, a
    value or label that is None, errors and skips are each counted as the plain reading counts them."""
    values = [0.1, 0.2, 0.3, 1 / 3, 0.7, None, 0.9, 2 / 3]
    cases: dict[str, CaseJudgement] = {}
    for n, value in enumerate(values):
        criteria = {"faithful": CriterionValue(label=None if value is None else value > 0.5, value=value),
                    "correct": CriterionValue(label=n % 4, value=float(n % 4))}
        if n % 3:
            criteria["cited"] = CriterionValue(label=n % 2 == 0, value=float(n % 2 == 0))
        classes = ["uncited", "cited_support", "partial", "misattributed", "contradicted"][n % 5:][:n % 3]
        cases[f"j{n}"] = CaseJudgement(case_id=f"j{n}", config_id="c", status="judged", criteria=criteria,
                                       claims=tuple(claim(k) for k in classes))
        if n % 4 == 1:
            cases[f"e{n}"] = CaseJudgement(case_id=f"e{n}", config_id="c", status="judge_error", reason="invalid")
        if n % 4 == 2:
            cases[f"s{n}"] = CaseJudgement(case_id=f"s{n}", config_id="c", status="skipped", reason="budget")
    summary = summarize_config(cases, CRITERIA)
    expected = reference(cases, CRITERIA)
    assert summary == expected  # the floats bit for bit (== on floats); and the dicts in the same order:
    assert [list(d) for d in (summary.labels, *summary.labels.values(), summary.claim_classes, summary.status_counts)] \
        == [list(d) for d in (expected.labels, *expected.labels.values(), expected.claim_classes,
                              expected.status_counts)]
    assert summary.metrics["citation_accuracy"].n == sum(1 for n in range(len(values)) if n % 3)


def test_the_summary_of_no_cases_and_of_no_criteria() -> None:
    assert summarize_config({}, CRITERIA) == reference({}, CRITERIA)
    only = {"e": CaseJudgement(case_id="e", config_id="c", status="judge_error", reason="invalid")}
    assert summarize_config(only, []) == reference(only, [])
