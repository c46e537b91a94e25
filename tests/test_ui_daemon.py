"""`rootstep ui --daemon`, `status`, `logs [-f]`, `stop` as real processes on a loopback port."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import httpx
import pytest

from ._ui_support import SHARED, free_port


def rootstep(*args: str, env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rootstep", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def running(pid: int) -> bool:
    """The process exists and is not a zombie (a daemon is reparented; its new parent may reap it late)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def setup(tmp_path):
    data = tmp_path / "data" / "Hand-Crafted"
    data.mkdir(parents=True)
    shutil.copy(SHARED / "Hand-Crafted" / "6.json", data / "6.json")
    env = {**os.environ, "ROOTSTEP_STATE": str(tmp_path / "state"), "ROOTSTEP_WAREHOUSE": str(tmp_path / "wh")}
    assert rootstep("import", "whowhen", str(data), env=env).returncode == 0
    return env, free_port(), tmp_path


def test_daemon_status_logs_stop(setup):
    env, port, tmp_path = setup
    started = rootstep("ui", "--daemon", "--port", str(port), env=env)
    assert started.returncode == 0, started.stderr
    assert f"http://127.0.0.1:{port}" in started.stdout and "pid" in started.stdout
    state = json.loads((tmp_path / "state" / "ui" / f"ui-{port}.json").read_text())
    pid = state["pid"]
    try:
        page = httpx.get(f"http://127.0.0.1:{port}/", timeout=30)
        assert page.status_code == 200 and "magentic-one" in page.text and "1\n  <span>" not in page.text

        status = rootstep("ui", "status", env=env)
        assert status.returncode == 0
        assert f"http://127.0.0.1:{port}" in status.stdout and str(pid) in status.stdout and "yes" in status.stdout

        again = rootstep("ui", "--port", str(port), env=env)  # a second launch on the busy port says so
        assert again.returncode == 1
        assert f"port {port} is busy: rootstep ui (pid {pid}" in " ".join(again.stderr.split())
        exposed = rootstep("ui", "--daemon", "--host", "0.0.0.0", "--port", str(port), env=env)
        err = " ".join(exposed.stderr.split())
        assert exposed.returncode == 1 and "warning: --host 0.0.0.0 serves the warehouse" in err and "is busy" in err

        logs = rootstep("ui", "logs", env=env)
        assert logs.returncode == 0 and '"GET / HTTP/1.1" 200' in logs.stdout

        follower = subprocess.Popen([sys.executable, "-m", "rootstep", "ui", "logs", "-f", "--port", str(port)], env=env,
                                    stdout=subprocess.PIPE, text=True)
        try:  # `logs -f` prints the log from its start: the request is shown whenever the follower starts
            httpx.get(f"http://127.0.0.1:{port}/sql?q=SELECT+42", timeout=30)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                line = follower.stdout.readline()
                if "GET /sql?q=SELECT+42" in line:
                    break
            else:
                pytest.fail("logs -f did not show the new request")
        finally:
            follower.terminate()
            follower.wait(timeout=10)

        stopped = rootstep("ui", "stop", env=env)
        assert stopped.returncode == 0 and f"stopped rootstep ui at http://127.0.0.1:{port} (pid {pid})" in stopped.stdout
    finally:
        if running(pid):  # the test failed before `stop`: do not leave the server behind
            os.kill(pid, 15)
    assert not running(pid)
    assert not (tmp_path / "state" / "ui" / f"ui-{port}.json").exists()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    none = rootstep("ui", "status", env=env)
    assert none.returncode == 1 and "no rootstep ui is running" in none.stdout
    assert "shutdown" in rootstep("ui", "logs", "-n", "0", env=env).stdout.lower()  # the log kept the graceful stop


def test_status_removes_a_stale_state_file_and_stop_says_when_nothing_runs(setup):
    env, port, tmp_path = setup
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = tmp_path / "state" / "ui"
    folder.mkdir(parents=True)
    stale = folder / f"ui-{port}.json"
    stale.write_text(json.dumps({"pid": dead.pid, "host": "127.0.0.1", "port": port, "warehouse": "x", "started": 0}))
    status = rootstep("ui", "status", env=env)
    assert status.returncode == 1 and not stale.exists()
    stop = rootstep("ui", "stop", env=env)
    assert stop.returncode == 1 and "no rootstep ui is running" in stop.stderr
