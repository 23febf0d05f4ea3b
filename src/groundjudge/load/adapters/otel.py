"""Traces as OpenTelemetry exports them, in the OpenInference or the OTel GenAI conventions,
graded without re-plumbing them into JSONL.

The file is OTLP JSON Lines (:mod:`.otlp_json`: the Collector's file exporter, the SDK's OTLP
JSON file exporter). Spans are grouped by trace id; one trace is one answered question:

- **root span**: the span without a parent (or whose parent was not exported). Its
  ``input.value`` is the question and its ``output.value`` the answer (when
  ``input.mime_type``/``output.mime_type`` is ``application/json``, the ``question``/``query``/
  ``input`` and ``answer``/``output``/``response`` member of the object).
- **answer**, failing the root's: the last LLM span's output, OpenInference
  ``llm.output_messages.{i}.message.content`` (the last assistant message) or GenAI
  ``gen_ai.output.messages`` (its text parts), else that span's ``output.value``.
- **question**, failing the root's: the retriever's query (``input.value``,
  ``gen_ai.retrieval.query.text`` or ``reranker.query``).
- **span kinds**: ``openinference.span.kind`` (``RETRIEVER``, ``RERANKER``, ``LLM``...) or GenAI
  ``gen_ai.operation.name`` (``retrieval``; ``chat``, ``text_completion``, ``generate_content``
  are LLM spans).
- **context**: the documents of the last retriever or reranker span, OpenInference
  ``retrieval.documents.{i}.document.{id,content,score,metadata}`` (a reranker's
  ``reranker.output_documents.{i}...``) or GenAI ``gen_ai.retrieval.documents`` (objects with
  ``id``, ``score`` and, where content is captured, ``content``). **retrieved**: the last
  retriever span's documents, ranked as listed. A document without an id is named by its
  content's hash (``sha256:`` and 16 hex digits), the same in every trace.
- **citations**: OpenTelemetry has no convention for them; a context document id written in
  square brackets in the answer (``[doc-7]``, ``[doc-7, doc-9]``) is a citation of it.
- **config**: a resource attribute (``service.version`` unless the run names another), else
  ``unknown``.
- **case**: without a golden set, the trace id, and the case is made from the trace: its
  question, and no expected chunks or behaviour (``not_recorded``: the retrieval and behaviour
  metrics are null with that reason; the judge and the citation checks run). With a golden set
  (``--golden``, native), a span attribute names the case (``groundjudge.case_id`` unless the
  run names another); a trace naming a case the golden set lacks is an input error, as in
  every format.

A trace that cannot be graded is skipped with its reason, never dropped silently: no root
span, no question, no retriever or reranker span, no answer, a root span whose status is ERROR,
documents exported without their content (content capture is opt-in in OpenTelemetry) that
``--corpus`` does not resolve, no case attribute to join on, a second trace of the same case
and config. A line that is not OTLP JSON is an input error naming file, line and field.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from groundjudge.contracts import GoldenCase
from groundjudge.errors import InputError, InputProblem
from groundjudge.load.adapters.foreign import NativeTraces, native_trace
from groundjudge.load.adapters.otlp_json import Span, read_spans
from groundjudge.load.adapters.registry import ForeignRead, InputFormat
from groundjudge.load.dataset import Corpus, load_golden

__all__ = ["DEFAULT_CASE_ATTRIBUTE", "DEFAULT_CONFIG_ATTRIBUTE", "FORMAT", "FORMAT_NAME", "NO_GOLDEN",
           "claims_file", "looks_like", "read_traces", "to_native"]

FORMAT_NAME = "otel"
DEFAULT_CONFIG_ATTRIBUTE = "service.version"
DEFAULT_CASE_ATTRIBUTE = "groundjudge.case_id"
NO_GOLDEN = "no golden set: an OpenTelemetry trace records what the system did, not what it should have done"

_KEPT = ("openinference.span.kind", "input.value", "input.mime_type", "output.value", "output.mime_type",
         "retrieval.documents", "reranker.output_documents", "reranker.query", "llm.output_messages",
         "llm.token_count.", "gen_ai.operation.name", "gen_ai.retrieval.", "gen_ai.output.messages",
         "gen_ai.usage.")
_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_MESSAGE = re.compile(r"llm\.output_messages\.(\d+)\.message\.(content|role)")
_CITED = re.compile(r"\[([^\[\]\n]{1,400})\]")
_QUESTION_KEYS = ("question", "query", "input", "user_input", "text")
_ANSWER_KEYS = ("answer", "output", "response", "result", "text")

Kind = Literal["RETRIEVER", "RERANKER", "LLM", "OTHER"]


def _kind(span: Span) -> Kind:
    kind = span.attributes.get("openinference.span.kind")
    if isinstance(kind, str) and kind.upper() in ("RETRIEVER", "RERANKER", "LLM"):
        return kind.upper()  # type: ignore[return-value]
    operation = span.attributes.get("gen_ai.operation.name")
    if operation == "retrieval":
        return "RETRIEVER"
    if operation in _LLM_OPERATIONS:
        return "LLM"
    return "OTHER"


@dataclass
class _Doc:
    id: str | None = None
    content: str | None = None
    score: float | None = None
    doc_id: str | None = None


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _metadata_doc(value: Any) -> str | None:
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    if isinstance(value, dict):
        for key in ("doc_id", "document_id"):
            if isinstance(value.get(key), str) and value[key]:
                return value[key]  # type: ignore[no-any-return]
    return None


def _score(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _documents(span: Span, kind: Kind) -> list[_Doc]:
    """The span's documents, in their listed order (OpenInference flattened or as a list, or
    GenAI ``gen_ai.retrieval.documents``)."""
    attrs = span.attributes
    prefix = "reranker.output_documents" if kind == "RERANKER" else "retrieval.documents"
    flat: dict[int, _Doc] = {}
    start = len(prefix) + 1
    for key, value in attrs.items():
        # prefix.{i}.document.{part}: split, not a regular expression (millions of keys a night)
        if not key.startswith(prefix) or key[start - 1:start] != ".":
            continue
        index, _, rest = key[start:].partition(".")
        if not index.isdigit() or not rest.startswith("document."):
            continue
        part = rest[9:]
        if part not in ("id", "content", "score", "metadata"):
            continue
        doc = flat.setdefault(int(index), _Doc())
        if part == "id":
            doc.id = _text(value)
        elif part == "content":
            doc.content = value if isinstance(value, str) else None
        elif part == "score":
            doc.score = _score(value)
        else:
            doc.doc_id = _metadata_doc(value)
    if flat:
        return [flat[i] for i in sorted(flat)]
    listed = attrs.get(prefix)
    if listed is None:
        listed = attrs.get("gen_ai.retrieval.documents")
    if isinstance(listed, str):  # GenAI allows the list as a JSON string where structure is not supported
        try:
            listed = orjson.loads(listed)
        except orjson.JSONDecodeError:
            listed = None
    docs = []
    for item in listed if isinstance(listed, list) else []:
        if not isinstance(item, dict):
            continue
        docs.append(_Doc(id=_text(_member(item, "document.id", "id")),
                         content=_member(item, "document.content", "content"),
                         score=_score(_member(item, "document.score", "score")),
                         doc_id=_metadata_doc(_member(item, "document.metadata", "metadata"))))
    for doc in docs:
        if not isinstance(doc.content, str):
            doc.content = None
    return docs


def _member(item: dict[str, Any], *names: str) -> Any:
    """The first of ``names`` in ``item`` (OpenInference's ``document.id`` or GenAI's ``id``)."""
    return next((item[n] for n in names if n in item), None)


def _from_json(value: Any, mime: Any, keys: Sequence[str]) -> str | None:
    if not isinstance(value, str):
        return None
    if mime != "application/json":
        return value
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError:
        return value
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        return next((data[k] for k in keys if isinstance(data.get(k), str)), None)
    return None


def _llm_answer(span: Span) -> str | None:
    attrs = span.attributes
    messages: dict[int, dict[str, str]] = {}
    for key, value in attrs.items():
        match = _MESSAGE.fullmatch(key)
        if match and isinstance(value, str):
            messages.setdefault(int(match.group(1)), {})[match.group(2)] = value
    if messages:
        ordered = [messages[i] for i in sorted(messages)]
        said = [m for m in ordered if m.get("role", "assistant") == "assistant" and "content" in m]
        if said:
            return said[-1]["content"]
    output = attrs.get("gen_ai.output.messages")
    if isinstance(output, str):
        try:
            output = orjson.loads(output)
        except orjson.JSONDecodeError:
            output = None
    if isinstance(output, list):
        texts = []
        for message in output:
            if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
                parts = message.get("parts")
                texts = [p["content"] for p in parts if isinstance(p, dict) and p.get("type") == "text"
                         and isinstance(p.get("content"), str)] if isinstance(parts, list) else []
        if texts:
            return "".join(texts)
    return _from_json(attrs.get("output.value"), attrs.get("output.mime_type"), _ANSWER_KEYS)


def _root(spans: Sequence[Span]) -> Span | None:
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if s.parent_id is None]
    if not roots:  # the real root was not exported: its highest exported descendant stands in
        roots = [s for s in spans if s.parent_id not in ids]
    return min(roots, key=lambda s: (s.start_ns, -s.end_ns)) if roots else None


def _doc_id(doc: _Doc) -> str | None:
    if doc.id:
        return doc.id
    if doc.content is not None:
        return "sha256:" + hashlib.sha256(doc.content.encode()).hexdigest()[:16]
    return None


def _attribute(spans: Iterable[Span], root: Span, name: str) -> str | None:
    for span in (root, *spans):
        value = _text(span.attributes.get(name))
        if value:
            return value
    return None


@dataclass
class _Options:
    config_attribute: str = DEFAULT_CONFIG_ATTRIBUTE
    case_attribute: str = DEFAULT_CASE_ATTRIBUTE
    joined: bool = False
    corpus: Corpus = field(default_factory=Corpus)


class _Skip(Exception):
    pass


def _trace_data(trace_id: str, spans: Sequence[Span], options: _Options) -> tuple[str, str, str, dict[str, Any]]:
    """(case id, config id, question, the native trace's fields) of one trace; :class:`_Skip`
    with the reason when it cannot be graded."""
    root = _root(spans)
    if root is None:
        raise _Skip("no root span")
    if root.status_code == 2:
        raise _Skip("the root span's status is ERROR" + (f": {root.status_message}" if root.status_message else ""))
    kinds = {s.span_id: _kind(s) for s in spans}
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    retrievers = [s for s in ordered if kinds[s.span_id] in ("RETRIEVER", "RERANKER")]
    if not retrievers:
        raise _Skip("no retriever or reranker span (nothing says what the answer was grounded on)")
    first_stage = [s for s in retrievers if kinds[s.span_id] == "RETRIEVER"] or retrievers
    context_span, retriever = retrievers[-1], first_stage[-1]
    question = _from_json(root.attributes.get("input.value"), root.attributes.get("input.mime_type"), _QUESTION_KEYS)
    if not question:
        query = retriever.attributes
        question = (_text(query.get("input.value")) or _text(query.get("gen_ai.retrieval.query.text"))
                    or _text(context_span.attributes.get("reranker.query")))
    answer = _from_json(root.attributes.get("output.value"), root.attributes.get("output.mime_type"), _ANSWER_KEYS)
    llms = [s for s in sorted(spans, key=lambda s: (s.end_ns, s.start_ns)) if kinds[s.span_id] == "LLM"]
    if answer is None and llms:
        answer = _llm_answer(llms[-1])
    if answer is None:
        raise _Skip("no answer (neither the root span's output.value nor an LLM span's output messages)")

    case_id = trace_id
    if options.joined:
        named = _attribute(spans, root, options.case_attribute)
        if named is None:
            raise _Skip(f"no {options.case_attribute} attribute to join it to the golden set")
        case_id = named
    elif not question:
        raise _Skip("no question (neither the root span's input.value nor the retriever's query)")

    context_docs = _documents(context_span, kinds[context_span.span_id])
    retrieved_docs = context_docs if retriever is context_span else _documents(retriever, kinds[retriever.span_id])
    context: list[tuple[str, _Doc]] = []
    retrieved: list[tuple[str, _Doc]] = []
    no_content = []
    for docs, out in ((context_docs, context), (retrieved_docs, retrieved)):
        for i, doc in enumerate(docs):
            cid = _doc_id(doc)
            if cid is None:
                raise _Skip(f"document {i} of span {context_span.span_id if docs is context_docs else retriever.span_id}"
                            " has neither an id nor content")
            out.append((cid, doc))
    for cid, doc in context:
        if doc.content is None and options.corpus.text_of(cid) is None:
            no_content.append(cid)
    if no_content:
        if not options.corpus:
            raise _Skip("its documents were exported without content (content capture is opt-in in OpenTelemetry): "
                        "give --corpus with their text")
        raise _Skip(f"documents exported without content and not in the corpus: {', '.join(no_content[:5])}"
                    + (f" and {len(no_content) - 5} more" if len(no_content) > 5 else ""))

    known = {cid for cid, _ in context}
    cited: list[str] = []
    for match in _CITED.finditer(answer):
        for part in match.group(1).split(","):
            cid = part.strip()
            if cid in known and cid not in cited:
                cited.append(cid)
    tokens: dict[str, int] = {}
    for span in llms:
        for source, name in (("llm.token_count.prompt", "prompt"), ("llm.token_count.completion", "completion"),
                             ("gen_ai.usage.input_tokens", "prompt"), ("gen_ai.usage.output_tokens", "completion")):
            value = span.attributes.get(source)
            if isinstance(value, int) and value >= 0:
                tokens[name] = tokens.get(name, 0) + value
    if tokens:
        tokens["total"] = sum(tokens.values())
    config = _text(root.resource.get(options.config_attribute)) or next(
        (v for s in spans if (v := _text(s.resource.get(options.config_attribute)))), "unknown")
    data: dict[str, Any] = {
        "query_id": case_id,
        "config_id": config,
        "question": question,
        # the judge reads the context's text; the ranking needs ids, documents and scores only
        "retrieved_chunks": [{"chunk_id": cid, "doc_id": doc.doc_id, "score": doc.score, "rank": rank}
                             for rank, (cid, doc) in enumerate(retrieved, 1)],
        "context_chunks": [{"chunk_id": cid, **({"text": doc.content} if doc.content is not None else {})}
                           for cid, doc in context],
        "answer": answer,
        "citations": cited,
        "latency_ms": {"end_to_end": max(0, root.end_ns - root.start_ns) / 1e6,
                       "retrieve": max(0, retriever.end_ns - retriever.start_ns) / 1e6},
        "tokens": tokens,
        "otel_trace_id": trace_id,
        "otel_span_id": root.span_id,
    }
    return case_id, config, question or "", data


def read_traces(golden: Path | None, trace_paths: Sequence[Path], corpus: Corpus,
                settings: Mapping[str, str | None]) -> ForeignRead:
    """Grade-ready cases and traces from OTLP JSON exports, and the traces skipped with why.

    ``settings``: ``config_attribute`` (the resource attribute naming the config) and
    ``case_attribute`` (the span attribute naming the golden case when ``golden`` is given).
    Raises :class:`InputError` naming file, line and field for a line that is not OTLP JSON
    traces, and for a trace naming a case the golden set lacks.
    """
    options = _Options(config_attribute=settings.get("config_attribute") or DEFAULT_CONFIG_ATTRIBUTE,
                       case_attribute=settings.get("case_attribute") or DEFAULT_CASE_ATTRIBUTE,
                       joined=golden is not None, corpus=corpus)
    keep_attr = options.case_attribute

    def keep(key: str) -> bool:
        return key.startswith(_KEPT) or key == keep_attr

    def keep_resource(key: str) -> bool:
        return key == options.config_attribute

    def share(key: str) -> bool:  # a document's id and text: the same in every trace that retrieved it
        return key.endswith((".document.content", ".document.id"))

    by_trace: dict[str, list[Span]] = {}
    problems: list[InputProblem] = []
    shared: dict[str, str] = {}
    for path in trace_paths:
        try:
            for span in read_spans(Path(path), keep, keep_resource, share=share, shared=shared):
                by_trace.setdefault(span.trace_id, []).append(span)
        except InputError as exc:
            problems.extend(exc.problems)
    del shared
    if problems:
        raise InputError(problems)

    gold = load_golden(golden, corpus) if golden is not None else None
    cases: dict[str, GoldenCase] = dict(gold) if gold is not None else {}
    traces: NativeTraces = {}
    skipped: dict[str, str] = {}
    first: dict[tuple[str, str], str] = {}
    while by_trace:
        # each trace's spans are let go as it is converted: an export's spans are never all
        # held twice
        trace_id, spans = next(iter(by_trace.items()))
        del by_trace[trace_id]
        try:
            case_id, config, question, data = _trace_data(trace_id, spans, options)
        except _Skip as why:
            skipped[trace_id] = str(why)
            continue
        root = _root(spans)
        assert root is not None  # _trace_data skipped a trace without one
        if gold is not None and case_id not in gold:
            problems.append(InputProblem(root.file, root.line, options.case_attribute,
                                         f"unknown case {case_id!r}: not in the golden set"))
            continue
        if (config, case_id) in first:
            skipped[trace_id] = f"case {case_id!r} config {config!r} is graded from trace {first[config, case_id]}"
            continue
        first[config, case_id] = trace_id
        trace = native_trace(data, root.file, root.line, problems)
        if trace is None:
            continue
        if gold is None:
            cases[case_id] = GoldenCase.model_validate({
                "id": case_id, "question": question,
                "not_recorded": {"expected_behavior": NO_GOLDEN, "expected_chunk_ids": NO_GOLDEN}})
        traces.setdefault(config, {})[case_id] = {0: trace}
    if problems:
        raise InputError(problems)
    return ForeignRead(cases, traces, skipped)


def looks_like(first_object: dict[str, Any], role: Literal["gold", "trace"]) -> bool:
    """An OTLP JSON traces line: a ``resourceSpans`` list (never a golden set)."""
    return role == "trace" and isinstance(first_object, dict) and isinstance(first_object.get("resourceSpans"), list)


def claims_file(path: Path, role: Literal["gold", "trace"]) -> bool:
    """The same test on the first line alone: an export can be gigabytes, and detection reads
    no more of it than that."""
    if role != "trace" or path.suffix.lower() in {".yaml", ".yml"}:
        return False
    try:
        with path.open("rb") as handle:
            for raw in handle:
                if raw.strip():
                    return raw.lstrip().startswith(b"{") and looks_like(orjson.loads(raw), role)
    except (OSError, orjson.JSONDecodeError):
        return False
    return False


def to_native(gold_path: Path | None, trace_paths: Sequence[Path]) -> tuple[dict[str, GoldenCase], NativeTraces]:
    """:func:`read_traces` with the default attributes and no corpus, without the skipped
    traces (``load_any`` reads them through :func:`read_traces` and reports them)."""
    read = read_traces(gold_path, trace_paths, Corpus(), {})
    return read.cases, read.traces


FORMAT = InputFormat(FORMAT_NAME, looks_like, to_native, claims_file=claims_file, read_traces=read_traces)
