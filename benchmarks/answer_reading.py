"""How claim_check reads one-token answers, before and after the rule that an answer whose
sampled word is not the rubric's yes or no is invalid (never a probability from its alternatives).

    .venv/bin/python benchmarks/answer_reading.py --cache-dir CACHE [--rubric-version 4]

Reads the answers the judge gave on ../shared/data/rag-faithfulness-dev (378 real RAG answers
with human hallucination labels) from a judge cache filled by ``benchmarks/judge_agreement.py
--all --cache-dir CACHE`` (no call is made: an answer missing from the cache is a judge_error
here), then judges every answer twice from the same stored replies: with the lenient reading of
8673197 (a sampled word that is neither yes nor no takes P(yes) from the alternatives) and with
the current one. Prints, side by side: answers judged, judge_error, kappa of `faithful` against
the people with its bootstrap 95% CI on the answers both readings judged, and how many stored
answers had a sampled word that is neither yes nor no.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from pathlib import Path
from typing import Any

from groundjudge import api
from groundjudge.calibrate.agreement import agreement
from groundjudge.calibrate.verdicts import load_labels
from groundjudge.judge import claim_check
from groundjudge.judge.cache import JudgeCache
from groundjudge.judge.client import CallFailed
from groundjudge.judge.engine import JudgeEngine
from groundjudge.judge.verdict import VerdictError
from groundjudge.load.dataset import load_dataset
from groundjudge.metrics.evaluate import evaluate_dataset
from groundjudge.select import SelectSettings, select_cases

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "rag-faithfulness-dev"
EMBEDDED = "qwen2.5-coder-1.5b-instruct-q4_k_m@cc324af070c2"
CURRENT = claim_check.read_answer


def lenient(raw: str, spec: Any) -> claim_check.Answer:
    """The reading of 8673197, for the comparison: a sampled word that is neither yes nor no is
    ignored and P(yes) comes from the alternatives."""
    data = json.loads(raw)
    text, tokens = str(data["text"]), data["tokens"]
    yes, no = {claim_check._norm(t) for t in spec.yes_tokens}, {claim_check._norm(t) for t in spec.no_tokens}
    first = claim_check._norm(text.split()[0]) if text.split() else ""
    p_yes = p_no = 0.0
    for token, logprob in tokens[0] if tokens else []:
        word = claim_check._norm(token)
        if word in yes:
            p_yes += math.exp(logprob)
        elif word in no:
            p_no += math.exp(logprob)
    said_yes = first in yes if first in yes | no else p_yes > p_no
    if first not in yes | no and p_yes + p_no == 0:
        raise VerdictError(f"the answer {text[:40]!r} is neither yes nor no")
    return claim_check.Answer(probability=p_yes / (p_yes + p_no) if p_yes + p_no > 0 else None, said_yes=said_yes)


def judge_all(items: list, cache_dir: Path, rubric: Any, decoding: dict[str, Any], reading: Any) -> dict:
    claim_check.read_answer = reading
    cache = JudgeCache(cache_dir)

    def no_calls() -> Any:
        raise CallFailed("not in the cache (this benchmark makes no call)", 0)

    engine = JudgeEngine(rubric=rubric, cache=cache, connect=no_calls, model=EMBEDDED, decoding=decoding,
                         concurrency=1, retry_errors=False)
    # a case memo stores the verdicts of one reading: derive every case from its stored answers
    engine.protocol.from_cached = lambda item, key, cached: None  # type: ignore[method-assign]
    engine.protocol.keep_memo = lambda out: None  # type: ignore[attr-defined]
    try:
        results = asyncio.run(engine.run(items))
    finally:
        cache.close()
        claim_check.read_answer = CURRENT
    return {(r.case_id, r.config_id): r for r in results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--rubric-version", type=int, default=None)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)

    config = api.resolve_config(None, {"judge.rubric": "claim_check", "judge.rubric_version": args.rubric_version},
                                environ={})
    rubric = api.rubric_for(config)
    spec = rubric.claim_questions
    assert spec is not None
    decoding = {"temperature": 0.0, "seed": 1234, "max_tokens": 1, "top_logprobs": spec.top_logprobs}
    dataset = load_dataset(args.data / "golden.jsonl", sorted((args.data / "traces").glob("*.jsonl")),
                           args.data / "corpus.jsonl")
    metrics = evaluate_dataset(dataset, api.metric_settings(config))
    items = [s.item for s in select_cases(dataset, metrics, SelectSettings()) if s.judge and s.item is not None]
    labels = load_labels([args.data / "labels" / "annotators.jsonl"], ["faithful"])["annotators"]
    human = {key: v.labels["faithful"] for key, v in labels.items() if v.labels["faithful"] is not None}

    before = judge_all(items, args.cache_dir, rubric, decoding, lenient)
    after = judge_all(items, args.cache_dir, rubric, decoding, CURRENT)
    both = sorted(k for k in before if before[k].status == after[k].status == "judged" and k in human)
    flipped = [k for k in both if before[k].label("faithful") != after[k].label("faithful")]
    invalid = 0
    cache = JudgeCache(args.cache_dir)
    try:
        for item in items:
            plan = claim_check.plan_case(rubric, item)
            for q in claim_check.claim_questions(rubric, plan) + claim_check.cited_questions(rubric, item, plan)[0]:
                entry = cache.get(claim_check.question_key(EMBEDDED, decoding, q))
                if entry is not None:
                    try:
                        CURRENT(entry.raw, spec)
                    except VerdictError:
                        invalid += 1
    finally:
        cache.close()
    print(f"rubric {rubric.id} v{rubric.version}, {len(items)} answers, cache {args.cache_dir}")
    print(f"stored answers whose sampled word is neither yes nor no: {invalid}")
    print("| reading | judged | judge_error | kappa (answers judged by both) | 95% CI | n |")
    print("|---|---|---|---|---|---|")
    for name, results in (("8673197 (lenient)", before), ("current (strict)", after)):
        judged = sum(r.status == "judged" for r in results.values())
        a = agreement([bool(results[k].label("faithful")) for k in both], [human[k] for k in both],
                      [f"{k}" for k in both], [True, False], ordinal=False, seed=0).as_dict()
        print(f"| {name} | {judged} | {len(results) - judged} | {a['kappa']:.3f} | "
              f"[{a['ci_low']:.3f}, {a['ci_high']:.3f}] | {a['n']} |")
    print(f"verdicts of `faithful` that differ between the readings: {len(flipped)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
