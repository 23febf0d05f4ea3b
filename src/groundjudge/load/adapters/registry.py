"""The input formats groundjudge reads besides its own: one entry per system it replaces.

An entry names the format, recognises its files (``looks_like``) and converts them to the
native contracts (``to_native``). The command line's ``--format`` choices, the config's
``[inputs] format`` check and format detection all read this registry, so a new system is one
adapter module plus one :func:`register_format` call. Its own report (a profile) registers
separately, by the same name, in :mod:`groundjudge.profiles` (a later stage).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, Literal

from groundjudge.contracts import GoldenCase
from groundjudge.errors import InputError
from groundjudge.load.adapters.foreign import NativeData, NativeTraces
from groundjudge.load.dataset import Corpus, Dataset, assemble_dataset, by_paraphrase, load_corpus, load_dataset
from groundjudge.load.json_stream import first_object, head_first_object
from groundjudge.load.records import read_head, read_text

__all__ = [
    "AUTO",
    "NATIVE",
    "ForeignRead",
    "InputFormat",
    "Role",
    "detect_format",
    "format_choices",
    "format_names",
    "get_format",
    "load_any",
    "register_format",
    "unregister_format",
]

AUTO = "auto"  # detect the format from the files
NATIVE = "native"  # groundjudge's own contracts (SPEC 3.1-3.3)

Role = Literal["gold", "trace"]

_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


@dataclass(frozen=True)
class ForeignRead:
    """What a format that reads its traces alone returns (``read_traces``): cases by id, traces
    by config id -> case id -> paraphrase index, and the traces it could not grade -> why."""

    cases: dict[str, GoldenCase]
    traces: NativeTraces
    skipped: dict[str, str]


@dataclass(frozen=True)
class InputFormat:
    """One foreign format.

    ``looks_like(first_object, role)`` says whether the first record of a gold (``role="gold"``)
    or trace (``"trace"``) file is in this format; it must not raise on any dict.
    ``to_native(gold_path, trace_paths)`` reads both and returns native cases by id and traces
    by config id -> case id -> paraphrase index; it raises :class:`InputError` naming file, line
    and field for anything it cannot read. ``claims_file(path, role)``, when given, recognises
    a whole file that has no first record to look at (a database); it must not raise.
    ``read_corpus(path)``, where the system keeps its chunks in a shape of its own, reads that
    file as the corpus (the same errors).

    ``read_traces(golden, traces, corpus, settings)``, when given, reads a format whose traces
    stand alone (an OpenTelemetry export): the golden set is optional (None), the corpus is
    read first and passed in, ``settings`` are the run's ``[inputs]`` settings for trace
    formats (``config_attribute``, ``case_attribute``), and the traces it skips come back with
    their reasons (:class:`ForeignRead`). ``load_any`` then uses it instead of ``to_native``.
    """

    name: str
    looks_like: Callable[[dict[str, Any], Role], bool]
    to_native: Callable[[Path, list[Path]], NativeData]
    _: KW_ONLY  # the optional hooks, by name: a positional one would land in the wrong field
    claims_file: Callable[[Path, Role], bool] | None = None
    # The system's own chunk store, read as the corpus (``--corpus``); None: the native corpus.
    read_corpus: Callable[[Path], Corpus] | None = None
    read_traces: Callable[[Path | None, list[Path], Corpus, Mapping[str, str | None]], ForeignRead] | None = None

    @property
    def needs_golden(self) -> bool:
        """Whether a run in this format needs ``--golden`` (its traces alone cannot be graded)."""
        return self.read_traces is None


_FORMATS: dict[str, InputFormat] = {}


def register_format(fmt: InputFormat) -> InputFormat:
    """Add ``fmt``; detection tries formats in registration order. Returns ``fmt``.

    Raises ValueError for a name that is taken, reserved (``auto``, ``native``) or not a
    lower-case word with hyphens (it becomes a command-line choice).
    """
    if fmt.name in (AUTO, NATIVE) or fmt.name in _FORMATS:
        raise ValueError(f"format name {fmt.name!r} is already taken")
    if not _NAME.fullmatch(fmt.name):
        raise ValueError(f"format name {fmt.name!r}: use lower-case letters, digits and hyphens")
    _FORMATS[fmt.name] = fmt
    return fmt


def unregister_format(name: str) -> None:
    """Remove a registered format (a test or notebook that registered one cleans up)."""
    _FORMATS.pop(name, None)


def format_names() -> tuple[str, ...]:
    """The registered foreign formats, in registration order."""
    return tuple(_FORMATS)


def format_choices() -> tuple[str, ...]:
    """Every value ``--format`` and ``[inputs] format`` accept."""
    return (AUTO, NATIVE, *_FORMATS)


def get_format(name: str) -> InputFormat:
    """The registered format ``name``; KeyError naming the known ones otherwise."""
    try:
        return _FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r}; known: {', '.join(format_choices())}") from None


_HEAD_BYTES = 1 << 20  # a first record's line longer than this: the file is read whole


def _first_object(path: Path) -> dict[str, Any] | None:
    if path.suffix.lower() in {".yaml", ".yml"}:
        return None
    # One object per line, an array of them, or pretty-printed ones: an unreadable start is
    # None here, and the loader reports it with its line number. A long JSON Lines file is
    # told by its head (its first line), not read whole twice.
    head = read_head(path, _HEAD_BYTES)
    if head is not None:
        decided, first = head_first_object(head)
        if decided:
            return first
    return first_object(read_text(path))


def _claimants(path: Path, role: Role) -> list[str]:
    whole = [name for name, fmt in _FORMATS.items() if fmt.claims_file is not None and fmt.claims_file(path, role)]
    if whole:
        return whole
    first = _first_object(path)
    if first is None:
        return []
    return [name for name, fmt in _FORMATS.items() if fmt.looks_like(first, role)]


def detect_format(golden: str | Path | None, traces: Sequence[str | Path] = ()) -> str:
    """The format whose gold (or, failing that, trace) shape the files have; else ``"native"``.

    Raises :class:`InputError` when two formats claim the same file: name one with ``--format``.
    """
    gold: list[tuple[Path, Role]] = [(Path(golden), "gold")] if golden is not None else []
    checks: list[tuple[Path, Role]] = [*gold, *((Path(t), "trace") for t in traces[:1])]
    for path, role in checks:
        found = _claimants(path, role)
        if len(found) > 1:
            raise InputError.one(path, 1, "format", f"the first record fits several formats ({', '.join(found)}); "
                                                    "name one with --format")
        if found:
            return found[0]
    return NATIVE


def load_any(golden: str | Path | None, traces: Sequence[str | Path], corpus: str | Path | None = None,
             fmt: str = AUTO, settings: Mapping[str, str | None] | None = None) -> tuple[Dataset, str]:
    """Load golden set and traces in ``fmt`` (or the detected format) as a native Dataset.

    ``golden`` may be None for a format whose traces stand alone (``read_traces``); ``settings``
    are passed to that hook. Raises :class:`InputError` for a missing golden set otherwise."""
    if fmt == AUTO:
        fmt = detect_format(golden, traces)
    found = _FORMATS.get(fmt)
    if found is not None and found.read_traces is not None:
        the_corpus = (found.read_corpus or load_corpus)(Path(corpus)) if corpus else Corpus()
        read = found.read_traces(Path(golden) if golden is not None else None, [Path(t) for t in traces],
                                 the_corpus, settings or {})
        sources = {"golden": str(golden or ""), "traces": ", ".join(str(t) for t in traces),
                   "corpus": str(corpus or ""), "format": fmt}
        own, paraphrases = by_paraphrase(read.traces)
        return assemble_dataset(read.cases, own, the_corpus, sources, paraphrases=paraphrases,
                                skipped=read.skipped), fmt
    if golden is None:
        raise InputError.one(", ".join(map(str, traces)) or "inputs", None, "golden",
                             f"the {fmt} format needs a golden set: give --golden")
    if fmt == NATIVE:
        return load_dataset(golden, traces, corpus), fmt
    if fmt not in _FORMATS:
        raise InputError.one(golden, None, "format", f"unknown format {fmt!r}; known: {', '.join(format_choices())}")
    cases, by_config = _FORMATS[fmt].to_native(Path(golden), [Path(t) for t in traces])
    read_corpus = _FORMATS[fmt].read_corpus or load_corpus
    the_corpus = read_corpus(Path(corpus)) if corpus else Corpus()
    sources = {"golden": str(golden), "traces": ", ".join(str(t) for t in traces), "corpus": str(corpus or ""),
               "format": fmt}
    own, paraphrases = by_paraphrase(by_config)
    return assemble_dataset(cases, own, the_corpus, sources, paraphrases=paraphrases), fmt
