"""Read TREC qrels and run files (SPEC section 4: an accepted input format).

Formats, whitespace separated, one record per line::

    qrels:  query_id  iteration  doc_id  relevance        (iteration is ignored)
    run:    query_id  Q0         doc_id  rank  score  tag  (Q0, rank and tag are ignored)

The rank column is ignored as trec_eval ignores it: the ranking is rebuilt from the scores
(see :func:`groundjudge.metrics.retrieval.trec_order`). Blank lines are skipped. Anything
else that is not a well-formed record (wrong column count, a relevance that is not an
integer, a score that is not a finite number, undecodable bytes, an empty file, the same
document twice for one query) raises :class:`InputError` naming the file, the line and the
column, and nothing is returned.

Speed matters here: a TREC run has 1000 documents per query and a real qrels file has
hundreds of thousands of lines. Each reader first tries a fast path that splits the text a
block of lines at a time and proves every line has the right column count (see
``_blocks``); only when that proof fails does it walk the file line by line, which is also
where every error message is written. Both paths return the same result.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from itertools import groupby
from pathlib import Path
from typing import Any

from groundjudge.errors import InputError

__all__ = ["read_qrels", "read_run"]

_QRELS_COLUMNS = ("query_id", "iteration", "doc_id", "relevance")
_RUN_COLUMNS = ("query_id", "Q0", "doc_id", "rank", "score", "run_tag")

# Appended to every line before a block is split: it is not whitespace, so it survives
# ``str.split()`` as a token of its own and marks where each line ended.
_EOL = "\x00"
# Blocks of about this many characters keep the freshly split tokens in the CPU cache
# until they are converted or dropped; one split of the whole file is ~1.5x slower.
_BLOCK_CHARS = 16_384
_SMALL_INTS = {str(number): number for number in range(-9, 100)}


def read_qrels(path: str | os.PathLike[str]) -> dict[str, dict[str, int]]:
    """Read a TREC qrels file into ``{query_id: {doc_id: grade}}``.

    Parameters
    ----------
    path : str or PathLike
        A UTF-8 text file of ``query_id iteration doc_id relevance`` lines.

    Returns
    -------
    dict
        Queries in order of first appearance; each maps every judged document to its
        integer grade (negative and zero grades are kept: they are judged non-relevant).

    Raises
    ------
    InputError
        If the file cannot be read or decoded, is empty, has a line without exactly four
        columns or with a non-integer relevance, or judges the same document twice for one
        query (an ambiguous grade: keep one line per query and document).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "qrels"
    >>> _ = p.write_text("q1 0 d1 2\\nq1 0 d2 0\\n")
    >>> read_qrels(p)
    {'q1': {'d1': 2, 'd2': 0}}
    """
    source = os.fspath(path)
    text = _read_text(source)
    try:
        return _qrels_from_text(text)
    except _NotProvablyWellFormed:
        return _read_qrels_by_line(source, text)


def _qrels_from_text(text: str) -> dict[str, dict[str, int]]:
    """The fast path's qrels; raises _NotProvablyWellFormed for the line-by-line reader to explain."""
    qrels: dict[str, dict[str, int]] = {}
    lines_of: dict[str, int] = {}
    for qids, docs, grades in _blocks(text, len(_QRELS_COLUMNS), ((0, None), (2, None), (3, _grades))):
        for qid, start, end in _query_runs(qids):
            judged = qrels.get(qid)
            if judged is None:
                qrels[qid] = judged = {}
                lines_of[qid] = 0
            judged.update(zip(docs[start:end], grades[start:end]))
            lines_of[qid] += end - start
    if any(len(judged) != lines_of[qid] for qid, judged in qrels.items()):
        raise _NotProvablyWellFormed  # a document judged twice
    return qrels


