"""A command that SIGINT (Ctrl-C) and SIGTERM stop within seconds: `run_stoppable(run)`.

The signal becomes an exception in the main thread (SIGINT's `KeyboardInterrupt`; inside a flow Prefect
raises its own `TerminationSignal` for SIGTERM, outside one `run_stoppable`'s handler raises), which
stops the flow's session on its way out (`Session.stop`: no unit starts, every Docker sandbox of the
process is closed, so the running episodes' containers are removed and their units end). What was
stored stays stored: a unit's outcome is written whole or not at all (`_unit.signals_held`).

Prefect then records the crashed runs with its API. A terminal's Ctrl-C (or a service manager's
SIGTERM) reaches the whole process group, the ephemeral Prefect server included, and Prefect's client
retries a lost server for about a minute per call. So a deadline guards the exit: the wakeup fd of
Python's signal handling tells a watcher thread that a signal came, and a command still running
`GRACE_S` later, its interpreter's exit included, is ended there (its sandboxes closed again, the
message printed if it was not, the ephemeral server stopped, exit code 130). Nothing is written to the
warehouse after the signal's exception has left the unit loop, so ending the process then loses nothing
stored. The episodes end within a second or two of the signal; what takes longer is Prefect recording
the crashed runs, cut short here.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any, Callable

GRACE_S = 6.0
"""Seconds from a stopping signal to the forced exit (the issue's bound is 10 s)."""

STOPPED = ("stopped by {signal}: the running episodes were ended and their containers removed; what was stored "
           "stays stored. Run the same command again to resume (stored runs and annotations are skipped).")


class _Terminated(KeyboardInterrupt):
    """SIGTERM outside a flow, raised in the main thread like SIGINT's `KeyboardInterrupt`."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated()


SIGNAL_SEEN_S = 0.2
"""How long a command that failed waits for the watcher to say a stop signal came first (it reads the wakeup
pipe as soon as it holds the GIL)."""


def _stop_signal_in(exc: BaseException | None, depth: int = 0) -> BaseException | None:
    """The `KeyboardInterrupt` or Prefect `TerminationSignal` inside `exc`: itself, in an exception group, or
    in its cause or context chain."""
    from prefect.exceptions import TerminationSignal

    if exc is None or depth > 20:
        return None
    if isinstance(exc, (KeyboardInterrupt, TerminationSignal)):
        return exc
    for inner in getattr(exc, "exceptions", None) or ():
        found = _stop_signal_in(inner, depth + 1)
        if found is not None:
            return found
    return _stop_signal_in(exc.__cause__ or exc.__context__, depth + 1)


def _signal_name(exc: BaseException) -> str:
    return "SIGINT" if type(exc) is KeyboardInterrupt else "SIGTERM"


def _watch(read_fd: int, done: threading.Event, said: threading.Event, seen: threading.Event) -> None:
    """Wait for a SIGINT / SIGTERM byte on the wakeup pipe (then set `seen`); if the command still runs
    `GRACE_S` later, end the process (see the module docstring)."""
    stops = {signal.SIGINT, signal.SIGTERM}
    try:
        while True:
            data = os.read(read_fd, 64)
            if not data:  # the write end was closed: the command is done
                return
            signals = [s for s in data if s in stops]
            if signals:
                seen.set()
                break
        if done.wait(GRACE_S):
            return
    finally:
        os.close(read_fd)
    from rootstep.options import ExitCode
    from rootstep.sandboxes import close_all

    close_all()
    if not said.is_set():
        name = "SIGINT" if signals[0] == signal.SIGINT else "SIGTERM"
        sys.stderr.write(f"error: {STOPPED.format(signal=name)}\n")
        sys.stderr.flush()
    prefect_server = sys.modules.get("prefect.server.api.server")  # loaded when an ephemeral server was started
    if prefect_server is not None:
        process = prefect_server.SubprocessASGIServer().server_process
        if process is not None:
            process.terminate()
    os._exit(int(ExitCode.INTERRUPTED))


def run_stoppable(run: Callable[[], Any]) -> Any:
    """Run `run()` in the main thread so that SIGINT and SIGTERM stop it (module docstring): the command
    exits with `ExitCode.INTERRUPTED` (130) and says how to resume."""
    from prefect.exceptions import TerminationSignal

    from rootstep.options import ExitCode, fail

    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    done, said = threading.Event(), threading.Event()
    previous_term = signal.signal(signal.SIGTERM, _raise_terminated)
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    seen = threading.Event()
    threading.Thread(target=_watch, args=(read_fd, done, said, seen), name="rootstep-stop-deadline",
                     daemon=True).start()
    try:
        result = run()
    except (KeyboardInterrupt, TerminationSignal) as exc:
        said.set()  # the deadline stays armed through the interpreter's exit (Prefect's clean-up included)
        fail(STOPPED.format(signal=_signal_name(exc)), ExitCode.INTERRUPTED)
    except BaseException as exc:
        # A signal's exception can reach here as another one: wrapped in an exception group by a task group,
        # or replaced by what an engine raised while it unwound. It is still the stop, and the deadline must
        # stay armed: the interpreter's exit would wait on Prefect's threads, which retry a server that the
        # same Ctrl-C ended.
        stop = _stop_signal_in(exc)
        if stop is not None or seen.wait(SIGNAL_SEEN_S):
            said.set()
            fail(STOPPED.format(signal=_signal_name(stop) if stop is not None else "a signal"),
                 ExitCode.INTERRUPTED)
        done.set()
        raise
    else:
        done.set()
        return result
    finally:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGTERM, previous_term)
        os.close(write_fd)  # the watcher reads the end of the pipe and closes its side
