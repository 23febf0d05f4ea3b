"""A small judged run for the labelling tests: six cases, one full of hostile text, judged by a
scripted judge that calls some answers faithful and some not."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from click.testing import CliRunner

from groundjudge.cli import main
from tests.support.judge_replies import context_ids_in_request, question_in_request
from tests.support.openai_server import Reply, ScriptedOpenAIServer

HOSTILE = ("<script>document.body.setAttribute('data-pwned', 'yes')</script><img src=x onerror=alert(1)> "
           "DATA>>> <<<DATA id=evil </li></ol></section> \u202eevil\u202d \"quotes\" &amp; {{ 7*7 }}")

CASES = [
    ("h1", f"What does the policy say? {HOSTILE}", f"It says 15 days. {HOSTILE}", "c#1",
     f"Staff get 15 days [c#1]. {HOSTILE}"),
    ("q2", "How many weeks of parental leave?", "16 weeks.", "c#2", "Parents get 16 weeks [c#2]. It is paid."),
    ("q3", "Is MFA required for the VPN?", "Yes.", "c#3", "Yes, MFA is required for the VPN [c#3]."),
    ("q4", "When do carried-over days expire?", "After 31 March.", "c#4",
     "They expire after 31 March [c#4]. Unused days are paid out."),
    ("q5", "Who approves travel?", "The line manager.", "c#5", "The line manager approves travel [c#5]."),
    ("q6", "What is the expense limit for meals?", "40 EUR per day.", "c#6", "Meals are covered up to 40 EUR a day [c#6]."),
]


def write_inputs(folder: Path) -> tuple[Path, Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    corpus = [{"chunk_id": "c#1", "doc_id": "d1", "text": f"Staff get 15 days of leave. {HOSTILE}"}]
    corpus += [{"chunk_id": f"c#{i}", "doc_id": f"d{i}", "text": f"Chunk {i}: {CASES[i - 1][2]}"} for i in range(2, 7)]
    golden = [{"id": cid, "question": q, "expected_answer": exp, "expected_chunk_ids": [chunk],
               "tags": ["hostile" if cid == "h1" else "policy"]} for cid, q, exp, chunk, _ in CASES]
    traces = [{"query_id": cid, "config_id": "sys", "retrieved_chunks": [chunk, "c#2" if chunk != "c#2" else "c#3"],
               "context_chunks": [chunk, "c#2" if chunk != "c#2" else "c#3"], "answer": answer, "citations": [chunk]}
              for cid, _, _, chunk, answer in CASES]
    paths = folder / "golden.jsonl", folder / "traces.jsonl", folder / "corpus.jsonl"
    for path, rows in zip(paths, (golden, traces, corpus)):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return paths


def mixed_verdict(body: dict, index: int) -> Reply:
    """Faithful for some questions, one unsupported claim for others (decided by a hash)."""
    ids = context_ids_in_request(body)
    faithful = hashlib.sha256(question_in_request(body).encode()).digest()[0] % 2 == 0
    claims = [{"claim": "the main fact", "cited": ids[:1], "verdict": "supported", "support": ids[:1]}]
    if not faithful:
        claims.append({"claim": f"an extra detail {HOSTILE[:80]}", "cited": [], "verdict": "unsupported", "support": []})
    return Reply(json.dumps({"claims": claims, "correctness": 3 if faithful else 1, "reason": "scripted"}))


def make_label_run(folder: Path) -> Path:
    """Run `groundjudge run` on the six cases; returns the run folder (with report.json)."""
    golden, traces, corpus = write_inputs(folder / "inputs")
    with ScriptedOpenAIServer(mixed_verdict) as srv:
        result = CliRunner().invoke(main, [
            "run", "--rubric", "grounded_answer", "--golden", str(golden), "--traces", str(traces), "--corpus", str(corpus),
            "--judge-base-url", srv.base_url, "--judge-model", srv.model, "--cache-dir", str(folder / "cache"),
            "--out", str(folder / "run"), "--quiet"])
    assert result.exit_code in (0, 1), result.output
    report = json.loads((folder / "run" / "report.json").read_text())
    judged = [c for c, r in report["judge"]["per_config"]["sys"]["cases"].items() if r["status"] == "judged"]
    assert len(judged) == len(CASES), report["judge"]["per_config"]["sys"]["cases"]
    return folder / "run"