def read_run(path: str | os.PathLike[str]) -> dict[str, list[tuple[str, float]]]:
    """Read a TREC run file into ``{query_id: [(doc_id, score), ...]}``.

    Parameters
    ----------
    path : str or PathLike
        A UTF-8 text file of ``query_id Q0 doc_id rank score run_tag`` lines.

    Returns
    -------
    dict
        Queries in order of first appearance; each maps to its ``(doc_id, score)`` pairs in
        file order. The rank column is not kept: order the pairs with
        :func:`groundjudge.metrics.retrieval.trec_order`, as trec_eval does.

    Raises
    ------
    InputError
        If the file cannot be read or decoded, is empty, has a line without exactly six
        columns or whose score is not a finite number, or lists the same document twice
        for one query (trec_eval refuses such runs too).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "run"
    >>> _ = p.write_text("q1 Q0 d1 1 2.5 bm25\\nq1 Q0 d2 2 1.5 bm25\\n")
    >>> read_run(p)
    {'q1': [('d1', 2.5), ('d2', 1.5)]}
    """
    source = os.fspath(path)
    text = _read_text(source)
    try:
        return _run_from_text(text)
    except _NotProvablyWellFormed:
        return _read_run_by_line(source, text)


def _run_from_text(text: str) -> dict[str, list[tuple[str, float]]]:
    """The fast path's run; raises _NotProvablyWellFormed for the line-by-line reader to explain."""
    run: dict[str, list[tuple[str, float]]] = {}
    docs_of: dict[str, set[str]] = {}
    for qids, docs, scores in _blocks(text, len(_RUN_COLUMNS), ((0, None), (2, None), (4, _scores))):
        # A sum of finite floats is finite unless it overflows; only then look at each one.
        if not (math.isfinite(sum(scores)) or all(map(math.isfinite, scores))):
            raise _NotProvablyWellFormed
        for qid, start, end in _query_runs(qids):
            pairs = run.get(qid)
            if pairs is None:
                run[qid] = pairs = []
                docs_of[qid] = set()
            pairs.extend(zip(docs[start:end], scores[start:end]))
            docs_of[qid].update(docs[start:end])
    if any(len(docs_of[qid]) != len(pairs) for qid, pairs in run.items()):
        raise _NotProvablyWellFormed  # a document listed twice
    return run


def _read_text(path: str) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError.one(path, None, None, f"cannot read the file: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError.one(
            path,
            line,
            "encoding",
            f"byte 0x{data[exc.start]:02x} at column {column} is not valid UTF-8; save the file as UTF-8",
        ) from exc
    if not text or text.isspace():
        raise InputError.one(path, None, None, "the file is empty; expected one whitespace-separated record per line")
    return text


class _NotProvablyWellFormed(Exception):
    """The fast path cannot vouch for the file; the line-by-line reader takes over."""


def _blocks(
    text: str, width: int, wanted: tuple[tuple[int, Callable[[list[str]], list[Any]] | None], ...]
) -> Iterator[list[list[Any]]]:
    """The ``wanted`` columns (index, list converter or None) of each block of lines of ``text``.

    Each line gets an end-of-line token first (the text holds none of its own), so a block
    of n lines holds n markers. If it splits into ``width + 1`` tokens per line and every
    ``width + 1``-th token is a marker, no line can have more or fewer than ``width``
    columns. Otherwise (blank lines inside the file break the alignment too), or if a
    converter rejects a value, raises _NotProvablyWellFormed.
    """
    if _EOL in text:
        raise _NotProvablyWellFormed
    body = text.strip() + "\n"
    stride = width + 1
    start = 0
    while start < len(body):
        end = body.find("\n", start + _BLOCK_CHARS) + 1 or len(body)
        block = body[start:end]
        tokens = block.replace("\n", f" {_EOL} ").split()
        ends = tokens[width::stride]
        if len(tokens) != stride * block.count("\n") or ends.count(_EOL) != len(ends):
            raise _NotProvablyWellFormed
        try:
            columns = [
                tokens[index::stride] if convert is None else convert(tokens[index::stride])
                for index, convert in wanted
            ]
        except ValueError:
            raise _NotProvablyWellFormed from None
        yield columns
        start = end


