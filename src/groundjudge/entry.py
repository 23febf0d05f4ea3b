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

from groundjudge.trec_config import TrecSettings, trec_settings

_FLAGS = {"--qrels": "inputs.qrels", "--run": "inputs.run", "--out": "output.out"}  # option -> setting


def main() -> None:
    if not _ran_quietly(sys.argv[1:]):
        from groundjudge.cli import main as cli

        cli()


def quiet_trec_call(args: Sequence[str]) -> TrecSettings | None:
    """The settings of ``args`` when they are the plain quiet TREC call with ``--out`` (see the
    module), else None. A config file it names that cannot be read raises its ``InputError``."""
    if len(args) < 2 or args[0] != "metrics" or "--quiet" not in args:
        return None
    given: dict[str, Path] = {}
    ks: list[int] = []
    words = iter(args[1:])
    for word in words:
        if word == "--quiet":
            continue
        value = next(words, "")
        if not value or value.startswith("-"):
            return None
        if word == "--k" and value.isascii() and value.isdigit() and value[0] != "0":
            ks.append(int(value))
        elif (word in _FLAGS or word == "--config") and word not in given:
            given[word] = Path(value)
        else:
            return None
    if "--out" not in given:
        return None
    flags = {setting: given.get(option) for option, setting in _FLAGS.items()}
    return trec_settings(given.get("--config"), {**flags, "metrics.ks": tuple(ks)})


def _ran_quietly(args: Sequence[str]) -> bool:
    """Whether ``args`` are the plain quiet TREC call and it ran to the end (its reports
    written); False for any other call, and on any error (a config file that cannot be read
    too): the CLI then runs the call and says what is wrong its own way."""
    from groundjudge.report.trec_json import run_trec

    try:
        call = quiet_trec_call(args)
        if call is None or call.out is None:
            return False
        run_trec(call.qrels, call.run, call.ks, call.out)
    except Exception:  # noqa: BLE001 - whatever it is, the CLI meets it again and says it its way
        return False
    return True
