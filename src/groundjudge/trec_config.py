"""The settings of ``groundjudge metrics`` on TREC files alone, read without the settings models.

Such a call names a qrels file and a run, and perhaps the cut-offs and the output folder, on
the command line or in a config file that sets nothing else, with no ``GROUNDJUDGE_*``
variable set. Those few settings are taken here only when each is of the kind the models
would take as it is (a path, a list of cut-offs of at least 1). Any other call, and any value
not taken here, goes through :func:`groundjudge.api.resolve_config`, which says what is wrong
with it: this module writes no error message of its own (a config file that cannot be read
raises the error :mod:`groundjudge.config_file` writes for both).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from groundjudge.config_file import DEFAULT_KS, config_file, environment_settings, read_config_file


class TrecSettings(NamedTuple):
    qrels: Path
    run: Path
    ks: tuple[int, ...]  # sorted, each once
    out: Path | None  # None: the command's default


# the settings a TREC-only call may give, (section, name): these paths and the cut-offs
PATH_SETTINGS = (("inputs", "qrels"), ("inputs", "run"), ("output", "out"))
KS_SETTING = ("metrics", "ks")
_SECTIONS = {section for section, _ in (*PATH_SETTINGS, KS_SETTING)}


def trec_settings(config_path: str | Path | None, flags: Mapping[str, Any],
                  environ: Mapping[str, str] | None = None) -> TrecSettings | None:
    """The settings of a TREC-only call, or None when the call is not one (or gives a value
    that only the settings models may judge).

    ``config_path`` and ``flags`` are what :func:`groundjudge.api.resolve_config` takes
    ("section.name" -> value, ``None`` or an empty list or tuple for a flag not given)."""
    if environment_settings(os.environ if environ is None else environ):
        return None
    given: dict[tuple[str, str], Any] = {}
    path = config_file(config_path)
    if path is not None:  # each of its values is checked as it is, before any flag overrides it
        for section, table in read_config_file(path, PATH_SETTINGS).items():
            if section not in _SECTIONS or not isinstance(table, dict):
                return None  # another table, even an empty one, is for the models to judge
            given.update(((section, name), value) for name, value in table.items())
        if not all(map(_taken, given.items())):
            return None
    for dotted, value in flags.items():
        if value is not None and not (isinstance(value, (list, tuple)) and not value):
            section, _, name = dotted.partition(".")
            if not _taken(((section, name), value)):
                return None
            given[(section, name)] = value
    qrels, run, out = (given.get(setting) for setting in PATH_SETTINGS)
    if qrels is None or run is None:
        return None  # the models say what is missing
    ks = given.get(KS_SETTING, DEFAULT_KS)
    return TrecSettings(Path(qrels), Path(run), tuple(sorted(set(ks))), None if out is None else Path(out))


def _taken(item: tuple[tuple[str, str], Any]) -> bool:
    """Whether a setting and its value are taken here: a path of :data:`PATH_SETTINGS`, or the
    cut-offs, each an integer of at least 1: values the models would take as they are."""
    setting, value = item
    if setting == KS_SETTING:
        return isinstance(value, (list, tuple)) and bool(value) and all(type(k) is int and k >= 1 for k in value)
    return setting in PATH_SETTINGS and isinstance(value, (str, Path))