def _scores(texts: list[str]) -> list[float]:
    if "_" in "".join(texts):
        raise ValueError("digit separators")  # float() takes "1_0"; the line reader refuses it
    return list(map(float, texts))


# Grades beyond this are refused: ndcg_exp's gain 2**grade - 1 of a grade in the billions would
# take all the memory there is, and any real scale of relevance is a few levels.
MAX_GRADE = 100


def _grades(texts: list[str]) -> list[int]:
    # Grades are nearly always a digit or two: a dict lookup skips int()'s parsing.
    try:
        return list(map(_SMALL_INTS.__getitem__, texts))
    except KeyError:
        if "_" in "".join(texts):
            raise ValueError("digit separators") from None  # int() takes "1_0"; the line reader refuses it
        grades = list(map(int, texts))
        if max(map(abs, grades)) > MAX_GRADE:
            raise ValueError("a grade out of range") from None  # the line reader names it
        return grades


def _query_runs(qids: list[str]) -> Iterator[tuple[str, int, int]]:
    """``(query_id, start, end)`` of each stretch of equal query ids (``groupby`` compares in C)."""
    start = 0
    for qid, stretch in groupby(qids):
        end = start + len(list(stretch))
        yield qid, start, end
        start = end


def _read_qrels_by_line(path: str, text: str) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    first_seen: dict[tuple[str, str], int] = {}
    for lineno, line in enumerate(text.split("\n"), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != len(_QRELS_COLUMNS):
            raise InputError.one(path, lineno, None, _column_count_problem(parts, _QRELS_COLUMNS))
        qid, _, doc, rel_text = parts
        try:
            grade = int(rel_text)
            if "_" in rel_text:
                raise ValueError(rel_text)
        except ValueError:
            raise InputError.one(
                path, lineno, "relevance", f"{rel_text[:40]!r} is not an integer relevance grade (e.g. 0, 1, 2)"
            ) from None
        if abs(grade) > MAX_GRADE:
            raise InputError.one(path, lineno, "relevance", f"grade {rel_text[:40]} is out of range: grades are "
                                                            f"integers from -{MAX_GRADE} to {MAX_GRADE}")
        seen_at = first_seen.setdefault((qid, doc), lineno)
        if seen_at != lineno:
            raise InputError.one(
                path,
                lineno,
                "doc_id",
                f"document {doc!r} is judged twice for query {qid!r} (first at line {seen_at}); "
                "keep one judgment per query and document",
            )
        qrels.setdefault(qid, {})[doc] = grade
    return qrels


def _read_run_by_line(path: str, text: str) -> dict[str, list[tuple[str, float]]]:
    run: dict[str, list[tuple[str, float]]] = {}
    first_seen: dict[tuple[str, str], int] = {}
    for lineno, line in enumerate(text.split("\n"), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != len(_RUN_COLUMNS):
            raise InputError.one(path, lineno, None, _column_count_problem(parts, _RUN_COLUMNS))
        qid, _, doc, _, score_text, _ = parts
        try:
            score = float(score_text)
            if "_" in score_text:
                raise ValueError(score_text)
        except ValueError:
            raise InputError.one(path, lineno, "score", f"{score_text!r} is not a number") from None
        if not math.isfinite(score):
            raise InputError.one(path, lineno, "score", f"{score_text!r} is not a finite number")
        seen_at = first_seen.setdefault((qid, doc), lineno)
        if seen_at != lineno:
            raise InputError.one(
                path,
                lineno,
                "doc_id",
                f"document {doc!r} appears twice for query {qid!r} (first at line {seen_at}); "
                "trec_eval rejects duplicate documents in a run: keep one line per query and document",
            )
        run.setdefault(qid, []).append((doc, score))
    return run


def _column_count_problem(parts: list[str], names: tuple[str, ...]) -> str:
    return f"expected {len(names)} whitespace-separated columns ({' '.join(names)}), found {len(parts)}"
