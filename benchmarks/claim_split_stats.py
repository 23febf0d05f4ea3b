"""Run the deterministic claim splitter over real answers and print what it does.

Usage: PYTHONPATH=src python benchmarks/claim_split_stats.py [--show N] [--seed S]
Reads the dev set's traces (../shared/data/rag-faithfulness-dev/traces/*.jsonl) and the example
traces (examples/traces/*.jsonl); prints sentences per answer (mean/median/max) and the share of
sentences marked no-claim by each rule; with --show, N random answers with their split.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import statistics
from pathlib import Path

from groundjudge.judge.claims import RULES, split_claims

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {
    "dev": sorted(Path("/work/shared/data/rag-faithfulness-dev/traces").glob("*.jsonl")),
    "examples": sorted((ROOT / "examples" / "traces").glob("*.jsonl")),
}


def answers(paths: list[Path]) -> list[tuple[str, str]]:
    out = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out.append((f"{path.stem}:{row['query_id']}", row["answer"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--show", type=int, default=0)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    for name, paths in SOURCES.items():
        rows = answers(paths)
        counts = [len(split_claims(a)) for _, a in rows]
        checks = [sum(s.check for s in split_claims(a)) for _, a in rows]
        rules = collections.Counter(s.rule for _, a in rows for s in split_claims(a))
        total = sum(counts)
        print(f"{name}: {len(rows)} answers, {total} sentences; per answer mean {statistics.mean(counts):.2f} "
              f"median {statistics.median(counts)} max {max(counts)}; check-worthy per answer mean "
              f"{statistics.mean(checks):.2f} median {statistics.median(checks)} max {max(checks)}; "
              f"answers with none to check {sum(c == 0 for c in checks)}")
        for rule in (None, *RULES):
            print(f"   {rule or 'check':<20} {rules[rule]:>5}  {rules[rule] / total:6.1%}  (n={total})")
        if args.show:
            rng = random.Random(args.seed)
            for key, answer in rng.sample(rows, min(args.show, len(rows))):
                print(f"\n== {key}: {answer!r}")
                for s in split_claims(answer):
                    print(f"   [{s.rule or 'check'}] {s.text!r} {list(s.citations) or ''}")


if __name__ == "__main__":
    main()
