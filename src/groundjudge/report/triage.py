"""Triage records: every unsupported or contradicted claim and every bad citation, with evidence,
and every item of the human queue (``awaits_person``: under selective trust, no trusted judge
settled it; the row names the criteria and, per judge that abstained, its verdict, confidence
and cut-off), and every case with an unstable verdict (``unstable_verdict``: its support lies
inside its criterion's noise band, ``calibrate/stability.py``).

Each record carries the case's retrieval facts (was a gold chunk retrieved, at which rank, did
it reach the context), so "bad answer because the gold chunk was never retrieved" shows at a
glance.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from functools import partial
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from groundjudge.contracts import GoldenCase, Trace
from groundjudge.errors import InputError
from groundjudge.files import compact_json, open_atomic, write_chunks_atomic
from groundjudge.inert import markdown, markdown_code
from groundjudge.load.dataset import Corpus, Dataset
from groundjudge.metrics.case import ranking_of
from groundjudge.report.document import ReportDocument
from groundjudge.report.judge_section import trust_lines
from groundjudge.report.selective_section import abstention_text, queue_lines
from groundjudge.report.stability_section import stability_note, unstable_by_case, unstable_text

CLAIM_KINDS = {"unsupported": "unsupported_claim", "contradicted": "contradicted_claim",
               "misattributed": "misattributed_citation"}
AWAITS_PERSON = "awaits_person"
UNSTABLE = "unstable_verdict"
KINDS = (*CLAIM_KINDS.values(), "invalid_citation", AWAITS_PERSON, UNSTABLE)


def queue_why(reasons: list[dict[str, Any]]) -> str:
    """One line: per criterion, each judge that abstained and why."""
    return " | ".join(f"{r['criterion']}: " + "; ".join(abstention_text(a) for a in r["abstained"]) for r in reasons)


_CHUNK_ID = attrgetter("chunk_id")


def retrieval_facts(dataset: Dataset, config_id: str, case_id: str) -> dict[str, Any]:
    """Where the case's gold chunks were retrieved and whether they reached the context; None
    where the trace did not record it (``in_context`` of a trace with no recorded context)."""
    return _facts(dataset.cases[case_id], dataset.trace(config_id, case_id))


def _facts(case: GoldenCase, trace: Trace | None) -> dict[str, Any]:
    """``retrieval_facts`` of the case and its trace."""
    gold = sorted(case.relevant_chunk_ids)
    if not gold:
        return {"gold_chunks": [], "gold_retrieved": None, "gold_in_context": None}
    ranking = ranking_of(trace) if trace else []
    rank = {g: ranking.index(g) + 1 for g in gold if g in ranking}  # each gold chunk's place, from 1
    context = list(map(_CHUNK_ID, trace.context_chunks)) if trace else []  # a handful: a list scan finds one
    retrieved_known = trace is None or "retrieved_chunks" not in trace.not_recorded
    context_known = trace is None or "context_chunks" not in trace.not_recorded
    return {
        "gold_chunks": [{"chunk_id": g, "grade": case.relevance[g], "rank": rank.get(g),
                         "in_context": (g in context) if context_known else None} for g in gold],
        "gold_retrieved": bool(rank) if retrieved_known else None,
        "gold_in_context": any(map(context.__contains__, gold)) if context_known else None,
    }


def _chunk_text(trace: Trace, corpus: Corpus, chunk_id: str) -> str | None:
    """The chunk's text as the trace's context gave it, else the corpus's."""
    for c in trace.context_chunks:
        if c.chunk_id == chunk_id and c.text is not None:
            return c.text
    return corpus.text_of(chunk_id)


def triage_records(dataset: Dataset, doc: ReportDocument) -> list[dict[str, Any]]:
    """Every finding of the run (``doc``, its typed report) as a triage.jsonl row."""
    return [record for group in triage_groups(dataset, doc) for record in group]


