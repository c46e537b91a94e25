"""The sandbox interface every caller codes against (verifiers, adapters, flows)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from pydantic import BaseModel


class ExecResult(BaseModel):
    """What one execution in a sandbox did."""

    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    output_truncated: bool = False
    isolated: bool = True
    """False only for the local fallback, which is not isolated."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed


@runtime_checkable
class SandboxSession(Protocol):
    """A multi-step episode: files written by one call are there for the next."""

    def run(
        self,
        command: list[str] | str | None = None,
        *,
        code: str | None = None,
        files: dict[str, str | bytes] | None = None,
        stdin: str | None = None,
        timeout: float = 10.0,
    ) -> ExecResult: ...


@runtime_checkable
class Sandbox(Protocol):
    """Runs a command, or Python `code`, with `files` written into a fresh work dir first."""

    def run(
        self,
        command: list[str] | str | None = None,
        *,
        code: str | None = None,
        files: dict[str, str | bytes] | None = None,
        stdin: str | None = None,
        timeout: float = 10.0,
    ) -> ExecResult: ...

    def session(self) -> AbstractContextManager[SandboxSession]: ...
