"""Loading an OpenTelemetry export of a night's traffic (issue 28): time, peak memory, and the
same metrics and judge inputs as the same cases given as groundjudge's own JSONL.

Generates N traces (default 100,000) as OTLP JSON Lines the way a batching span processor
writes them (512 spans a line, a trace's children in one batch and its root, which ends last,
often in the next), in the OpenInference conventions: a CHAIN root with the question and the
answer (citing its documents in brackets), a RETRIEVER span with five documents (id, score,
about 50 words of content), an LLM span with the answer and its token counts. One trace in a
hundred has no retriever span (a health check, a small-talk turn): skipped with its reason. The
same graded cases are written as a native golden set and traces JSONL.

Each file is loaded in a fresh process (``load_any``, as ``groundjudge run`` loads its inputs),
timed, with the process's peak RSS; then both are loaded in this process and compared case by
case: every deterministic metric value, and what the judge would be sent (the selection
decision and its ``JudgeItem``: the judge's cache key is made from it, so equal items get the
same verdicts). ``tests/test_benchmark_otlp_load.py`` runs the judge on both forms of a small set.

Usage (from the worktree root):
  PYTHONPATH=src python benchmarks/otlp_load.py --traces 100000 [--dir /tmp/otlp_load] [--keep]
  PYTHONPATH=src python benchmarks/otlp_load.py --traces 100000 --src ../other/src   # another checkout too

Goal (issue 28): a 100,000-trace export loads in <= 30 s and <= 1 GiB on this 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("policy employee leave annual service band contract remote office tenant access role days year month "
         "manager approval request travel expense limit receipt claim device laptop security password reset "
         "network account review quarter budget report audit vendor invoice payment term notice period").split()
POOL = 20_000  # documents shared by all traces
DOCS = 5
BATCH = 512
CONFIG = "rag-2026.11.25"
NO_RETRIEVER_EVERY = 100


def _kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def generate(n: int, folder: Path, seed: int = 7) -> dict[str, Path]:
    """Write ``export.jsonl`` (OTLP JSON) and ``golden.jsonl`` + ``traces.jsonl`` (the graded
    traces as native JSONL) into ``folder``; returns their paths."""
    from groundjudge.load.adapters.otel import NO_GOLDEN

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    texts = [_words(rng, 50) for _ in range(POOL)]
    resource_attrs = [_kv("service.name", "rag-api"), _kv("service.version", CONFIG)]
    paths = {"export": folder / "export.jsonl", "golden": folder / "golden.jsonl", "traces": folder / "traces.jsonl"}
    t0 = 1_764_000_000_000_000_000
    pending: list[dict[str, Any]] = []
    with paths["export"].open("w") as export, paths["golden"].open("w") as golden, \
            paths["traces"].open("w") as native:

        def flush() -> None:
            export.write(json.dumps({"resourceSpans": [{"resource": {"attributes": resource_attrs},
                                                        "scopeSpans": [{"scope": {"name": "rag"},
                                                                        "spans": pending[:BATCH]}]}]},
                                    separators=(",", ":")) + "\n")
            del pending[:BATCH]

        for i in range(n):
            tid, base = f"{rng.getrandbits(128):032x}", (i + 1) << 8
            root, ret, llm = (f"{base + k:016x}" for k in (1, 2, 3))
            start = t0 + i * 50_000_000
            question = _words(rng, 10).capitalize() + "?"
            docs = rng.sample(range(POOL), DOCS)
            ids = [f"doc-{d}" for d in docs]
            cited = ids[:2]
            answer = (f"{_words(rng, 20).capitalize()} [{cited[0]}]. {_words(rng, 20).capitalize()} [{cited[1]}].")

            def span(sid: str, parent: str, name: str, attrs: list[dict[str, Any]], a: int, b: int,
                     tid: str = tid, start: int = start) -> dict[str, Any]:
                return {"traceId": tid, "spanId": sid, "parentSpanId": parent, "name": name, "kind": 1,
                        "startTimeUnixNano": str(start + a * 1_000_000), "endTimeUnixNano": str(start + b * 1_000_000),
                        "attributes": attrs, "status": {}}

            root_attrs = [_kv("openinference.span.kind", "CHAIN"), _kv("input.value", question),
                          _kv("output.value", answer)]
            if i % NO_RETRIEVER_EVERY == NO_RETRIEVER_EVERY - 1:
                pending.append(span(root, "", "chat", root_attrs, 0, 400))
            else:
                doc_attrs = [_kv("openinference.span.kind", "RETRIEVER"), _kv("input.value", question)]
                for k, (cid, d) in enumerate(zip(ids, docs)):
                    doc_attrs += [_kv(f"retrieval.documents.{k}.document.id", cid),
                                  _kv(f"retrieval.documents.{k}.document.score", round(0.9 - k * 0.05, 2)),
                                  _kv(f"retrieval.documents.{k}.document.content", texts[d])]
                llm_attrs = [_kv("openinference.span.kind", "LLM"), _kv("llm.output_messages.0.message.role", "assistant"),
                             _kv("llm.output_messages.0.message.content", answer),
                             _kv("llm.token_count.prompt", 900 + i % 100), _kv("llm.token_count.completion", 60)]
                # children end first, so a batching processor exports them before their root
                pending += [span(ret, root, "retrieve", doc_attrs, 5, 45), span(llm, root, "generate", llm_attrs, 50, 980),
                            span(root, "", "rag", root_attrs, 0, 1000)]
                golden.write(json.dumps({"id": tid, "question": question,
                                         "not_recorded": {"expected_behavior": NO_GOLDEN,
                                                          "expected_chunk_ids": NO_GOLDEN}}) + "\n")
                native.write(json.dumps({
                    "query_id": tid, "config_id": CONFIG, "question": question,
                    "retrieved_chunks": [{"chunk_id": cid, "doc_id": None, "score": round(0.9 - k * 0.05, 2),
                                          "rank": k + 1} for k, cid in enumerate(ids)],
                    "context_chunks": [{"chunk_id": cid, "text": texts[d]} for cid, d in zip(ids, docs)],
                    "answer": answer, "citations": cited,
                    "latency_ms": {"end_to_end": 1000.0, "retrieve": 40.0},
                    "tokens": {"prompt": 900 + i % 100, "completion": 60, "total": 960 + i % 100},
                    "otel_trace_id": tid, "otel_span_id": root}) + "\n")
            while len(pending) >= BATCH:
                flush()
        while pending:
            flush()
    return paths


def measure(kind: str, paths: list[str]) -> dict[str, Any]:
    """Load in this (fresh) process; seconds and peak RSS."""
    from groundjudge.load.adapters import load_any

    try:  # sources that still pause the collector while loading (an older checkout under --src)
        from groundjudge.collector import collector_paused
    except ImportError:
        collector_paused = contextlib.nullcontext

    start = resource.getrusage(resource.RUSAGE_SELF)
    before, cpu = start.ru_maxrss / 1024, start.ru_utime + start.ru_stime
    t = time.perf_counter()
    with collector_paused():  # as api.load_inputs loads in those sources
        if kind == "otlp":
            dataset, fmt = load_any(None, paths)
        else:
            dataset, fmt = load_any(paths[0], paths[1:])
    seconds = time.perf_counter() - t
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak = usage.ru_maxrss / 1024
    # CPU seconds too: on a shared machine the wall time mostly says how busy the others were
    return {"format": fmt, "seconds": round(seconds, 2), "cpu_seconds": round(usage.ru_utime + usage.ru_stime - cpu, 2),
            "peak_rss_mb": round(peak), "before_mb": round(before),
            "cases": len(dataset.cases), "traces": sum(len(v) for v in dataset.traces.values()),
            "skipped": len(getattr(dataset, "skipped_traces", {}))}


def measured(src: Path, kind: str, paths: list[Path]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, __file__, "--measure", kind, *map(str, paths)], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def compare(paths: dict[str, Path]) -> dict[str, int]:
    """Load both forms here; every metric value and every judge input must be equal."""
    from groundjudge import api
    from groundjudge.load.adapters import load_any
    from groundjudge.metrics.evaluate import evaluate_dataset

    config = api.resolve_config(None, {"inputs.traces": (paths["export"],)})
    otlp, _ = load_any(None, [paths["export"]])
    native, _ = load_any(paths["golden"], [paths["traces"]])
    assert otlp.cases.keys() == native.cases.keys(), "the same cases"
    runs = [evaluate_dataset(d) for d in (otlp, native)]
    values = 0
    for cfg, section in runs[0].configs.items():
        theirs = {c.case_id: c for c in runs[1].configs[cfg].cases}
        for case in section.cases:
            other = theirs[case.case_id]
            mine, its = dict(case.values), dict(other.values)
            assert mine == its, f"metrics differ for {case.case_id}: " \
                f"{ {k: (v, its.get(k)) for k, v in mine.items() if its.get(k) != v} }"
            assert dict(case.unknown) == dict(other.unknown)
            values += len(mine)
    picks = [{(s.config_id, s.case_id): s for s in api.select(config, d, r)} for d, r in zip((otlp, native), runs)]
    assert picks[0].keys() == picks[1].keys()
    judged = 0
    for key, pick in picks[0].items():
        other = picks[1][key]
        assert (pick.judge, pick.reason, pick.item) == (other.judge, other.reason, other.item), f"judge input differs: {key}"
        judged += pick.judge
    return {"cases": len(otlp.cases), "metric_values_equal": values, "judge_items_equal": judged,
            "skipped": len(otlp.skipped_traces)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/otlp_load"))
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--src", type=Path, action="append", default=[],
                        help="another checkout's src to load the same files with (repeatable)")
    parser.add_argument("--no-compare", action="store_true", help="skip the case-by-case comparison")
    parser.add_argument("--measure", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure[0], args.measure[1:])))
        return
    t = time.perf_counter()
    paths = generate(args.traces, args.dir)
    size = {k: p.stat().st_size / 2**20 for k, p in paths.items()}
    print(f"generated {args.traces:,} traces in {time.perf_counter() - t:.0f} s: export {size['export']:.0f} MB, "
          f"native golden + traces {size['golden'] + size['traces']:.0f} MB")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    rows = []
    for src in [ROOT / "src", *args.src]:
        for kind, files in (("otlp", [paths["export"]]), ("native", [paths["golden"], paths["traces"]])):
            try:
                got = measured(src, kind, files)
            except subprocess.CalledProcessError as exc:
                got = {"error": (exc.stderr or "").strip().splitlines()[-1:]}
            rows.append((str(src), kind, got))
            print(f"{src!s:40}  {kind:7}  {json.dumps(got)}", flush=True)
    if not args.no_compare:
        t = time.perf_counter()
        print("compared:", json.dumps(compare(paths)), f"({time.perf_counter() - t:.0f} s)")
    if not args.keep:
        shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