def triage_groups(dataset: Dataset, doc: ReportDocument) -> Iterator[list[dict[str, Any]]]:
    """The findings of one (config, case) at a time, in the order of ``triage_records``: rows
    (plain JSON objects) made from the run's typed verdicts, gates and stability check."""
    selective = doc.gates.selective
    queued = {(q.config_id, q.case_id): q for q in selective.queue} if selective is not None else {}
    shaky = unstable_by_case(doc.stability)
    corpus = dataset.corpus
    in_corpus = corpus.chunks if corpus else None  # an empty corpus checks nothing
    for config_id in doc.configs:
        section = doc.judge.per_config.get(config_id)
        verdicts = section.cases if section is not None else {}
        traces = dataset.traces.get(config_id, {})
        for case_id, case in dataset.cases.items():
            trace = traces.get(case_id)  # the case's own question
            if trace is None:
                continue
            records: list[dict[str, Any]] = []
            base = {"config_id": config_id, "case_id": case_id, "tags": case.tags, "question": case.question,
                    "answer": trace.answer}
            facts = None
            # most runs queue nothing and find no verdict unstable: no key made per case then
            waiting = queued.get((config_id, case_id)) if queued else None
            if waiting is not None:
                facts = _facts(case, trace)
                reasons = [r.model_dump(mode="json") for r in waiting.reasons]
                records.append({**base, "kind": AWAITS_PERSON, "awaits": "a person's label",
                                "criteria": list(waiting.criteria), "why": queue_why(reasons), "reasons": reasons,
                                "retrieval": facts})
            unstable = shaky.get((config_id, case_id)) if shaky else None
            if unstable:
                facts = facts or _facts(case, trace)
                records.append({**base, "kind": UNSTABLE, "criteria": [u.criterion for u in unstable],
                                "why": "; ".join(unstable_text(u) for u in unstable), "retrieval": facts})
            # only what the trace recorded can show a citation to be invalid
            citations = trace.citations
            if citations:
                not_recorded = trace.not_recorded
                check_retrieved = "retrieved_chunks" not in not_recorded
                check_context = "context_chunks" not in not_recorded
                for cit in citations:
                    cited = cit.chunk_id
                    # a trace holds a handful of chunks: a scan of their ids, in C, finds one
                    if in_corpus is not None and cited not in in_corpus:
                        problem = "cited id exists nowhere in the corpus"
                    elif check_retrieved and cited not in map(_CHUNK_ID, trace.retrieved_chunks):
                        problem = "cited chunk was not retrieved"
                    elif check_context and cited not in map(_CHUNK_ID, trace.context_chunks):
                        problem = "cited chunk did not reach the context"
                    else:
                        continue
                    facts = facts or _facts(case, trace)
                    records.append({**base, "kind": "invalid_citation", "problem": problem, "cited": [cited],
                                    "chunks": {cited: _chunk_text(trace, corpus, cited)}, "retrieval": facts})
            verdict = verdicts.get(case_id)
            if verdict is not None:
                for claim in verdict.claims:
                    kind = CLAIM_KINDS.get(claim.klass)
                    if kind is None:
                        continue
                    facts = facts or _facts(case, trace)
                    terms = claim.unfound_terms
                    records.append({**base, "kind": kind, "claim": claim.claim, "verdict": claim.verdict,
                                    "support_probability": claim.confidence,
                                    "model_probability": claim.model_confidence,
                                    "unfound_terms": None if terms is None else list(terms),
                                    "cited": list(claim.cited), "supported_by": list(claim.support),
                                    "chunks": {i: _chunk_text(trace, corpus, i)
                                               for i in dict.fromkeys([*claim.cited, *claim.support])},
                                    "retrieval": facts})
            if records:
                yield records


class _GoldChunk(BaseModel):
    model_config = ConfigDict(extra="allow")
    chunk_id: str
    grade: int | None = None
    rank: int | None = None
    in_context: bool | None = False  # None: the trace did not record its context


class _Retrieval(BaseModel):
    model_config = ConfigDict(extra="allow")
    gold_chunks: list[_GoldChunk] = []


class TriageRow(BaseModel):
    """What ``groundjudge triage`` reads of a triage.jsonl row: every field it shows, with its
    type, and the fields each kind of row must have."""

    model_config = ConfigDict(extra="allow")
    kind: Literal["unsupported_claim", "contradicted_claim", "misattributed_citation", "invalid_citation",
                  "awaits_person", "unstable_verdict"]
    config_id: str
    case_id: str
    tags: list[str] = []
    question: str | None = None
    answer: str | None = None
    retrieval: _Retrieval = _Retrieval()
    criteria: list[str] | None = None
    why: str | None = None
    problem: str | None = None
    claim: str | None = None
    support_probability: float | None = None
    unfound_terms: list[str] | None = None
    cited: list[str] | None = None
    supported_by: list[str] | None = None
    chunks: dict[str, str | None] = {}

    @model_validator(mode="after")
    def _fields_of_its_kind(self) -> TriageRow:
        needed = {"awaits_person": ("criteria",), "unstable_verdict": ("criteria",),
                  "invalid_citation": ("cited", "problem")}.get(
            self.kind, ("claim", "cited", "supported_by"))
        missing = [name for name in needed if getattr(self, name) is None
                   or (self.kind == "invalid_citation" and name == "cited" and not self.cited)]
        if missing:
            raise ValueError(f"a row of kind {self.kind} needs {', '.join(missing)}")
        return self


