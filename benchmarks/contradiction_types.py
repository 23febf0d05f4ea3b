"""Contradicted vs unsupported: does the judge's contradiction question match the people's span types?

    .venv/bin/python benchmarks/contradiction_types.py [--file benchmarks/results/judge_agreement_claim_check_v2_all.jsonl]

Reads the per-answer rows that ``benchmarks/judge_agreement.py`` writes (each claim's verdict
and span in the answer) and the dev set's human spans (``labels/annotators.jsonl``: offsets and
a type, Evident/Subtle Conflict or Evident/Subtle Baseless Info). A claim overlaps a human span
when their character ranges intersect; it takes the first overlapping span's type. Prints, per
span type (and for claims overlapping none), how many claims the judge called supported,
unsupported and contradicted, and the precision and recall of "contradicted" for conflict spans.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "rag-faithfulness-dev"


def span_type(start: int | None, end: int | None, spans: list[dict]) -> str:
    if start is None or end is None:
        return "no span"
    for span in spans:
        if span["start"] < end and start < span["end"]:
            return span["type"]
    return "no span"


def human_spans(data: Path) -> dict[tuple[str, str], list[dict]]:
    """Per (query, config), the people's spans: offsets and type."""
    spans = {}
    for line in (data / "labels" / "annotators.jsonl").read_text().splitlines():
        r = json.loads(line)
        spans[(r["query_id"], r["config_id"])] = [
            {"start": s["start"], "end": s["end"], "type": s["label_type"]} for s in r.get("spans") or []]
    return spans


def conflict_counts(table: dict[str, collections.Counter], column: str) -> tuple[int, int, int]:
    """For the answer ``column`` meaning "contradicted": (conflict-span claims given it, claims
    given it, conflict-span claims), the counts of its precision and recall."""
    hits = sum(c[column] for k, c in table.items() if "Conflict" in k)
    return hits, sum(c[column] for c in table.values()), sum(sum(c.values()) for k, c in table.items() if "Conflict" in k)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=REPO / "benchmarks" / "results" /
                        "judge_agreement_claim_check_v2_all.jsonl")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    spans = human_spans(args.data)
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in args.file.read_text().splitlines():
        row = json.loads(line)
        if row["status"] != "judged" or "verdicts" not in row:
            continue
        for verdict, (start, end) in zip(row["verdicts"], row["spans"]):
            table[span_type(start, end, spans[(row["query_id"], row["config_id"])])][verdict] += 1
    print(f"{args.file.name}: claims by the human span type they overlap and the judge's verdict")
    print(f"{'span type':24s} {'n':>5s} {'supported':>10s} {'unsupported':>12s} {'contradicted':>13s}")
    for kind in sorted(table):
        c = table[kind]
        print(f"{kind:24s} {sum(c.values()):5d} {c['supported']:10d} {c['unsupported']:12d} {c['contradicted']:13d}")
    conflict, called, conflicts = conflict_counts(table, "contradicted")
    flagged = {k: c["unsupported"] + c["contradicted"] for k, c in table.items()}
    print(f"'contradicted' for conflict spans: precision {conflict}/{called}, recall {conflict}/{conflicts}")
    print("claims flagged (unsupported or contradicted) per span type: "
          + ", ".join(f"{k} {flagged[k]}/{sum(table[k].values())}" for k in sorted(table)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
