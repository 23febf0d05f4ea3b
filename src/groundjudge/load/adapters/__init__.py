"""Adapters: the formats of the evaluation systems groundjudge replaces (SPEC 3.5), read as
they are and converted to the native contracts. ``detect_format`` names the format of a golden
file from its first record; ``--format`` names it explicitly."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from groundjudge.load.adapters import day39, kb_eval, wfgy, wfgy_chunking
from groundjudge.load.dataset import Corpus, Dataset, assemble_dataset, load_corpus, load_dataset
from groundjudge.errors import InputError
from groundjudge.load.records import read_text

ADAPTERS: dict[str, ModuleType] = {"wfgy": wfgy, "wfgy-chunking": wfgy_chunking, "kb-eval": kb_eval,
                                   "day39": day39}
FORMATS = ("native", *ADAPTERS)


def _first_object(path: Path) -> dict | None:
    if path.suffix.lower() in {".yaml", ".yml"}:
        return None
    for line in read_text(path).splitlines():
        if line.strip():
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                return None  # the loader will report it with its line number
            return value if isinstance(value, dict) else None
    return None


def detect_format(golden: str | Path, traces: Sequence[str | Path] = ()) -> str:
    """The adapter whose gold (or, failing that, trace) shape the files have; else "native"."""
    first = _first_object(Path(golden))
    if first is not None:
        for name, module in ADAPTERS.items():
            if module.looks_like(first, "gold"):
                return name
    for path in traces[:1]:
        first = _first_object(Path(path))
        if first is not None:
            for name, module in ADAPTERS.items():
                if module.looks_like(first, "trace"):
                    return name
    return "native"


def load_any(golden: str | Path, traces: Sequence[str | Path], corpus: str | Path | None = None,
             fmt: str = "auto") -> tuple[Dataset, str]:
    """Load golden set and traces in ``fmt`` (or the detected format) as a native Dataset."""
    if fmt == "auto":
        fmt = detect_format(golden, traces)
    if fmt == "native":
        return load_dataset(golden, traces, corpus), fmt
    if fmt not in ADAPTERS:
        raise InputError.one(golden, None, "format", f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    cases, by_config = ADAPTERS[fmt].to_native(golden, list(traces))
    the_corpus = load_corpus(corpus) if corpus else Corpus()
    sources = {"golden": str(golden), "traces": ", ".join(str(t) for t in traces), "corpus": str(corpus or ""),
               "format": fmt}
    return assemble_dataset(cases, by_config, the_corpus, sources), fmt
