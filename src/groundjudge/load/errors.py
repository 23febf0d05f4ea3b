"""Input errors live in :mod:`groundjudge.errors`; this name stays for existing imports."""

from groundjudge.errors import InputError, InputProblem

__all__ = ["InputError", "InputProblem"]
