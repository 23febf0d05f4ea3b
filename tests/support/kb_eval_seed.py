"""kb-eval's storage for tests: a real SQLite database in the seed's schema, and a golden set and
two runs written from the seed's own text (seed 002, "p5-2 - Metrics + compare").

The tables are those the seed reads and writes (``eval_runs`` with its ``aggregate_json``,
``eval_query_results``) and the chunk store its citation rule names ("a real chunk in the DB":
``chunks``), with the columns of the knowledge base's design (section 5 of the design the seed
cites: ``eval_runs(run_id, suite, config_snapshot_json, aggregate_json, commit_hash,
created_at)``, ``eval_query_results(run_id, query_id, result_json)``). The runner leaves
``aggregate_json`` as ``{}``; the metrics step fills it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

STORE_SCHEMA = """
CREATE TABLE documents (
  doc_id TEXT PRIMARY KEY,
  workspace_path TEXT NOT NULL
);
CREATE TABLE chunks (
  chunk_id TEXT PRIMARY KEY,
  doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
  text TEXT NOT NULL,
  heading_path_json TEXT NOT NULL,
  section_label TEXT,
  source_spans_json TEXT NOT NULL,
  token_estimate INTEGER NOT NULL,
  chunker_version TEXT NOT NULL,
  policy_hash TEXT NOT NULL,
  block_ids_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);
"""

EVAL_SCHEMA = """
CREATE TABLE eval_runs (
  run_id TEXT PRIMARY KEY,
  suite TEXT NOT NULL,
  config_snapshot_json TEXT NOT NULL,
  aggregate_json TEXT NOT NULL,
  commit_hash TEXT,
  created_at TEXT NOT NULL
);
CREATE TABLE eval_query_results (
  run_id TEXT NOT NULL REFERENCES eval_runs(run_id) ON DELETE CASCADE,
  query_id TEXT NOT NULL,
  result_json TEXT NOT NULL,
  PRIMARY KEY (run_id, query_id)
);
"""


def make_database(path: Path, runs: Sequence[Mapping[str, Any]], chunks: Iterable[tuple[str, str]] = (),
                  *, with_chunks_table: bool = True) -> Path:
    """A kb-eval database at ``path``: each run is ``{"run_id", "chunker_version", "created_at",
    "results": [result_json objects, each with its query_id]}``; ``chunks`` are (chunk_id, doc_id)
    rows of the chunk store."""
    with closing(sqlite3.connect(path)) as db, db:
        db.executescript((STORE_SCHEMA if with_chunks_table else "") + EVAL_SCHEMA)
        if with_chunks_table:
            for doc_id in dict.fromkeys(doc for _, doc in chunks):
                db.execute("INSERT INTO documents VALUES (?, ?)", (doc_id, f"{doc_id}.md"))
            for chunk_id, doc_id in chunks:
                db.execute("INSERT INTO chunks VALUES (?, ?, ?, '[]', NULL, '[]', 10, 'md-heading-v1', 'p', '[]', "
                           "'2026-04-27T00:00:00Z')", (chunk_id, doc_id, f"text of {chunk_id}"))
        for run in runs:
            snapshot = {"chunker_version": run["chunker_version"], "embedding_model": "multilingual-e5-small",
                        "prompt_template_version": "rag-v1"}
            db.execute("INSERT INTO eval_runs VALUES (?, 'golden', ?, '{}', NULL, ?)",
                       (run["run_id"], json.dumps(snapshot), run["created_at"]))
            for result in run["results"]:
                db.execute("INSERT INTO eval_query_results VALUES (?, ?, ?)",
                           (run["run_id"], result["query_id"], json.dumps(result)))
    return path


def stored_aggregate(path: Path, run_id: str) -> Any:
    with closing(sqlite3.connect(path)) as db:
        (text,) = db.execute("SELECT aggregate_json FROM eval_runs WHERE run_id = ?", (run_id,)).fetchone()
    return json.loads(text)


# --- the golden set and runs written from the seed's text ------------------------------------

# The seed's golden YAML, with the header comment it asks for on "should refuse" queries.
GOLDEN_YAML = """\
# Golden queries for kb-eval.
# A query the system should refuse is written with `expected_doc_ids: []`.
- id: q1
  query: How are Markdown files chunked?
  lang: en
  expected_doc_ids: [doc-md]
  expected_chunk_ids: [c-md-1]
  must_contain: [heading boundary]
  forbidden: []
- id: q2
  query: Which citation markers does the answer use?
  lang: en
  expected_doc_ids: [doc-rag]
  expected_chunk_ids: [c-rag-4]
  must_contain: ["[#"]
  forbidden: []
