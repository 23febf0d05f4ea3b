"""Input errors: one clear message naming file, line and field (exit code 2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


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
class InputError(Exception):
    """Raised by loaders; carries every problem found so the user can fix them in one pass."""

    problems: list[InputProblem] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)

    @classmethod
    def one(cls, file: str | Path, line: int | None, field_name: str | None, problem: str) -> InputError:
        return cls([InputProblem(str(file), line, field_name, problem)])
