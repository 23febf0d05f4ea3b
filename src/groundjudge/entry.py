"""The ``groundjudge`` command's entry point.

One call is run here without the command-line library: ``groundjudge metrics`` on a TREC
qrels file and run, with ``--out`` and ``--quiet`` (``groundjudge.trec_config`` takes its
settings). It is the call a team times against trec_eval, and the command-line library's
import would be a good part of its time. Only its plain form is taken: ``metrics`` then the
options ``--qrels``, ``--run``, ``--out``, ``--config`` (each once, its value the next word,
not starting with ``-``), ``--k`` followed by a whole number from 1 (repeatable) and
``--quiet``. Every other call, and this one when anything goes wrong (the run is then made
again by :mod:`groundjudge.cli`, which says what is wrong as it always does), goes to the CLI.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from groundjudge.trec_config import TrecSettings

_PATH_OPTIONS = {"--qrels": "inputs.qrels", "--run": "inputs.run", "--out": "output.out", "--config": "config"}


def main() -> None:
    call = quiet_trec_call(sys.argv[1:])
    if call is not None and _ran(call):
        return
    from groundjudge.cli import main as cli

    cli()


def quiet_trec_call(args: Sequence[str]) -> TrecSettings | None:
    """The settings of ``args`` when they are the plain quiet TREC call with ``--out`` (see the
    module), else None."""
    if len(args) < 2 or args[0] != "metrics" or "--quiet" not in args:
        return None
    given: dict[str, Path] = {}
    ks: list[int] = []
    words = iter(args[1:])
    for word in words:
        if word == "--quiet":
            continue
        value = next(words, None)
        if value is None or not value or value.startswith("-"):
            return None
        if word == "--k" and value.isascii() and value.isdigit() and value[0] != "0":
            ks.append(int(value))
        elif word in _PATH_OPTIONS and word not in given:
            given[word] = Path(value)
        else:
            return None
    if "--out" not in given:
        return None
    from groundjudge.trec_config import trec_settings

    flags = {setting: given.get(option) for option, setting in _PATH_OPTIONS.items() if setting != "config"}
    return trec_settings(given.get("--config"), {**flags, "metrics.ks": tuple(ks)})


def _ran(call: TrecSettings) -> bool:
    """Whether the call ran to the end (its reports written); False on any error."""
    from groundjudge.report.trec_json import run_trec

    assert call.out is not None  # (the call names its folder)
    try:
        run_trec(call.qrels, call.run, call.ks, call.out)
    except Exception:  # noqa: BLE001 - whatever it is, the CLI meets it again and says it its way
        return False
    return True
