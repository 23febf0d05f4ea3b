"""The ``wfgy`` profile: WFGY's grounded-QA report, in WFGY's own terms (SPEC 7).

Pure functions over WFGY's own parsed records (:mod:`groundjudge.load.adapters.wfgy`), not the
native contracts, so that the numbers are WFGY's numbers. The definitions, for gold items and
the last trace of each qid:

- S: shipped answers (the claim is not the refusal token ``not in context``); R: refusals.
  A: gold items with ``answerable: true``; U: with ``answerable: false``.
- Containment C: some ``gold_claim_substr`` of at least 5 characters occurs in the claim
  (case-insensitive, after stripping the claim). Shorter substrings never match. A gold item
  with no substrings is vacuously contained.
- Citation hit H: every cited id is in ``retrieved_ids`` (scoped grounding) and the citations
  overlap ``gold_citations``; when the gold item lists no citations, H means "cites nothing".
- Constraint OK K (SCU): when the gold item locks ``constraints``, ``constraints_echo`` equals
  them as a set (order-insensitive, exact strings) and no contradiction is detected.
- precision = |{S and A: C and H (and K when SCU is enforced)}| / |S|;
  CHR = |{S and A: H}| / |S|; under_refusal = |S and U| / |U|; over_refusal = |R and A| / |A|;
  recall@k = |{A: gold_citations within the first k retrieved_ids}| / |A|.
- CHR@k, the upper bound of WFGY's eval README ("best-case CHR if the model always picked the
  right ids from the retrieved pool"): CHR with each shipped answer's citations replaced by the
  best choice among the first k retrieved ids, |{S and A: some citation choice within the top k
  is a hit}| / |S|, i.e. the top k overlap ``gold_citations`` (or, with none, citing nothing is
  the hit). Null when nothing shipped (the README gives no convention). It bounds CHR for a
  model that sees only the top k; an answer citing an id ranked below k can make CHR exceed it.

Empty denominators follow WFGY's reference scorer: precision and CHR are 1.0 with nothing
shipped, under- and over-refusal are 0.0 with no unanswerable / answerable item, recall@k is
0.0 with no answerable item. Those values are reported as the scorer computes them, but a
ship gate over an empty denominator is not evaluated and does not hold (SPEC 7): nothing
shipped is not a precision of 1.0 that passes. The WFGY pages say nothing about SCU's empty denominator, so
``constraint_integrity`` is ``None`` (null) when no shipped answer had constraints to check.

Where WFGY's page and its reference scorer disagree, this module follows:

- the scorer for CHR: a shipped answer to an unanswerable question is in the denominator but
  never a hit (the page's formula would count such an answer citing nothing as a hit);
- the scorer for the refusal token: the claim, stripped and lower-cased, is ``not in context``
  (``"Not in context"`` is a refusal; ``"not in context."`` is a shipped answer);
- the scorer's comment for a gold line without ``gold_claim_substr`` (vacuously contained,
  like ``[]``; the scorer's code would fail containment for a missing field).

The scorer's options are this profile's knobs (:class:`WfgySettings`): ``k`` (``--k``),
``gates`` (``--gates``: WFGY's ``name=value`` list, or a file holding one) and ``scu_enforced``
(``--scu_enforced``), also set by ``[profile.wfgy]`` in the config file.

A gold qid with no trace is scored as the scorer scores it: an empty claim, shipped, with no
citations and no retrieved ids; it is also listed under ``missing_trace``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationInfo, field_validator

from groundjudge.errors import InputError, InputProblem
from groundjudge.inert import markdown, markdown_code
from groundjudge.load.adapters.wfgy import (
    FORMAT_NAME,
    REFUSAL_TOKEN,
    WfgyGold,
    WfgyTrace,
    is_refusal,
    read_gold,
    read_traces,
)
from groundjudge.load.records import read_text
from groundjudge.profiles.registry import (
    Flag,
    Profile,
    ProfileResult,
    ProfileSettings,
    evidence_overlap,
    relative_to_config,
)

__all__ = [
    "DEFAULT_GATES",
    "MIN_SUBSTRING_LENGTH",
    "PROFILE",
    "ItemCheck",
    "WfgySettings",
    "best_citation_hit",
    "check_items",
    "citation_hit",
    "constraints_ok",
    "contains_gold_substr",
    "gate_overrides",
    "parse_gates",
    "read_gate_file",
    "recall_hit",
    "render_markdown",
    "report",
]

MIN_SUBSTRING_LENGTH = 5
DEFAULT_GATES: dict[str, str] = {"precision": "0.80", "chr": "0.75", "under": "0.05", "over": "0.10"}
_GATE_ALIASES = {"precision": "precision", "chr": "chr", "under": "under", "under_refusal": "under",
                 "over": "over", "over_refusal": "over", "scu": "scu_violations",
                 "scu_violations": "scu_violations"}
_MAX_OFFENDERS = 10

Contradicts = Callable[[str, str], bool]


def gate_overrides(spec: str | Mapping[str, Any] | Sequence[tuple[str, Any]]) -> dict[str, str]:
    """The gates a spec names, by their canonical names, values kept as the strings given.

    Accepts WFGY's two spellings, ``"precision=0.80,chr=0.75,under=0.05,over=0.10"`` (its
    scorer's) and ``"precision=0.80 chr=0.75 under_refusal=0.05 over_refusal=0.10"`` (its eval
    README's), or name/value pairs (a mapping, as a TOML table gives). Raises ValueError for an
    unknown gate or a value that is not a finite number.
    """
    if isinstance(spec, str):
        pairs = []
        for part in re.split(r"[,\s]+", spec.strip()):
            if not part:
                continue
            if "=" not in part:
                raise ValueError(f"gate {part!r}: expected name=value, e.g. precision=0.80")
            name, value = part.split("=", 1)
            pairs.append((name, value))
    else:
        items = spec.items() if isinstance(spec, Mapping) else spec
        pairs = [(name, value if isinstance(value, str) else repr(value)) for name, value in items]
    gates: dict[str, str] = {}
    for name, value in pairs:
        key = _GATE_ALIASES.get(name.strip())
        if key is None:
            raise ValueError(f"unknown gate {name!r}; known: {', '.join(sorted(_GATE_ALIASES))}")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"gate {name!r}: {value!r} is not a number") from None
        if not math.isfinite(number):
            raise ValueError(f"gate {name!r}: {value!r} is not a finite number")
        gates[key] = value.strip()
    return gates


def read_gate_file(path: str | Path) -> dict[str, str]:
    """The gates of a gate file: WFGY's ``name=value`` pairs, separated by commas, spaces or line
    breaks; ``#`` starts a comment. Raises :class:`InputError` naming the file and line of each
    problem, or a missing file."""
    text = read_text(Path(path))
    gates: dict[str, str] = {}
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0]
        try:
            gates.update(gate_overrides(words))
        except ValueError as exc:
            problems.append(InputProblem(str(path), number, "gates", str(exc)))
    if problems:
        raise InputError(problems)
    if not gates:
        raise InputError.one(path, None, "gates", "names no gate; write name=value pairs, e.g. precision=0.80")
    return gates


def parse_gates(spec: str | Mapping[str, Any] | None = None, *, scu_enforced: bool = False) -> dict[str, str]:
    """Gate thresholds as WFGY writes them: its defaults, with the gates ``spec`` names
    (:func:`gate_overrides`) in their place; with ``scu_enforced`` the ``scu_violations`` gate
    (default ``"0"``) is added. Raises ValueError for an unknown gate or a bad value.
    """
    gates = dict(DEFAULT_GATES)
    if scu_enforced:
        gates["scu_violations"] = "0"
    if spec is not None:
        gates.update(gate_overrides(spec))
    return gates


class WfgySettings(ProfileSettings):
    """The options of WFGY's scorer (``score_eval.py --k --gates``, ``--scu_enforced`` of its
    eval README), as the ``wfgy`` profile's knobs."""

    k: Annotated[int, Flag("--k"), Field(ge=1, description=(
        "WFGY's k: recall@k and CHR@k look at the first k retrieved ids (default 5)."))] = 5
    gates: Annotated[tuple[tuple[str, str], ...] | None, Flag("--gates", words=True), Field(description=(
        "WFGY's ship gates, as its scorer takes them (precision=0.80,chr=0.75,under=0.05,over=0.10; "
        "under_refusal=, over_refusal=, scu= too), or a file holding them; unnamed gates keep WFGY's "
        "defaults."))] = None
    scu_enforced: Annotated[bool, Flag("--scu_enforced", "--scu-enforced"), Field(description=(
        "Enforce constraint integrity (SCU): it counts in precision and gates on 0 violations."))] = False

    @field_validator("gates", mode="before")
    @classmethod
    def _gate_spec(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        if isinstance(value, str) and "=" not in value:
            path = relative_to_config(value, info)
            if not path.is_file():
                raise ValueError(f"{value!r} is neither gates written name=value (precision=0.80,chr=0.75) "
                                 f"nor a gate file ({path} is not a file)")
            gates = read_gate_file(path)  # its problems name the file and line
        elif isinstance(value, (str, Mapping, list, tuple)):
            gates = gate_overrides(value)
        else:
            raise ValueError("give the gates as name=value pairs (precision=0.80,chr=0.75), a gate file, or a table")
        return tuple(gates.items())


def contains_gold_substr(claim: str, substrings: Sequence[str] | None) -> bool:
    """Containment C: some substring of >= 5 characters occurs in ``claim``, ignoring case.

    No substrings at all (``[]`` or ``None``) is vacuously true; substrings shorter than five
    characters are ignored, so a list of only short ones is never contained.

    >>> contains_gold_substr("X rejects null keys.", ["rejects null keys"])
    True
    >>> contains_gold_substr("yes, it is", ["yes"])
    False
    """
    if not substrings:
        return True
    text = claim.strip().lower()
    return any(len(s) >= MIN_SUBSTRING_LENGTH and s.lower() in text for s in substrings)


def citation_hit(citations: Sequence[str], gold_citations: Sequence[str], retrieved_ids: Sequence[str]) -> bool:
    """Citation hit H: citations within ``retrieved_ids`` and overlapping ``gold_citations``.

    With no gold citations, a hit means the answer cites nothing (WFGY's reference rule).

    >>> citation_hit(["p1#2"], ["p1#2"], ["p1#1", "p1#2"])
    True
    >>> citation_hit(["p1#2", "p9#9"], ["p1#2"], ["p1#2"])  # p9#9 was never retrieved
    False
    """
    cited = set(citations)
    if not cited <= set(retrieved_ids):
        return False
    if gold_citations:
        return bool(cited & set(gold_citations))
    return not cited


def recall_hit(gold_citations: Sequence[str], retrieved_ids: Sequence[str], k: int) -> bool:
    """Recall@k for one item: every gold citation is among the first ``k`` retrieved ids.

    An answerable item with no gold citations is trivially recalled (the empty set is a subset).
    """
    return set(gold_citations) <= set(retrieved_ids[:k])


def best_citation_hit(gold_citations: Sequence[str], retrieved_ids: Sequence[str], k: int) -> bool:
    """Whether some choice of citations among the first ``k`` retrieved ids is a citation hit H
    (the best case CHR@k assumes): the top k overlap ``gold_citations``; with no gold citations,
    citing nothing is the hit, so it always exists.

    >>> best_citation_hit(["p8#3"], ["p8#1", "p8#2", "p8#3"], 2), best_citation_hit(["p8#3"], ["p8#3"], 2)
    (False, True)
    """
    return not gold_citations or bool(set(gold_citations) & set(retrieved_ids[:k]))


def constraints_ok(
    constraints: Sequence[str] | None, echo: Sequence[str] | None, *, claim: str = "",
    contradicts: Contradicts | None = None,
) -> bool | None:
    """Constraint OK K (SCU); None when the gold item locks no constraint.

    The echo must equal the locked set (order-insensitive, exact strings; a missing echo fails).
    WFGY names "no SCU contradiction detected" without saying how to detect one, so detection
    is a caller's ``contradicts(claim, constraint)`` predicate; without one, none is detected.
    """
    if not constraints:
        return None
    if echo is None or set(echo) != set(constraints):
        return False
    return not (contradicts is not None and any(contradicts(claim, c) for c in constraints))


@dataclass(frozen=True)
class ItemCheck:
    """WFGY's per-qid checks. ``has_trace`` False means the qid was scored as an empty claim."""

    qid: str
    answerable: bool
    has_trace: bool
    shipped: bool
    containment: bool
    citation_hit: bool
    constraint_ok: bool | None
    recall_hit: bool | None
    best_hit: bool  # a citation hit was possible within the top k (CHR@k)
    claim: str
    citations: tuple[str, ...]
    retrieved_ids: tuple[str, ...]

    def correct(self, scu_enforced: bool) -> bool:
        """Counts towards precision: shipped, answerable, C and H (and K when enforced)."""
        scu_fine = not scu_enforced or self.constraint_ok is not False
        return self.shipped and self.answerable and self.containment and self.citation_hit and scu_fine

    def problems(self, scu_enforced: bool) -> list[str]:
        if not self.answerable:
            return ["under-refusal: answered an unanswerable question"] if self.shipped else []
        if not self.shipped:
            return ["over-refusal: refused an answerable question"]
        found = []
        if not self.containment:
            found.append("claim misses every gold_claim_substr")
        if not self.citation_hit:
            outside = [c for c in self.citations if c not in self.retrieved_ids]
            found.append(f"cites ids never retrieved: {', '.join(outside)}" if outside
                         else "citations miss gold_citations")
        if scu_enforced and self.constraint_ok is False:
            found.append("constraints_echo does not match the locked constraints")
        return found


def check_items(
    gold: Sequence[WfgyGold], traces: Sequence[WfgyTrace], *, k: int = 5, contradicts: Contradicts | None = None,
) -> list[ItemCheck]:
    """WFGY's per-qid checks, in gold order. ``traces`` in file order: the last one of a qid wins.

    Raises ValueError when ``gold`` repeats a qid or ``k`` is not positive.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    seen: set[str] = set()
    for item in gold:
        if item.qid in seen:
            raise ValueError(f"gold repeats qid {item.qid!r}")
        seen.add(item.qid)
    latest: dict[str, WfgyTrace] = {t.qid: t for t in traces}
    checks = []
    for item in gold:
        trace = latest.get(item.qid)
        claim = trace.claim if trace else ""
        cites = trace.citations if trace else []
        retrieved = list(trace.retrieved_ids) if trace else []
        shipped = not is_refusal(claim)
        echo = trace.constraints_echo if trace else None
        checks.append(ItemCheck(
            qid=item.qid,
            answerable=item.answerable,
            has_trace=trace is not None,
            shipped=shipped,
            containment=contains_gold_substr(claim, item.gold_claim_substr),
            citation_hit=citation_hit(cites, item.gold_citations, retrieved),
            constraint_ok=constraints_ok(item.constraints, echo, claim=claim, contradicts=contradicts),
            recall_hit=recall_hit(item.gold_citations, retrieved, k) if item.answerable else None,
            best_hit=item.answerable and best_citation_hit(item.gold_citations, retrieved, k),
            claim=claim,
            citations=tuple(cites),
            retrieved_ids=tuple(retrieved),
        ))
    return checks


def _rate(numerator: int, denominator: int, empty: float) -> float:
    return numerator / denominator if denominator else empty


def report(
    gold: Sequence[WfgyGold],
    traces: Sequence[WfgyTrace],
    *,
    k: int = 5,
    gates: str | Mapping[str, str | float] | None = None,
    scu_enforced: bool = False,
    contradicts: Contradicts | None = None,
) -> dict[str, Any]:
    """WFGY's JSON report for ``gold`` and ``traces``.

    The keys WFGY's scorer prints come first, with its names, 4-decimal rounding and string gate
    values: ``answered``, ``refused``, ``answerable``, ``unanswerable``, ``precision``, ``chr``,
    ``under_refusal``, ``over_refusal``, ``recall@k``, ``k``, ``gates``, ``pass``. Gates compare
    the unrounded values, as the scorer does. groundjudge adds: ``chr@k`` (the upper bound of
    WFGY's eval README, over the same shipped answers as CHR; null when nothing shipped), ``scu`` (SCU checks on shipped
    answers whose gold item locks constraints; they count in ``precision`` and gate ``pass``
    only when ``scu_enforced``, WFGY's ``--scu_enforced``), ``gate_results`` (each gate's value,
    threshold, denominator ``n`` and verdict; a gate whose denominator is empty is ``no_data``
    and does not hold, so ``pass`` is false: the scorer's 1.0 or 0.0 there is its convention,
    not evidence), ``missing_trace``, ``unknown_trace`` (trace qids not in the gold
    set, ignored as the scorer ignores them), ``superseded_traces`` (earlier lines replaced by a
    later line of the same qid), ``refusal_token`` and ``offenders`` (the first ten failing
    items with their retrieved ids and citations, for triage).
    """
    thresholds = parse_gates(gates, scu_enforced=scu_enforced)
    checks = check_items(gold, traces, k=k, contradicts=contradicts)
    shipped = [c for c in checks if c.shipped]
    answerable = [c for c in checks if c.answerable]
    n_s, n_a = len(shipped), len(answerable)
    n_u = len(checks) - n_a
    precision = _rate(sum(c.correct(scu_enforced) for c in shipped), n_s, 1.0)
    chr_rate = _rate(sum(c.answerable and c.citation_hit for c in shipped), n_s, 1.0)
    under = _rate(sum(not c.answerable for c in shipped), n_u, 0.0)
    over = _rate(sum(not c.shipped for c in answerable), n_a, 0.0)
    recall = _rate(sum(bool(c.recall_hit) for c in answerable), n_a, 0.0)
    chr_at_k = sum(c.best_hit for c in shipped) / n_s if n_s else None

    scu_checked = [c for c in shipped if c.constraint_ok is not None]
    violations = [c.qid for c in scu_checked if c.constraint_ok is False]
    integrity = (len(scu_checked) - len(violations)) / len(scu_checked) if scu_checked else None

    results = [
        _gate("precision", precision, thresholds["precision"], ">=", n_s, "no shipped answer"),
        _gate("chr", chr_rate, thresholds["chr"], ">=", n_s, "no shipped answer"),
        _gate("under", under, thresholds["under"], "<=", n_u, "no unanswerable question"),
        _gate("over", over, thresholds["over"], "<=", n_a, "no answerable question"),
    ]
    if scu_enforced:
        results.append(_gate("scu_violations", len(violations), thresholds["scu_violations"], "<=",
                             len(scu_checked), "no shipped answer had constraints to check"))

    gold_ids = {g.qid for g in gold}
    trace_ids = [t.qid for t in traces]
    offenders = [
        {"qid": c.qid, "problems": c.problems(scu_enforced), "claim": c.claim,
         "retrieved_ids": list(c.retrieved_ids), "citations": list(c.citations)}
        for c in checks if c.problems(scu_enforced)
    ][:_MAX_OFFENDERS]
    return {
        "answered": n_s,
        "refused": len(checks) - n_s,
        "answerable": n_a,
        "unanswerable": n_u,
        "precision": round(precision, 4),
        "chr": round(chr_rate, 4),
        "under_refusal": round(under, 4),
        "over_refusal": round(over, 4),
        "recall@k": round(recall, 4),
        "k": k,
        "gates": thresholds,
        "pass": all(r["passed"] for r in results),
        "chr@k": None if chr_at_k is None else round(chr_at_k, 4),
        "scu": {
            "enforced": scu_enforced,
            "checked": len(scu_checked),
            "violations": len(violations),
            "violation_qids": violations,
            "constraint_integrity": None if integrity is None else round(integrity, 4),
        },
        "gate_results": results,
        "missing_trace": [c.qid for c in checks if not c.has_trace],
        "unknown_trace": sorted({q for q in trace_ids if q not in gold_ids}),
        "superseded_traces": len(trace_ids) - len(set(trace_ids)),
        "refusal_token": REFUSAL_TOKEN,
        "offenders": offenders,
    }


def _gate(name: str, value: float, threshold: str, op: str, n: int, empty: str) -> dict[str, Any]:
    """One ship gate over ``n`` items. With none (an empty denominator) the scorer's value is its
    convention (1.0 or 0.0), not evidence: the gate is not evaluated, so it does not hold."""
    gate = {"gate": name, "value": round(value, 4), "op": op, "threshold": threshold, "n": n}
    if not n:
        return {**gate, "passed": False, "status": "no_data",
                "reason": f"{empty}: the value is the scorer's convention for an empty denominator, not evidence"}
    limit = float(threshold)
    passed = value >= limit if op == ">=" else value <= limit
    return {**gate, "passed": passed, "status": "pass" if passed else "fail", "reason": None}


def _fmt(value: float | None) -> str:
    if value is None:
        return "null"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _cell(text: str) -> str:
    return markdown(text)  # qids and ids from the files: inert, pipes and line breaks included


def render_markdown(result: dict[str, Any]) -> str:
    """A Markdown summary of a :func:`report` result: metrics with their counts, gates, offenders."""
    scu = result["scu"]
    lines = [
        "# WFGY grounded-QA eval",
        "",
        f"**{'PASS' if result['pass'] else 'FAIL'}** on WFGY's ship gates.",
        "",
        "| metric | value | over |",
        "|---|---|---|",
        f"| precision (answered) | {_fmt(result['precision'])} | {result['answered']} shipped |",
        f"| CHR | {_fmt(result['chr'])} | {result['answered']} shipped |",
        f"| under-refusal | {_fmt(result['under_refusal'])} | {result['unanswerable']} unanswerable |",
        f"| over-refusal | {_fmt(result['over_refusal'])} | {result['answerable']} answerable |",
        f"| recall@{result['k']} | {_fmt(result['recall@k'])} | {result['answerable']} answerable |",
        (f"| CHR@{result['k']} (upper bound: best citations among the top {result['k']}) | "
        f"{_fmt(result['chr@k'])} | {result['answered']} shipped |"),
        (f"| constraint integrity (SCU) | {_fmt(scu['constraint_integrity'])} | {scu['checked']} shipped with "
        f"constraints{'' if scu['enforced'] else ' (not enforced)'} |"),
        "",
        (f"Answered {result['answered']}, refused {result['refused']} "
        f"(refusal token {markdown_code(result['refusal_token'])})."),
        "",
        "## Gates",
        "",
        "| gate | value | threshold | result |",
        "|---|---|---|---|",
    ]
    for gate in result["gate_results"]:
        verdict = "pass" if gate["passed"] else "FAIL"
        if gate.get("status") == "no_data":
            verdict = f"NOT EVALUATED ({gate['reason']})"
        lines.append(f"| {gate['gate']} | {_fmt(gate['value'])} | {gate['op']} {gate['threshold']} | {verdict} |")
    notes = []
    if result["missing_trace"]:
        notes.append("- No trace (scored as an empty shipped claim): "
                     + ", ".join(map(markdown, result["missing_trace"])))
    if result["unknown_trace"]:
        notes.append("- Traces for qids not in the gold set (ignored): "
                     + ", ".join(map(markdown, result["unknown_trace"])))
    if result["superseded_traces"]:
        notes.append(f"- {result['superseded_traces']} earlier trace line(s) replaced by a later run of the same qid")
    if scu["violations"]:
        notes.append(f"- SCU violations: {', '.join(map(markdown, scu['violation_qids']))}")
    if notes:
        lines += ["", "## Notes", "", *notes]
    if result["offenders"]:
        lines += ["", "## Offenders", "", "| qid | problems | retrieved_ids | citations |", "|---|---|---|---|"]
        for off in result["offenders"]:
            cells = [off["qid"], "; ".join(off["problems"]), ", ".join(off["retrieved_ids"]), ", ".join(off["citations"])]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def from_files(golden: Path, traces: Sequence[Path], live: Sequence[Path] = (), *,
               settings: WfgySettings | None = None) -> ProfileResult:
    """WFGY's report from its gold file and trace files (all traces read as one stream, in
    order), with the scorer's options in ``settings`` (its defaults when None)."""
    settings = settings or WfgySettings()
    gold = [g for _, g in read_gold(golden)]
    per_file = {path: [t for _, t in read_traces(path)] for path in traces}
    for path, mine in per_file.items():
        evidence_overlap(path, [t.qid for t in mine], golden, [g.qid for g in gold])
    result = report(gold, [t for mine in per_file.values() for t in mine], k=settings.k,
                    gates=dict(settings.gates or ()), scu_enforced=settings.scu_enforced)
    return ProfileResult(FORMAT_NAME, result, render_markdown(result), bool(result["pass"]))


PROFILE = Profile(FORMAT_NAME, from_files, WfgySettings)
