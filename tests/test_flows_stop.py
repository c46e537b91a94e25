"""Stopping a real `rootstep pipeline` (a subprocess, AG2 in Docker, a scripted team through the gateway
that keeps its episode going): SIGTERM, and SIGINT sent as a terminal's Ctrl-C sends it (to the whole
process group), end it within 10 s with exit code 130, leave no container of the run, keep what was
stored, and a re-run resumes (it skips the stored run)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rootstep.options import ExitCode
from rootstep.warehouse import Warehouse

from . import _stop_support as S
from ._adapter_support import require_framework_image

ROOT = Path(__file__).resolve().parent.parent
STOP_WITHIN_S = 10.0


def _as_from_a_terminal() -> None:
    """In the child before it starts: SIGINT back to its default, so that Python installs its Ctrl-C handler.
    A test run started as a background job of a non-interactive shell (`cmd &`) ignores SIGINT, and an
    ignored signal stays ignored in every child: a SIGINT test would then test nothing a user does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _pipeline(wh: str, tasks: int) -> list[str]:
    return [sys.executable, "-m", "rootstep", "pipeline", "-f", "ag2", "-b", f"gsm8k:{tasks}", "-m", S.MODEL,
            "--no-counterfactual", "--no-inject", "--worker-setup", "tests._stop_support:register",
            "--per-model", "1", "--sandboxes", "1", "--warehouse", wh]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ROOTSTEP_STOP_TEST_"))}
    prefect_home = tmp_path / "prefect"
    prefect_home.mkdir(exist_ok=True)
    return {**env, "PREFECT_HOME": str(prefect_home), "PYTHONPATH": str(ROOT),
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180", **extra}  # a loaded machine starts it slowly


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)


def _containers_of(pid: int) -> list[str]:
    from rootstep.sandboxes import docker_client

    return [c.name for c in docker_client().containers.list(
        all=True, filters={"label": f"rootstep.sandbox.owner_pid={pid}"}, ignore_removed=True)]


_HANGS_AFTER_THE_SIGNAL = """
import sys, time
from rootstep._stop import run_stoppable

def hang():
    try:
        print("running", flush=True)
        time.sleep(60)
    except KeyboardInterrupt:  # what a clean-up that waits on a lost server looks like
        time.sleep(60)

run_stoppable(hang)
"""


