"""Judge throughput against a local OpenAI-compatible server with a fixed delay (SPEC 9).

For each concurrency setting: N synthetic cases, a fresh cache, one JudgeEngine run; then the
same run again (everything from the cache). Prints calls per case (goal 1.0), wall time against
the ideal ``cases x delay / concurrency`` (goal ratio <= 1.2) and the unchanged re-run time
(goal: zero calls, well under a second).

The server runs in its own process (``python -m tests.support.openai_server``), so its threads do
not compete with the client for this process's GIL.

    .venv/bin/python benchmarks/judge_throughput.py [--delay 0.25] [--settings 1:24,8:128,32:512]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.support

from groundjudge.judge.cache import JudgeCache
from groundjudge.judge.client import ClientSettings, JudgeClient
from groundjudge.judge.engine import JudgeEngine
from groundjudge.judge.render import JudgeItem, render_messages
from groundjudge.judge.rubric import load_rubric
from tests.support.judge_replies import verdict_dict

MODEL = "bench-judge"
CONTEXT_IDS = ["kb#1", "kb#2", "kb#3"]


def synthetic_items(n: int, salt: str) -> list[JudgeItem]:
    """``n`` distinct cases (distinct cache keys) sharing context ids, so one reply fits all."""
    return [
        JudgeItem(
            case_id=f"b{i:04d}", config_id="bench",
            question=f"[{salt}] How many days of leave does band {i} get?",
            contexts=tuple((cid, f"Band {i}: {10 + i % 7} days of leave. Source {cid}. " * 4) for cid in CONTEXT_IDS),
            answer=f"Band {i} gets {10 + i % 7} days of leave [kb#1].",
            citations=("kb#1",), expected_answer=f"{10 + i % 7} days",
        )
        for i in range(n)
    ]


class Server:
    """The scripted server in a child process; ``stop()`` returns how many calls it served."""

    def __init__(self, delay: float) -> None:
        content = json.dumps(verdict_dict(CONTEXT_IDS))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.openai_server", "--delay", str(delay), "--model", MODEL,
             "--content", content, "--lifetime", "600"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise RuntimeError(f"server did not start: {self.proc.stderr.read()}")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=30)
        served = [line for line in err.splitlines() if line.startswith("served ")]
        return int(served[-1].split()[1]) if served else -1


@dataclass
class Result:
    concurrency: int
    cases: int
    calls: int
    served: int
    seconds: float
    ideal: float
    rerun_seconds: float
    rerun_calls: int
    judged: int
    bare_seconds: float


async def judge(base_url: str, items: list[JudgeItem], cache_dir: Path, concurrency: int) -> tuple[float, int, int]:
    rubric = load_rubric(ROOT / "rubrics", "grounded_answer")
    client = JudgeClient(ClientSettings(base_url=base_url, model=MODEL, timeout_s=60, max_attempts=2))
    cache = JudgeCache(cache_dir)
    engine = JudgeEngine(rubric=rubric, client=client, cache=cache, concurrency=concurrency)
    started = time.perf_counter()
    try:
        outcomes = await engine.run(items)
    finally:
        cache.close()
    seconds = time.perf_counter() - started
    return seconds, engine.totals.usage.requests, sum(o.status == "judged" for o in outcomes)


async def bare_client(base_url: str, items: list[JudgeItem], concurrency: int) -> float:
    """The same requests from the bare ``openai`` client (no cache, no parsing): the floor that
    this machine, this server and httpx allow, to tell engine overhead from the environment's."""
    import openai

    rubric = load_rubric(ROOT / "rubrics", "grounded_answer")
    client = openai.AsyncOpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=60)
    sem = asyncio.Semaphore(concurrency)
    fmt = {"type": "json_schema", "json_schema": {"name": rubric.id, "schema": rubric.output_schema, "strict": True}}

    async def one(item: JudgeItem) -> None:
        async with sem:
            await client.chat.completions.create(model=MODEL, messages=render_messages(rubric, item),
                                                 temperature=0, seed=1234, max_tokens=1024, response_format=fmt)

    started = time.perf_counter()
    try:
        await asyncio.gather(*(one(item) for item in items))
    finally:
        await client.close()
    return time.perf_counter() - started


def bench(delay: float, concurrency: int, cases: int) -> Result:
    server = Server(delay)
    try:
        items = synthetic_items(cases, salt=f"c{concurrency}")
        with tempfile.TemporaryDirectory(prefix="gj-bench-") as tmp:
            # One throwaway case first: the process's one-off start-up (the openai package builds
            # its response types on first use, once) is not a per-case cost.
            asyncio.run(judge(server.base_url, synthetic_items(1, salt=f"warm-up {concurrency}"),
                              Path(tmp) / "warm-up", 1))
            seconds, calls, judged = asyncio.run(judge(server.base_url, items, Path(tmp), concurrency))
            rerun_seconds, rerun_calls, rerun_judged = asyncio.run(judge(server.base_url, items, Path(tmp),
                                                                         concurrency))
            assert rerun_judged == judged
            bare_seconds = asyncio.run(bare_client(server.base_url, items, concurrency))
    finally:
        served = server.stop() - 1 - cases  # the warm-up call and the bare client's calls
    return Result(concurrency, cases, calls, served, seconds, cases * delay / concurrency, rerun_seconds,
                  rerun_calls, judged, bare_seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--delay", type=float, default=0.25, help="seconds the server waits per reply")
    parser.add_argument("--settings", default="1:24,8:128,32:512",
                        help="comma-separated concurrency:cases pairs")
    args = parser.parse_args(argv)
    settings = [tuple(int(x) for x in pair.split(":")) for pair in args.settings.split(",")]

    print(f"judge throughput: server delay {args.delay:.2f} s per call, separate server process")
    header = (f"{'concurrency':>11} {'cases':>5} {'calls/case':>10} {'served':>6} {'judged':>6} "
              f"{'wall s':>7} {'ideal s':>7} {'ratio':>6} {'rerun s':>8} {'rerun calls':>11} "
              f"{'bare client s':>13} {'bare ratio':>10}")
    print(header)
    print("-" * len(header))
    ok = True
    for concurrency, cases in settings:
        r = bench(args.delay, concurrency, cases)
        ratio = r.seconds / r.ideal if r.ideal else float("inf")
        ok &= r.calls == r.cases == r.judged and r.rerun_calls == 0 and ratio <= 1.2
        print(f"{r.concurrency:>11} {r.cases:>5} {r.calls / r.cases:>10.2f} {r.served:>6} {r.judged:>6} "
              f"{r.seconds:>7.2f} {r.ideal:>7.2f} {ratio:>6.2f} {r.rerun_seconds:>8.3f} {r.rerun_calls:>11} "
              f"{r.bare_seconds:>13.2f} {r.bare_seconds / r.ideal if r.ideal else float('inf'):>10.2f}")
    print("goals: calls/case 1.00, ratio <= 1.20, re-run zero calls:", "met" if ok else "NOT met")
    print("(bare client: the same requests from the openai client alone, no engine: the floor of this machine)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
