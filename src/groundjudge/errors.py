"""Every error groundjudge raises on purpose, under one base class.

- :class:`InputError`: bad input or configuration, one line per problem naming file, line and
  field (exit code 2).
- :class:`JudgeUnavailable`: no judge can be used for this run (exit code 3).
- :class:`StorageError`: a file groundjudge keeps (the judge cache, the run history, the run's
  reports) cannot be read or written; one line naming it and how to recover (exit code 2).
- :class:`ChunkerMismatch`: two runs to compare were chunked differently and exact chunk-id
  matching was asked for; the command line reports it as an input error of the second run.
- Judge call failures (``groundjudge.judge.client.CallFailed`` and its kinds) and invalid
  verdicts (``groundjudge.judge.verdict.VerdictError``) derive from :class:`GroundjudgeError`
  too; the engine turns them into ``judge_error`` outcomes, never into scores.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path


class GroundjudgeError(Exception):
    """Base of every error groundjudge raises on purpose."""


@dataclass(frozen=True)
class InputProblem:
    """One thing wrong with one place of one input file."""

    file: str
    line: int | None
    field: str | None
    problem: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.field}: {self.problem}" if self.field else f"{where}: {self.problem}"


@dataclass
class InputError(GroundjudgeError):
    """Raised by loaders; carries every problem found so the user can fix them in one pass."""

    problems: list[InputProblem] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)

    @classmethod
    def one(cls, file: str | Path, line: int | None, field_name: str | None, problem: str) -> InputError:
        return cls([InputProblem(str(file), line, field_name, problem)])


class JudgeUnavailable(GroundjudgeError):
    """No judge can be used for this run (exit code 3)."""


class StorageError(GroundjudgeError):
    """A file groundjudge keeps cannot be read or written; the message names it and the way out."""


class ChunkerMismatch(GroundjudgeError, ValueError):
    """Two sides of a comparison were chunked differently, so their chunk ids cannot be matched,
    and the caller asked for exact chunk-id matching only (``--strict-chunker-version``).

    Raised where chunk ids are compared: ``profiles.kb_eval.compare_runs`` (kb-eval's runs) and
    ``report.compare.compare_configs`` (two configs of groundjudge's reports). ``a`` and ``b``
    say which sides (``"run 'run_a'"``); a side's chunker is one version or the set of versions
    its traces name.
    """

    def __init__(self, a: str, chunker_a: str | Collection[str], b: str, chunker_b: str | Collection[str]) -> None:
        self.a, self.b, self.chunker_a, self.chunker_b = a, b, chunker_a, chunker_b
        super().__init__(f"{a} was chunked with {_versions(chunker_a)} and {b} with {_versions(chunker_b)}; "
                         "chunk ids cannot be compared exactly. Re-run with the same chunker, or drop the strict "
                         "setting to match by doc_id + span overlap")


def _versions(chunker: str | Collection[str]) -> str:
    if isinstance(chunker, str):
        return repr(chunker)
    names = sorted(chunker)
    return repr(names[0]) if len(names) == 1 else repr(names)