def test_a_stop_that_hangs_is_ended_at_the_deadline(tmp_path):
    """When the clean-up after the signal does not finish (Prefect retrying a lost server), the command
    is ended `GRACE_S` after the signal, with the message and exit code 130."""
    from rootstep._stop import GRACE_S

    proc = subprocess.Popen([sys.executable, "-c", _HANGS_AFTER_THE_SIGNAL], cwd=ROOT, preexec_fn=_as_from_a_terminal,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "running"
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert GRACE_S <= took <= STOP_WITHIN_S and proc.returncode == ExitCode.INTERRUPTED, (took, err)
    assert err.count("stopped by SIGTERM") == 1 and "Run the same command again to resume" in err, err


_WRAPPED_AFTER_THE_SIGNAL = """
import sys, time
import typer
from rootstep._stop import run_stoppable

def wrapped():
    try:
        print("running", flush=True)
        time.sleep(60)
    except KeyboardInterrupt as exc:  # a task group re-raising the signal's exception in a group
        raise BaseExceptionGroup("unhandled errors in a TaskGroup", [exc])

try:
    run_stoppable(wrapped)
except typer.Exit as done:  # what the command line does with it
    sys.exit(done.exit_code)
"""


def test_a_signal_whose_exception_comes_back_wrapped_is_still_the_stop(tmp_path):
    """A stop signal's exception that reaches the command inside an exception group (or replaced by another
    one while Prefect unwinds) is still the stop: the message, exit code 130, not a traceback."""
    proc = subprocess.Popen([sys.executable, "-c", _WRAPPED_AFTER_THE_SIGNAL], cwd=ROOT, preexec_fn=_as_from_a_terminal,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "running"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED, err
    assert err.count("stopped by SIGINT") == 1 and "Traceback" not in err, err


def test_the_stop_is_found_inside_groups_and_chains():
    from prefect.exceptions import TerminationSignal

    from rootstep._stop import _stop_signal_in

    interrupt = KeyboardInterrupt()
    assert _stop_signal_in(BaseExceptionGroup("g", [ValueError(), BaseExceptionGroup("h", [interrupt])])) is interrupt
    try:
        try:
            raise TerminationSignal(signal.SIGTERM)
        except TerminationSignal as signalled:
            raise RuntimeError("the engine gave up") from signalled
    except RuntimeError as replaced:
        assert isinstance(_stop_signal_in(replaced), TerminationSignal)
    assert _stop_signal_in(RuntimeError("no signal here")) is None


@pytest.fixture(scope="module")
def one_run_stored(tmp_path_factory, docker_sandbox) -> Path:
    """A warehouse where a first pipeline stored one run; each test stops a second pipeline in its own copy (the
    first pipeline is the same for both signals: run once, about 30 s of CI)."""
    require_framework_image("ag2")
    home = tmp_path_factory.mktemp("stop-first")
    wh = home / "wh"
    first = _run(_pipeline(str(wh), 1), _env(home))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "collected 1 runs (1 new" in first.stdout
    return wh


@pytest.mark.docker
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT to the process group"])
def test_a_stopped_pipeline_ends_its_episodes_and_resumes(tmp_path, one_run_stored, how):
    wh = str(tmp_path / "wh")
    shutil.copytree(one_run_stored, wh)

    mark, out_file, err_file = tmp_path / "episode-running", tmp_path / "out.txt", tmp_path / "err.txt"
    with out_file.open("w") as stdout, err_file.open("w") as stderr:  # files: a full pipe would block it
        looping = subprocess.Popen(_pipeline(wh, 2), env=_env(tmp_path, ROOTSTEP_STOP_TEST_LOOP="1",
                                                              ROOTSTEP_STOP_TEST_MARK=str(mark)),
                                   cwd=ROOT, stdout=stdout, stderr=stderr, start_new_session=True,
                                   preexec_fn=_as_from_a_terminal)
    try:
        deadline = time.monotonic() + 300
        while not mark.exists():
            assert looping.poll() is None, err_file.read_text()
            assert time.monotonic() < deadline, "the looping episode never started"
            time.sleep(0.5)
        time.sleep(3 * S.PAUSE_S)  # a few turns into the episode
        assert _containers_of(looping.pid), "the episode's container should be running"
        sent = time.monotonic()
        if how == "SIGTERM":
            looping.send_signal(signal.SIGTERM)
        else:
            os.killpg(looping.pid, signal.SIGINT)
        looping.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if looping.poll() is None:
            os.killpg(looping.pid, signal.SIGKILL)
            looping.wait()
    out, err = out_file.read_text(), err_file.read_text()
    print(f"{how}: stopped after {took:.1f} s")
    assert took <= STOP_WITHIN_S, f"stopped after {took:.1f} s\n{out}\n{err}"
    assert looping.returncode == ExitCode.INTERRUPTED, out + err
    name = "SIGTERM" if how == "SIGTERM" else "SIGINT"
    assert f"stopped by {name}" in err and "Run the same command again to resume" in err, err
    assert _containers_of(looping.pid) == []

    store = Warehouse(wh)  # readable, and holds what the first pipeline stored, nothing half-done
    assert store.rows("SELECT count(*) AS n FROM runs")[0]["n"] == 1
    assert store.rows("SELECT count(*) AS n FROM raw_runs")[0]["n"] == 1

    again = _run(_pipeline(wh, 2), _env(tmp_path))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "collected 2 runs (1 new, 1 already stored, 0 errors)" in again.stdout
    assert Warehouse(wh).rows("SELECT count(*) AS n FROM runs")[0]["n"] == 2
