"""MetricRow: a case's metric values as a compact read-only mapping that reads as the dict."""

from __future__ import annotations

import math
import pickle
import sys

import orjson
import pytest

from groundjudge.files import compact_json
from groundjudge.metrics.failures import CHECKS, deterministic_failures, failure_stage
from groundjudge.metrics.row import MetricRow

VALUES = {"recall@5": 0.5, "precision@5": None, "mrr": 1.0, "hit@1": True, "count": 3, "odd": math.nan,
          "latency_ms.end_to_end": 123.25}


def test_a_row_reads_as_the_dict_it_was_made_from():
    row = MetricRow(VALUES)
    assert list(row) == list(VALUES) and len(row) == len(VALUES)
    assert row["recall@5"] == 0.5 and row["precision@5"] is None and row.get("precision@5", "x") is None
    assert row["hit@1"] == 1.0 and type(row["hit@1"]) is float  # an int or bool is held as its float
    assert row["count"] == 3.0
    assert math.isnan(row["odd"])  # a NaN the metric computed stays NaN; only None is None
    assert row.get("absent") is None and row.get("absent", 7) == 7 and "absent" not in row
    with pytest.raises(KeyError):
        row["absent"]
    assert [k for k, _ in row.items()] == list(VALUES)
    assert row.values()[1] is None
    plain = {k: (float(v) if v is not None else None) for k, v in VALUES.items() if k != "odd"}
    trimmed = MetricRow({k: v for k, v in VALUES.items() if k != "odd"})
    assert trimmed == plain and plain == trimmed and dict(trimmed) == plain
    assert trimmed != {**plain, "mrr": 0.0} and trimmed != {**plain, "extra": 1.0}
    with pytest.raises(TypeError):
        trimmed["mrr"] = 0.0  # type: ignore[index]


def test_rows_with_the_same_names_share_them_and_pickle_back_to_the_same_row():
    a, b = MetricRow(VALUES), MetricRow(dict(VALUES))
    assert a._names is b._names and a._index is b._index
    back = pickle.loads(pickle.dumps([a, b]))
    assert back[0]._names is a._names  # unpickled rows share the process's layout too
    assert back[0].to_dict().keys() == a.to_dict().keys() and back[1]["precision@5"] is None
    assert [v for v in back[0].values() if v is None or not math.isnan(v)] == [
        v for v in a.values() if v is None or not math.isnan(v)]


def test_a_row_is_written_as_the_json_object_of_its_values():
    row = MetricRow({k: v for k, v in VALUES.items() if k != "odd"})
    assert orjson.loads(compact_json({"c1": row})) == {"c1": row.to_dict()}
    assert compact_json(row) == compact_json(row.to_dict())
    assert orjson.loads(compact_json(MetricRow({"x": math.nan}))) == {"x": None}  # JSON has no NaN


def test_a_row_is_far_smaller_than_the_dict():
    values = {f"metric_{i}@5": i / 7 for i in range(60)}
    row = MetricRow(values)
    dict_bytes = sys.getsizeof(values) + sum(sys.getsizeof(v) for v in values.values())
    row_bytes = sys.getsizeof(row) + sys.getsizeof(row._values) + sys.getsizeof(row._none)
    assert row_bytes * 3 < dict_bytes


def test_failure_checks_read_a_row_as_they_read_its_dict():
    rows = [{"acl_leak": 0.0, "behavior_correct": 1.0, "recall@10": 0.5, "context_recall": None, "must_contain": 0.0},
            {"acl_leak": None, "behavior_correct": 0.0, "citation_scoped": 0.5, "trace_error": 1.0},
            {"recall@10": 1.0, "context_recall": 1.0, "must_cite_coverage": 0.5, "forbidden_absent": 1.0}, {}]
    for values in rows:
        row = MetricRow(values)
        assert deterministic_failures(row) == deterministic_failures(values)
        for classes in (None, ["misattributed"], ["unsupported"]):
            assert failure_stage(row, classes) == failure_stage(values, classes)
    assert deterministic_failures(MetricRow(rows[0])) == ["must_contain", "recall@10"]


def _stage_by_thresholds(values, classes):
    """failure_stage as first written, reading each metric's value against its test."""
    def failed(metric, test):
        v = values.get(metric)
        return v is not None and ((test == "lt1" and v < 1) or (test == "eq0" and v == 0) or (test == "eq1" and v == 1))

    classes = classes or []
    if failed("acl_leak", "eq1"):
        return "ACL leak"
    if failed("behavior_correct", "eq0"):
        return "wrong behaviour"
    if failed("recall@10", "lt1"):
        return "retrieval missed"
    if failed("context_recall", "lt1"):
        return "context dropped"
    if any(c in ("unsupported", "contradicted") for c in classes) or failed("forbidden_absent", "eq0") \
            or failed("must_contain", "eq0"):
        return "answer unsupported"
    if "misattributed" in classes or failed("citation_scoped", "lt1") or failed("must_cite_coverage", "lt1"):
        return "citation misattributed"
    if any(failed(m, t) for m, t, _ in CHECKS):
        return "other check"
    return None


def test_failure_stage_from_the_failed_checks_is_the_stage_read_from_the_values():
    import random

    rng = random.Random(3)
    for _ in range(3000):
        values = {m: rng.choice([None, 0.0, 0.5, 1.0]) for m, _, _ in CHECKS if rng.random() < 0.7}
        classes = rng.choice([None, [], ["cited_support"], ["misattributed"], ["unsupported", "uncited"]])
        row = MetricRow(values)
        assert failure_stage(values, classes) == failure_stage(row, classes) == _stage_by_thresholds(values, classes)
        assert row.failed_checks is not None and list(row.failed_checks) == deterministic_failures(values)
