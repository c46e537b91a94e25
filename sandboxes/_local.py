"""The local fallback: a subprocess with rlimits in a temporary directory. It is NOT isolated.

What it lacks compared with the Docker sandbox: the code runs as the calling user with the host's file
system (it can read and write whatever that user can), the host's network, and the host's processes in
view. Only rlimits apply (address space, CPU seconds, file size, open files; processes only when not
root), a wall-clock timeout kills the process group, the environment is the same explicit minimal one,
and output is capped. Every result says `isolated=False`. It is refused unless allowed explicitly
(`allow=True` or `ROOTSTEP_ALLOW_LOCAL_SANDBOX=1`).
"""

from __future__ import annotations

import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rootstep.sandboxes._api import ExecResult, Sandbox, SandboxSession
from rootstep.sandboxes._limits import SandboxLimits, SandboxUnavailableError
from rootstep.sandboxes._request import BASE_ENV, Request, check_env

ALLOW_ENV = "ROOTSTEP_ALLOW_LOCAL_SANDBOX"
WARNING = (
    "rootstep LocalSandbox is NOT isolated: code runs as this user with the host's files, network and "
    "processes; only rlimits and a timeout apply. Use the Docker sandbox for untrusted code."
)


class NotIsolatedWarning(UserWarning):
    """Code is about to run outside any container."""


def local_allowed() -> bool:
    return os.environ.get(ALLOW_ENV, "").strip().lower() in ("1", "true", "yes")


def _rlimits(limits: SandboxLimits, timeout: float) -> None:  # runs in the child before exec
    os.setsid()
    mem = limits.memory_mb * 1024 * 1024
    cpu = int(timeout) + 2
    for res, value in (
        (resource.RLIMIT_AS, mem),
        (resource.RLIMIT_CPU, cpu),
        (resource.RLIMIT_FSIZE, limits.work_mb * 1024 * 1024),
        (resource.RLIMIT_NOFILE, limits.nofile),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(res, (value, value))
    if os.geteuid() != 0:  # root ignores RLIMIT_NPROC
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.pids, limits.pids))


def _python_argv(argv: list[str]) -> list[str]:
    # "python3" in a sandbox means the image's python; here it is this interpreter.
    return [sys.executable, *argv[1:]] if argv and argv[0] in ("python3", "python") else argv


def _execute(request: Request, workdir: Path, limits: SandboxLimits, env: dict[str, str]) -> ExecResult:
    for rel, data in request.files.items():
        target = workdir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    run_env = dict(env, HOME=str(workdir), TMPDIR=str(workdir), PATH=os.defpath + ":" + BASE_ENV["PATH"])
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            _python_argv(request.argv),
            cwd=workdir,
            env=run_env,
            stdin=subprocess.PIPE if request.stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: _rlimits(limits, request.timeout),
        )
    except (FileNotFoundError, PermissionError) as exc:
        return ExecResult(exit_code=127 if isinstance(exc, FileNotFoundError) else 126, stdout="",
                          stderr=f"{request.argv[0]}: {exc.strerror}\n", duration_s=time.monotonic() - start,
                          isolated=False)
    if request.stdin is not None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(request.stdin)
        except OSError:
            pass
        proc.stdin.close()
    assert proc.stdout is not None and proc.stderr is not None
    bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    sel = selectors.DefaultSelector()
    for fd in bufs:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    cap, truncated, timed_out = limits.output_bytes, False, False
    deadline = start + request.timeout
    while sel.get_map():
        if time.monotonic() >= deadline and not timed_out:
            timed_out = True
            _kill_group(proc.pid)
        if proc.poll() is not None:
            _kill_group(proc.pid)  # leftovers holding the pipes open
        for key, _ in sel.select(timeout=0.05):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fd)
                continue
            room = cap - len(bufs[key.fd])
            if room > 0:
                bufs[key.fd] += chunk[:room]
            truncated = truncated or len(chunk) > room
    code = proc.wait()
    return ExecResult(
        exit_code=128 - code if code < 0 else code,
        stdout=bytes(bufs[proc.stdout.fileno()]).decode(errors="replace"),
        stderr=bytes(bufs[proc.stderr.fileno()]).decode(errors="replace"),
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
        oom_killed=False,  # rlimits make allocations fail (MemoryError) rather than OOM-kill
        output_truncated=truncated,
        isolated=False,
    )


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class LocalSession(SandboxSession):
    def __init__(self, sandbox: LocalSandbox, workdir: Path):
        self._sandbox, self.workdir = sandbox, workdir

    @property
    def timeout_cap(self) -> float:
        return self._sandbox.limits.timeout_s

    def execute(self, request: Request) -> ExecResult:
        return _execute(request, self.workdir, self._sandbox.limits, self._sandbox.env)


class LocalSandbox(Sandbox):
    """Subprocess + rlimits + temporary work dir. NOT isolated; refused unless `allow=True` or
    `ROOTSTEP_ALLOW_LOCAL_SANDBOX=1`. Every result has `isolated=False`, and creating one warns."""

    def __init__(self, limits: SandboxLimits | None = None, *, allow: bool = False, env: dict[str, str] | None = None):
        if not (allow or local_allowed()):
            raise SandboxUnavailableError(
                "the local sandbox is not isolated and is refused unless allowed explicitly: pass "
                f"allow_local=True (LocalSandbox(allow=True)) or set {ALLOW_ENV}=1"
            )
        self.limits = limits or SandboxLimits()
        if self.limits.network.kind != "none":
            warnings.warn("LocalSandbox cannot restrict the network: code reaches every host", NotIsolatedWarning,
                          stacklevel=2)
        self.env = check_env(env)
        warnings.warn(WARNING, NotIsolatedWarning, stacklevel=2)

    @property
    def timeout_cap(self) -> float:
        return self.limits.timeout_s

    def execute(self, request: Request) -> ExecResult:
        """`run`'s request in a fresh temporary directory, without isolation."""
        workdir = Path(tempfile.mkdtemp(prefix="rootstep-local-"))
        try:
            return _execute(request, workdir, self.limits, self.env)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    @contextmanager
    def session(self) -> Iterator[LocalSession]:
        workdir = Path(tempfile.mkdtemp(prefix="rootstep-local-"))
        try:
            yield LocalSession(self, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def close(self) -> None:
        pass

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        pass