- id: q3
  query: What happens when the score gate rejects every chunk?
  lang: en
  expected_doc_ids: [doc-rag, doc-ux]
  expected_chunk_ids: [c-rag-9]
  must_contain: [refuse]
  forbidden: []
- id: q4
  query: What was the company's revenue last year?
  lang: en
  expected_doc_ids: []
  expected_chunk_ids: []
  must_contain: []
  forbidden: [revenue was]
- id: q5
  query: Where are eval runs stored?
  lang: en
  expected_doc_ids: [doc-store]
  expected_chunk_ids: [c-store-2]
  must_contain: [eval_runs]
  forbidden: [Postgres]
- id: q6
  query: What does --strict-chunker-version do?
  lang: en
  expected_doc_ids: [doc-eval]
  expected_chunk_ids: [c-eval-3]
  must_contain: [refuse]
  forbidden: []
"""


def hit(chunk_id: str, doc_id: str, score: float, spans: Sequence[Sequence[int]] = ()) -> dict[str, Any]:
    return {"chunk_id": chunk_id, "doc_id": doc_id, "score": score, "source_spans": [list(s) for s in spans]}


def answer(text: str, citations: Sequence[Any] = (), grounded: bool = True) -> dict[str, Any]:
    return {"text": text, "citations": list(citations), "grounded": grounded}


# Run A, the seed's test plan: the first three queries' correct chunks at ranks 1, 4 and nowhere;
# a "should refuse" query refused; a forbidden string in an answer; a citation to a chunk that
# does not exist (c-eval-99 is in no chunks table). Chunker md-heading-v1.
RUN_A = {"run_id": "run_a", "chunker_version": "md-heading-v1", "created_at": "2026-05-01T10:00:00Z", "results": [
    {"query_id": "q1", "hits_top_k": [hit("c-md-1", "doc-md", 0.82, [[0, 400]]), hit("c-md-2", "doc-md", 0.71)],
     "answer": answer("The heading boundary comes first [#1].", [{"citation": "[#1]", "chunk_id": "c-md-1"}]),
     "error": None, "elapsed_ms": 1840},
    {"query_id": "q2", "hits_top_k": [hit("c-ux-1", "doc-ux", 0.8), hit("c-ux-2", "doc-ux", 0.7),
                                      hit("c-md-2", "doc-md", 0.6), hit("c-rag-4", "doc-rag", 0.55, [[100, 300]])],
     "answer": answer("Answers cite with [#n] markers [#4].", [{"citation": "[#4]", "chunk_id": "c-rag-4"}]),
     "error": None, "elapsed_ms": 1710},
    {"query_id": "q3", "hits_top_k": [hit("c-ux-3", "doc-ux", 0.4)],
     "answer": answer("Nothing is found.", [], grounded=False), "error": None, "elapsed_ms": 920},
    {"query_id": "q4", "hits_top_k": [],
     "answer": answer("Not enough grounds: the knowledge base has nothing on this.", [], grounded=False),
     "error": None, "elapsed_ms": 300},
    {"query_id": "q5", "hits_top_k": [hit("c-store-1", "doc-store", 0.9),
                                      hit("c-store-2", "doc-store", 0.88, [[50, 450]])],
     "answer": answer("Runs live in eval_runs, not in Postgres [#2].", ["c-store-2"]),
     "error": None, "elapsed_ms": 1500},
    {"query_id": "q6", "hits_top_k": [hit("c-eval-3", "doc-eval", 0.77, [[200, 600]])],
     "answer": answer("It makes compare refuse differing chunker versions [#9].",
                      [{"citation": "[#9]", "chunk_id": "c-eval-99"}]),
     "error": None, "elapsed_ms": 1650},
]}

# Run B, same chunker: the seed's Win / Loss / Draw / Regression on synthetic ranks.
# q1 1 -> 1 Draw; q2 4 -> 2 Win; q3 miss -> 3 Win; q5 2 -> 5 Loss; q6 1 -> miss Regression.
RUN_B = {"run_id": "run_b", "chunker_version": "md-heading-v1", "created_at": "2026-05-02T10:00:00Z", "results": [
    {"query_id": "q1", "hits_top_k": [hit("c-md-1", "doc-md", 0.85)],
     "answer": answer("The heading boundary comes first [#1].", ["c-md-1"]), "error": None, "elapsed_ms": 1790},
    {"query_id": "q2", "hits_top_k": [hit("c-ux-1", "doc-ux", 0.8), hit("c-rag-4", "doc-rag", 0.79)],
     "answer": answer("Answers cite with [#n] markers [#2].", ["c-rag-4"]), "error": None, "elapsed_ms": 1650},
    {"query_id": "q3", "hits_top_k": [hit("c-ux-3", "doc-ux", 0.5), hit("c-ux-4", "doc-ux", 0.45),
                                      hit("c-rag-9", "doc-rag", 0.44)],
     "answer": answer("It would refuse to answer [#3].", ["c-rag-9"]), "error": None, "elapsed_ms": 1400},
    {"query_id": "q4", "hits_top_k": [hit("c-fin-1", "doc-fin", 0.21)],
     "answer": answer("I think the revenue was large.", [], grounded=True), "error": None, "elapsed_ms": 800},
    {"query_id": "q5", "hits_top_k": [hit("c-store-1", "doc-store", 0.9), hit("c-ux-1", "doc-ux", 0.6),
                                      hit("c-ux-2", "doc-ux", 0.5), hit("c-md-2", "doc-md", 0.4),
                                      hit("c-store-2", "doc-store", 0.3)],
     "answer": answer("Runs live in eval_runs [#5].", ["c-store-2"]), "error": None, "elapsed_ms": 1550},
    {"query_id": "q6", "hits_top_k": [],
     "answer": None, "error": "retriever timed out", "elapsed_ms": 30000},
]}

# Run C, the next chunker (md-heading-v2): chunk ids differ, so matching falls back to doc_id +
# span overlap of at least 50% of an expected chunk's span (learnt from run A's hits).
RUN_C = {"run_id": "run_c", "chunker_version": "md-heading-v2", "created_at": "2026-05-03T10:00:00Z", "results": [
    {"query_id": "q1", "hits_top_k": [hit("v2-md-1", "doc-md", 0.8, [[0, 199]]),
                                      hit("v2-md-2", "doc-md", 0.7, [[150, 420]])],
     "answer": answer("The heading boundary comes first [#2].", ["v2-md-2"]), "error": None, "elapsed_ms": 1700},
    {"query_id": "q2", "hits_top_k": [hit("v2-rag-4", "doc-rag", 0.8, [[100, 200]])],
     "answer": answer("Answers cite with [#n] markers [#1].", ["v2-rag-4"]), "error": None, "elapsed_ms": 1600},
    {"query_id": "q3", "hits_top_k": [],
     "answer": answer("Not enough grounds.", [], grounded=False), "error": None, "elapsed_ms": 500},
    {"query_id": "q4", "hits_top_k": [],
     "answer": answer("Not enough grounds.", [], grounded=False), "error": None, "elapsed_ms": 400},
    {"query_id": "q5", "hits_top_k": [hit("v2-store-2", "doc-store", 0.9, [[50, 300]])],
     "answer": answer("Runs live in eval_runs [#1].", ["v2-store-2"]), "error": None, "elapsed_ms": 1450},
    {"query_id": "q6", "hits_top_k": [hit("v2-other", "doc-eval", 0.6, [[0, 150]]),
                                      hit("v2-eval-3", "doc-eval", 0.5, [[400, 800]])],
     "answer": answer("It makes compare refuse [#2].", ["v2-eval-3"]), "error": None, "elapsed_ms": 1500},
]}

# The chunk store: every chunk of run A and B except c-eval-99 (q6's broken citation), and the
# v2 chunks that re-chunking produced.
CHUNKS = [("c-md-1", "doc-md"), ("c-md-2", "doc-md"), ("c-ux-1", "doc-ux"), ("c-ux-2", "doc-ux"),
          ("c-ux-3", "doc-ux"), ("c-ux-4", "doc-ux"), ("c-rag-4", "doc-rag"), ("c-rag-9", "doc-rag"),
          ("c-store-1", "doc-store"), ("c-store-2", "doc-store"), ("c-eval-3", "doc-eval"),
          ("c-fin-1", "doc-fin"), ("v2-md-1", "doc-md"), ("v2-md-2", "doc-md"), ("v2-rag-4", "doc-rag"),
          ("v2-store-2", "doc-store"), ("v2-other", "doc-eval"), ("v2-eval-3", "doc-eval")]


def seed_database(folder: Path) -> tuple[Path, Path]:
    """The golden YAML and a database holding runs A, B and C, in ``folder``."""
    golden = folder / "golden_queries.yaml"
    golden.write_text(GOLDEN_YAML, encoding="utf-8")
    return golden, make_database(folder / "kb.sqlite", [RUN_A, RUN_B, RUN_C], CHUNKS)
