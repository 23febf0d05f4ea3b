"""Every error groundjudge raises on purpose, under one base class.

- :class:`InputError`: bad input or configuration, one line per problem naming file, line and
  field (exit code 2).
- :class:`JudgeUnavailable`: no judge can be used for this run (exit code 3).
- :class:`StorageError`: a file groundjudge keeps (the judge cache, the run history, the run's
  reports) cannot be read or written; one line naming it and how to recover (exit code 2).
- Judge call failures (``groundjudge.judge.client.CallFailed`` and its kinds) and invalid
  verdicts (``groundjudge.judge.verdict.VerdictError``) derive from :class:`GroundjudgeError`
  too; the engine turns them into ``judge_error`` outcomes, never into scores.
"""

from __future__ import annotations

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