def read_triage_jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a run's triage.jsonl, each checked (``TriageRow``) before anything reads it:
    an edited or foreign file is an InputError naming the line and field."""
    from groundjudge.files import jsonl_lines
    from groundjudge.load.records import read_text, validation_problems
    from groundjudge.strict_json import JSONProblem, loads

    if not path.exists():
        raise InputError.one(path, None, None, "no triage.jsonl here: is this the --out folder of `groundjudge run`?")
    text = read_text(path) if path.stat().st_size else ""
    rows: list[dict[str, Any]] = []
    for lineno, line in enumerate(jsonl_lines(text), 1):
        if not line.strip():
            continue
        try:
            row = loads(line)
        except JSONProblem as exc:
            raise InputError.one(path, lineno, None, exc.message) from None
        if not isinstance(row, dict):
            raise InputError.one(path, lineno, None, f"expected a JSON object, got {type(row).__name__}")
        try:
            TriageRow.model_validate(row)
        except ValidationError as exc:
            raise InputError(validation_problems(path, lineno, exc)) from None
        rows.append(row)
    return rows


def filter_records(records: Iterable[dict[str, Any]], *, tags: Iterable[str] = (), kinds: Iterable[str] = (),
                   configs: Iterable[str] = ()) -> list[dict[str, Any]]:
    tags, kinds, configs = set(tags), set(kinds), set(configs)
    return [r for r in records
            if (not tags or tags & set(r.get("tags") or ())) and (not kinds or r["kind"] in kinds)
            and (not configs or r["config_id"] in configs)]


def to_jsonl(records: Iterable[dict[str, Any]]) -> str:
    return b"".join(jsonl_lines(records)).decode("utf-8")


def jsonl_lines(records: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """``triage.jsonl`` line by line (a nightly run has hundreds of thousands of findings), in
    compact JSON as ``files.write_json_atomic`` writes it."""
    for r in records:
        yield compact_json(r) + b"\n"


_GRADES = {grade: markdown(grade) for grade in range(4)}  # the contract's grades, escaped once


def _grade_text(grade: Any) -> str:
    text = _GRADES.get(grade) if type(grade) is int else None
    return markdown(grade) if text is None else text


def _retrieval_line(facts: dict[str, Any]) -> str:
    gold = facts.get("gold_chunks")
    if not gold:
        return "no gold chunks for this case"
    return "; ".join([f"{markdown_code(g['chunk_id'])} (grade {_grade_text(g.get('grade'))}): "
                      f"{f'rank {rank}' if (rank := g.get('rank')) else 'never retrieved'}, "
                      + ("context not recorded" if (seen := g.get("in_context")) is None else "in context" if seen
                         else "not in context") for g in gold])


def render_triage_markdown(records: list[dict[str, Any]], doc: ReportDocument | None = None) -> str:
    """Findings grouped by case; with the run's report (``doc``), the judge's trust status first."""
    return "".join(triage_markdown_chunks(records, doc))


def triage_markdown_chunks(records: list[dict[str, Any]], doc: ReportDocument | None = None) -> Iterator[str]:
    """``render_triage_markdown`` in pieces, one case at a time."""
    yield _markdown_header(len(records), sum(1 for r in records if r["kind"] == AWAITS_PERSON), doc,
                           unstable=sum(1 for r in records if r["kind"] == UNSTABLE))
    # grouped by (config, case) in the order each first appears, as before; one case at a time out
    seen: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        seen.setdefault((r["config_id"], r["case_id"]), []).append(r)
    for items in seen.values():
        yield _case_markdown(items)


_CASES_PER_WRITE = 500


def write_triage_files(dataset: Dataset, doc: ReportDocument, jsonl_path: Path, markdown_path: Path) -> None:
    """``triage.jsonl`` and ``triage.md`` in one pass over the findings, a case at a time: a
    nightly run's findings never exist all at once (as a list they would hold memory for nothing). The
    Markdown's opening counts them, so its case sections go to a temporary file first. The
    bytes are those of ``jsonl_lines`` and ``triage_markdown_chunks`` over ``triage_records``."""
    found = waiting = unstable = 0
    with open_atomic(jsonl_path) as lines, tempfile.TemporaryFile(dir=markdown_path.parent) as sections:
        # the text of a few hundred cases at a time to each file: one write each, not one per case
        jsonl: list[bytes] = []  # the lines without their line feeds
        md: list[str] = []
        for group in triage_groups(dataset, doc):
            jsonl += map(compact_json, group)
            md.append(_case_markdown(group))
            found += len(group)
            for r in group:
                waiting += r["kind"] == AWAITS_PERSON
                unstable += r["kind"] == UNSTABLE
            if len(md) == _CASES_PER_WRITE:
                lines.write(b"\n".join(jsonl) + b"\n")
                sections.write("".join(md).encode("utf-8"))
                jsonl.clear()
                md.clear()
        if jsonl:
            lines.write(b"\n".join(jsonl) + b"\n")
        sections.write("".join(md).encode("utf-8"))
        sections.seek(0)
        head = _markdown_header(found, waiting, doc, unstable=unstable)
        write_chunks_atomic(markdown_path, chain([head], iter(partial(sections.read, 1 << 20), b"")))


def _markdown_header(found: int, waiting: int, doc: ReportDocument | None, *, unstable: int = 0) -> str:
    out = ["# Triage", ""]
    if doc is not None:
        out += trust_lines(doc.gates.trust) + queue_lines(doc.gates.selective)
        note = stability_note(doc.stability)
        out += [note, ""] if note else []
    out += [f"{found - waiting - unstable} finding(s): unsupported or contradicted claims, misattributed and "
            "invalid citations, grouped by case. Invalid citations are checked deterministically; the "
            "others are the judge's findings."
            + (f" {waiting} item(s) await a person's label (the human queue)." if waiting else "")
            + (f" {unstable} case(s) have an unstable verdict (inside its noise band)." if unstable else ""), ""]
    return "\n".join(out)


def _case_markdown(items: list[dict[str, Any]]) -> str:
    """One case's findings. Every value from the inputs or the judge goes through
    ``groundjudge.inert``: an answer's HTML, images, links or line breaks are shown as text."""
    first = items[0]
    out = [f"## {markdown_code(first['case_id'])} ({markdown(first['config_id'])})", "",
           f"**Question:** {markdown(first.get('question'))}", "",
           f"**Answer:** {markdown(first.get('answer'))}", "",
           f"**Retrieval:** {_retrieval_line(first.get('retrieval') or {})}", ""]
    for r in items:
        if r["kind"] == AWAITS_PERSON:
            out.append(f"- **awaits a person** ({', '.join(map(markdown, r['criteria']))}): no trusted judge settled it"
                       + (f" — {markdown(r['why'])}" if r.get("why") else ""))
            continue
        if r["kind"] == UNSTABLE:
            out.append(f"- **unstable verdict** ({', '.join(map(markdown, r['criteria']))}): {markdown(r['why'])}")
            continue
        if r["kind"] == "invalid_citation":
            out.append(f"- **invalid citation** {markdown_code(r['cited'][0])}: {markdown(r['problem'])}")
        else:
            p, terms = r.get("support_probability"), r.get("unfound_terms")
            out.append(f"- **{r['kind'].replace('_', ' ')}**: “{markdown(r['claim'])}”"
                       + ("" if p is None else f" (support {p:.2f})")
                       + (f"; not in the passages: {', '.join(map(markdown, terms))}" if terms else "") + " — cited "
                       f"{', '.join(map(markdown_code, r['cited'])) or 'nothing'}, supported by "
                       f"{', '.join(map(markdown_code, r['supported_by'])) or 'nothing'}")
        for cid, text in (r.get("chunks") or {}).items():
            snippet = (text or "(no text)").replace("\n", " ")
            out.append(f"  - {markdown_code(cid)}: {markdown(snippet[:400])}{'…' if len(snippet) > 400 else ''}")
    out.append("")
    return "\n" + "\n".join(out)
