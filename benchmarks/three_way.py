"""Contradicted vs unsupported, the three-way question: does one question with three answers
(supported / contradicted / not settled) find the claims people marked as conflicts?

    .venv/bin/python benchmarks/three_way.py [--no-span 150] [--seed 20261122]
        [--file benchmarks/results/judge_agreement_claim_check_v3_all.jsonl] [--cache-dir cache]

Issue 12 asks for a second question *or* a three-way one, measured. The second question ("do
the passages contradict it?", claim_check v2) matched none of the 31 claims overlapping a human
conflict span (``benchmarks/contradiction_types.py``). This asks the embedded judge, for every
claim of the dev set that overlaps a human span (conflict or baseless info) and a seeded sample
of claims that overlap none, one question with the same passages and the answer as one letter:
A supported, B contradicted, C not settled by the passages. Each letter's probability comes
from the answer token's top alternatives. Claims are ordered by question so that answers to
the same question share the passages as a prompt prefix; every answer is cached (a killed run
resumes). Prints, per human span type, the letters the judge chose, the precision and recall of
B for conflict spans, and how well P(A) tells claims without a span from claims with one.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import math
import random
import sys
import time
from pathlib import Path

from groundjudge import api
from groundjudge.judge.cache import CachedReply
from groundjudge.judge.claim_check import Question, question_key
from groundjudge.judge.render import neutralize
from groundjudge.load.dataset import load_dataset
from groundjudge.select import judge_item

sys.path.insert(0, str(Path(__file__).resolve().parent))
from contradiction_types import conflict_counts, human_spans, span_type
from judge_agreement import auroc

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "rag-faithfulness-dev"
LETTERS = ("A", "B", "C")

PROMPT = """QUESTION:
<<<DATA
{question}
DATA>>>

PASSAGES:
{passages}
Compare the STATEMENT below, taken from an answer to the QUESTION, with the PASSAGES. Answer with one letter: A if the passages state or directly imply every detail of it; B if the passages say something incompatible with it (a different number, name, date, condition or fact); C if the passages neither support nor contradict it.

STATEMENT:
<<<DATA
{claim}
DATA>>>"""


def letter_probabilities(tokens: list) -> dict[str, float] | None:
    mass = dict.fromkeys(LETTERS, 0.0)
    for token, logprob in tokens[0] if tokens else []:
        word = token.strip().strip(".:)").upper()
        if word in mass:
            mass[word] += math.exp(logprob)
    total = sum(mass.values())
    return {k: v / total for k, v in mass.items()} if total else None


async def ask_all(session, system_prompt: str, dataset, claims: list) -> tuple[list, int]:
    """Ask (or read from the cache) the three-way question for every claim, in order."""
    decoding = {**session.decoding(), "protocol": "three_way"}
    client, rows, asked, started = None, [], 0, time.monotonic()
    try:
        for (query_id, config_id), claim, kind in claims:
            item, _ = judge_item(dataset, dataset.trace(config_id, query_id))
            assert item is not None
            passages = "".join(f"<<<DATA id={' '.join(neutralize(cid).splitlines())}\n{neutralize(text)}\nDATA>>>\n"
                               for cid, text in item.contexts)
            text = PROMPT.format(question=neutralize(item.question), passages=passages, claim=neutralize(claim))
            question = Question("three_way", 0, [{"role": "system", "content": system_prompt},  # type: ignore[arg-type]
                                                 {"role": "user", "content": text}])
            key = question_key(session.model, decoding, question)
            cached = session.cache.get(key)
            if cached is None:
                if client is None:
                    session.ensure_endpoint()
                    client = session.new_client()
                answer = await client.ask_token(question.messages, top_logprobs=10)
                raw = json.dumps({"text": answer.text, "tokens": answer.tokens}, ensure_ascii=False)
                session.cache.put(key, CachedReply(raw=raw, model=answer.model, prompt_tokens=0, completion_tokens=0,
                                                   created=time.time()))
                asked += 1
                if asked % 25 == 0:
                    print(f"{asked} asked, {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)
            else:
                raw = cached.raw
            rows.append((kind, letter_probabilities(json.loads(raw)["tokens"])))
    finally:
        if client is not None:
            await client.close()
    return rows, asked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=REPO / "benchmarks" / "results" /
                        "judge_agreement_claim_check_v3_all.jsonl")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--no-span", type=int, default=150, help="claims overlapping no human span to sample")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--cache-dir", type=Path, default=REPO / "cache")
    args = parser.parse_args()

    dataset = load_dataset(args.data / "golden.jsonl", sorted((args.data / "traces").glob("*.jsonl")),
                           args.data / "corpus.jsonl")
    spans = human_spans(args.data)
    claims, plain = [], []
    for line in args.file.read_text().splitlines():
        row = json.loads(line)
        key = (row["query_id"], row["config_id"])
        answer = dataset.trace(row["config_id"], row["query_id"]).answer  # type: ignore[union-attr]
        for start, end in row.get("spans", []):
            kind = span_type(start, end, spans[key])
            (plain if kind == "no span" else claims).append((key, answer[start:end].strip(), kind))
    rng = random.Random(args.seed)
    claims += rng.sample(plain, min(args.no_span, len(plain)))
    claims.sort(key=lambda c: c[0][0])  # answers to one question share the passages prefix

    config = api.resolve_config(None, {"cache.dir": args.cache_dir}, environ={})
    rubric = api.rubric_for(config)
    with api.open_judge(config) as session:
        rows, asked = asyncio.run(ask_all(session, rubric.system_prompt, dataset, claims))
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for kind, probs in rows:
        table[kind][max(probs, key=probs.get) if probs else "none"] += 1
    print(f"three-way question, embedded judge, {len(rows)} claims ({asked} asked now)")
    print(f"{'span type':24s} {'n':>5s} {'A supp.':>8s} {'B contra.':>10s} {'C unsettled':>12s} {'none':>5s}")
    for kind in sorted(table):
        c = table[kind]
        print(f"{kind:24s} {sum(c.values()):5d} {c['A']:8d} {c['B']:10d} {c['C']:12d} {c['none']:5d}")
    hits, called, conflicts = conflict_counts(table, "B")
    print(f"B (contradicted) for conflict spans: precision {hits}/{called}, recall {hits}/{conflicts}")
    scored = [(kind, p) for kind, p in rows if p is not None]
    print(f"AUROC of P(A) for no span vs any span: {auroc([p['A'] for _, p in scored], [k == 'no span' for k, _ in scored]):.3f}; "
          f"of P(B) for conflict vs any other claim: "
          f"{auroc([p['B'] for _, p in scored], ['Conflict' in k for k, _ in scored]):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
