"""Adapters: the formats of the evaluation systems groundjudge replaces (SPEC 3.5), read as
they are and converted to the native contracts.

Each adapter module defines its records, ``looks_like`` and ``to_native`` (on the scaffolding
of :mod:`.foreign`) and a ``FORMAT`` entry; ``BUILT_IN`` below registers them, in the order
detection tries them. :mod:`.registry` holds the registry, ``detect_format`` and ``load_any``.
"""

from __future__ import annotations

from groundjudge.load.adapters import day39, kb_eval, otel, wfgy, wfgy_chunking
from groundjudge.load.adapters.registry import (
    AUTO,
    NATIVE,
    ForeignRead,
    InputFormat,
    detect_format,
    format_choices,
    format_names,
    get_format,
    load_any,
    register_format,
    unregister_format,
)

__all__ = [
    "AUTO",
    "BUILT_IN",
    "NATIVE",
    "ForeignRead",
    "InputFormat",
    "detect_format",
    "format_choices",
    "format_names",
    "get_format",
    "load_any",
    "register_format",
    "unregister_format",
]

BUILT_IN: tuple[InputFormat, ...] = (wfgy.FORMAT, wfgy_chunking.FORMAT, kb_eval.FORMAT, day39.FORMAT, otel.FORMAT)

for _fmt in BUILT_IN:
    register_format(_fmt)
