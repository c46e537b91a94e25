"""Errors that name the file, the field and the problem."""

from __future__ import annotations


class RootstepError(Exception):
    """Base class of rootstep's own errors: their message is meant for the user as it is."""


class InputError(RootstepError):
    """Bad input: `file`, `field` (a JSON path such as `history[3].content`) and what is wrong."""

    def __init__(self, file: str, field: str, problem: str):
        self.file, self.field, self.problem = str(file), field, problem
        super().__init__(f"{self.file}: {field}: {problem}")


class WarehouseError(RootstepError):
    """The warehouse location or catalog cannot be used as asked."""


class MissingRecording(RootstepError, ValueError):
    """A run that must be replayed has no `recording` (imported, or written by something else than an adapter)."""
