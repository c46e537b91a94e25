"""The sandbox interface every caller codes against (verifiers, adapters, flows)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from ._request import make_request


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
    """A multi-step episode: files written by one call are there for the next.

    An implementation may subclass it and give `execute(request)` and `timeout_cap`: its `run` then makes
    the arguments into one checked `Request` (`make_request`, the timeout capped at `timeout_cap`)."""

    def run(
        self,
        command: list[str] | str | None = None,
        *,
        code: str | None = None,
        files: dict[str, str | bytes] | None = None,
        stdin: str | None = None,
        timeout: float = 10.0,
    ) -> ExecResult:
        """Run `command` (a shell string or an argv list) or Python `code` in the work dir.

        `files` (relative path -> content) are written into the work dir first. `timeout` is capped at
        `limits.timeout_s`. A run that exceeds it is killed with all its processes (`timed_out`); in Docker,
        one that exceeds the memory limit is killed by the kernel (`oom_killed`). Exit codes of processes
        killed by a signal are 128 + the signal, as in a shell.
        """
        request = make_request(command, code, files, stdin, timeout, max_timeout=self.timeout_cap)  # type: ignore[attr-defined]
        return self.execute(request)  # type: ignore[attr-defined]


@runtime_checkable
class Sandbox(SandboxSession, Protocol):
    """Runs a command, or Python `code`, with `files` written into a fresh work dir first; `session()`
    keeps one work dir (and container) for a multi-step episode."""

    def session(self) -> AbstractContextManager[SandboxSession]: ...
