"""Errors of the benchmarks stage (their messages are meant for the user as they are)."""

from __future__ import annotations

from rootstep.model import InputError, RootstepError

__all__ = ["BenchmarkError", "InputError"]


class BenchmarkError(RootstepError):
    """An unknown benchmark or verifier, missing data files, or a verifier used without what it needs."""


class ValidationError(BenchmarkError):
    """A benchmark file that cannot be added: every problem found, each naming file, line and field."""

    def __init__(self, problems: list[str], more: int = 0):
        self.problems = problems
        tail = f"\n... and {more} more problem(s)" if more else ""
        super().__init__(f"{len(problems) + more} problem(s):\n" + "\n".join(problems) + tail)
