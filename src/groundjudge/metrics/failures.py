"""Which deterministic checks a case failed, named for people (reports) and the judge's selection."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the TREC path renders failures too, and never loads numpy or Arrow
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

# metric, predicate on its value, the words a report uses; order = how serious
CHECKS: tuple[tuple[str, str, str], ...] = (
    ("acl_leak", "eq1", "ACL leak: a chunk outside the user's tenant/roles was used"),
    ("behavior_correct", "eq0", "wrong behaviour"),
    ("forbidden_absent", "eq0", "answer contains a forbidden string"),
    ("must_contain", "eq0", "answer misses a required fact"),
    ("constraint_integrity", "eq0", "locked constraint not restated"),
    ("citation_scoped", "lt1", "citation outside the retrieved context"),
    ("must_cite_coverage", "lt1", "required citation missing"),
    ("context_recall", "lt1", "relevant chunk did not reach the context"),
    ("recall@10", "lt1", "relevant chunk not retrieved in top 10"),
    ("trace_error", "eq1", "the system reported an error"),
)


def deterministic_failures(values: Mapping[str, float | None]) -> list[str]:
    """The names of the failed checks, most serious first; checks with no value are skipped.

    A row of a metric table (``metrics.table.MetricValues``) has them already, found for all
    its table's rows at once by :func:`failed_checks`."""
    known: tuple[str, ...] | None = getattr(values, "failed_checks", None)
    if known is not None:
        return list(known)
    failed = []
    for metric, test, _ in CHECKS:
        value = values.get(metric)
        if value is None:
            continue
        if (test == "eq1" and value == 1) or (test == "eq0" and value == 0) or (test == "lt1" and value < 1):
            failed.append(metric)
    return failed


_TESTS: dict[str, Callable[[npt.NDArray[np.float64]], npt.NDArray[np.bool_]]] = {
    "eq1": lambda column: column == 1, "eq0": lambda column: column == 0, "lt1": lambda column: column < 1}


def failed_checks(table: pa.Table) -> list[tuple[str, ...]]:
    """:func:`deterministic_failures` of each row of a metric table (``metrics.table``), checked
    a column at a time. A null (no value) reads as NaN, and a NaN fails no check, as there.
    Rows that failed the same checks share one tuple."""
    import numpy as np

    checks = [(metric, test) for metric, test, _ in CHECKS if metric in table.column_names]
    if not checks or not table.num_rows:
        return [()] * table.num_rows
    # each row's failed checks as the bits of one integer (bit j: the j-th check), so that the
    # distinct patterns are found by sorting integers, not rows
    codes = np.zeros(table.num_rows, dtype=np.int64)
    for bit, (metric, test) in enumerate(checks):
        codes |= _TESTS[test](table.column(metric).to_numpy()).astype(np.int64) << bit
    patterns, which = np.unique(codes, return_inverse=True)
    named = [tuple(metric for bit, (metric, _) in enumerate(checks) if code >> bit & 1) for code in patterns.tolist()]
    return [named[i] for i in which.reshape(-1).tolist()]


DESCRIPTIONS = {metric: words for metric, _, words in CHECKS}


STAGE_ORDER = ("ACL leak", "wrong behaviour", "retrieval missed", "context dropped", "answer unsupported",
               "citation misattributed", "other check")


def failure_stage(values: Mapping[str, float | None], claim_classes: list[str] | None = None) -> str | None:
    """Where a failed case went wrong first, along the pipeline: retrieval, context, answer,
    citation, behaviour. ``claim_classes`` are the judge's triage classes when it judged the case."""
    # every metric read here is one of CHECKS, with the same test
    failed = set(deterministic_failures(values))
    if "acl_leak" in failed:
        return "ACL leak"
    if "behavior_correct" in failed:
        return "wrong behaviour"
    if "recall@10" in failed:
        return "retrieval missed"
    if "context_recall" in failed:
        return "context dropped"
    classes = claim_classes or []
    if any(c in ("unsupported", "contradicted") for c in classes) or "forbidden_absent" in failed \
            or "must_contain" in failed:
        return "answer unsupported"
    if "misattributed" in classes or "citation_scoped" in failed or "must_cite_coverage" in failed:
        return "citation misattributed"
    if failed:
        return "other check"
    return None
