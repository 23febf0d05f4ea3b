"""MetricRow: a case's metric values as a compact read-only mapping that reads as the dict."""

from __future__ import annotations

import math
import pickle
import sys

import orjson
import pytest

from groundjudge.files import compact_json
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
    from groundjudge.metrics.failures import deterministic_failures, failure_stage

    rows = [{"acl_leak": 0.0, "behavior_correct": 1.0, "recall@10": 0.5, "context_recall": None, "must_contain": 0.0},
            {"acl_leak": None, "behavior_correct": 0.0, "citation_scoped": 0.5, "trace_error": 1.0},
            {"recall@10": 1.0, "context_recall": 1.0, "must_cite_coverage": 0.5, "forbidden_absent": 1.0}, {}]
    for values in rows:
        row = MetricRow(values)
        assert deterministic_failures(row) == deterministic_failures(values)
        for classes in (None, ["misattributed"], ["unsupported"]):
            assert failure_stage(row, classes) == failure_stage(values, classes)
    assert deterministic_failures(MetricRow(rows[0])) == ["must_contain", "recall@10"]
