"""The Docker sandbox against the real daemon: every limit is proven by running code that breaks it."""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from rootstep.sandboxes import SandboxLimits, SandboxNetwork

pytestmark = pytest.mark.docker


def _host_pids() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


@pytest.fixture(scope="module")
def client():
    from rootstep.sandboxes import SandboxUnavailableError
    from rootstep.sandboxes._docker import docker_client

    try:
        return docker_client()
    except SandboxUnavailableError as exc:
        pytest.skip(f"Docker sandbox unavailable: {exc}")


def _sandbox(**kwargs):
    """A fresh DockerSandbox, or skip with the reason (daemon unreachable, image not built)."""
    from rootstep.sandboxes import SandboxUnavailableError
    from rootstep.sandboxes._docker import DockerSandbox

    try:
        return DockerSandbox(**kwargs)
    except SandboxUnavailableError as exc:
        pytest.skip(f"Docker sandbox unavailable: {exc}")


# ----------------------------------------------------------------------------- basics


def test_code_command_stdin_and_files(docker_sandbox):
    r = docker_sandbox.run(code="import sys; print(sys.stdin.read().upper())", stdin="hello")
    assert r.ok and r.stdout == "HELLO\n" and r.isolated
    r = docker_sandbox.run("cat sub/a.txt; python3 b.py", files={"sub/a.txt": "A\n", "b.py": b"print('B')"})
    assert r.stdout == "A\nB\n"
    r = docker_sandbox.run(["python3", "-c", "import sys; sys.exit(3)"])
    assert r.exit_code == 3 and not r.ok
    r = docker_sandbox.run(["no-such-program"])
    assert r.exit_code == 127 and "no-such-program" in r.stderr


def test_pytest_from_the_pinned_wheels_is_installed(docker_sandbox):
    test = "from solution import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    r = docker_sandbox.run(
        ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        files={"solution.py": "def add(a, b):\n    return a + b\n", "test_solution.py": test},
        timeout=20,
    )
    assert r.ok, r.stdout + r.stderr
    assert "1 passed" in r.stdout


def test_container_hardening_is_applied(docker_sandbox, client):
    r = docker_sandbox.run("id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")
    assert r.stdout.split() == ["1000", "CapEff:", "0000000000000000", "NoNewPrivs:", "1"]
    name = docker_sandbox.pool.acquire()
    try:
        host = client.api.inspect_container(name.container.id)["HostConfig"]
    finally:
        docker_sandbox.pool.release(name, healthy=True)
    limits = docker_sandbox.limits
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"]
    assert host["Memory"] == limits.memory_mb * 2**20 == host["MemorySwap"]
    assert host["PidsLimit"] == limits.pids and host["NanoCpus"] == int(limits.cpus * 1e9)
    assert set(host["Tmpfs"]) == {"/work", "/tmp"} and host["LogConfig"]["Type"] == "none"


# ----------------------------------------------------------------------------- isolation


def test_socket_connect_fails(docker_sandbox):
    code = textwrap.dedent("""
        import socket
        for host, port in [("1.1.1.1", 80), ("172.17.0.1", 2375), ("deb.debian.org", 80)]:
            try:
                socket.create_connection((host, port), timeout=2)
                print("CONNECTED", host)
            except OSError as exc:
                print("blocked", host, type(exc).__name__)
        import os; print(sorted(os.listdir("/sys/class/net")))
    """)
    r = docker_sandbox.run(code=code)
    assert r.ok, r.stderr
    assert "CONNECTED" not in r.stdout and r.stdout.count("blocked") == 3
    assert r.stdout.strip().endswith("['lo']")  # no network interface but loopback


def test_writing_outside_the_work_dir_fails(docker_sandbox):
    code = textwrap.dedent("""
        import os
        for path in ["/etc/passwd", "/usr/lib/python3.11/os.py", "/x", "/opt/rootstep/runner.py", "/var/tmp/x"]:
            try:
                with open(path, "a") as fh:
                    fh.write("pwned")
                print("WROTE", path)
            except OSError as exc:
                print("refused", path, exc.strerror)
        open("/work/ok.txt", "w").write("fine"); open("/tmp/ok.txt", "w").write("fine")
        print("work ok")
    """)
    r = docker_sandbox.run(code=code)
    assert r.ok, r.stderr
    assert "WROTE" not in r.stdout and r.stdout.count("refused") == 5 and "work ok" in r.stdout


def test_host_secrets_are_absent_inside(monkeypatch):
    secret = "sk-rootstep-test-secret-1234567890"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("ROOTSTEP_TEST_TOKEN", secret)
    sandbox = _sandbox(pool=0)  # containers created while the secret is in our environment
    with sandbox:
        r = sandbox.run("env; cat /proc/1/environ 2>&1; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'")
    assert secret not in r.stdout + r.stderr
    assert "OPENAI_API_KEY" not in r.stdout
    assert "HOME=/work" in r.stdout


# ----------------------------------------------------------------------------- limits


def test_infinite_loop_is_stopped(docker_sandbox):
    start = time.monotonic()
    r = docker_sandbox.run(code="while True: pass", timeout=2)
    assert r.timed_out and not r.ok and r.exit_code == 137
    assert 1.9 <= r.duration_s < 4 and time.monotonic() - start < 8
    assert docker_sandbox.run(code="print('next')").stdout == "next\n"


def _rss_kb() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS"))


def test_memory_hog_is_oom_killed(docker_sandbox):
    before = _rss_kb()
    r = docker_sandbox.run(code="b = bytearray()\nwhile True:\n    b += b'x' * 10**7", timeout=20)
    assert r.oom_killed and not r.timed_out and not r.ok
    # the host is fine: the memory went into the container, not this process (which, late in a full
    # suite, already holds every framework's libraries), and the sandbox keeps working
    assert _rss_kb() - before < 100_000
    assert docker_sandbox.run(code="print(1)").stdout == "1\n"


def test_fork_bomb_is_contained(docker_sandbox):
    before = _host_pids()
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    r = docker_sandbox.run(code=code, timeout=3)
    assert r.timed_out and not r.ok
    assert _host_pids() - before < 20  # the bomb's processes are gone, none reached the host
    r = docker_sandbox.run(code="import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))")
    assert int(r.stdout) <= 3  # the runner and this process


def test_pids_limit_refuses_forks(docker_sandbox):
    code = textwrap.dedent("""
        import os, time
        n = 0
        try:
            for _ in range(1000):
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                n += 1
        except OSError as exc:
            print("refused after", n, exc.strerror)
    """)
    r = docker_sandbox.run(code=code, timeout=10)
    assert "refused after" in r.stdout
    assert int(r.stdout.split()[2]) < docker_sandbox.limits.pids


def test_output_is_capped():
    sandbox = _sandbox(limits=SandboxLimits(output_bytes=10_000), pool=0)
    with sandbox:
        r = sandbox.run(code="import sys\nsys.stdout.write('x' * 5_000_000)\nprint('done', file=sys.stderr)")
    assert r.ok and r.output_truncated and len(r.stdout) == 10_000 and r.stderr == "done\n"


def test_timeout_is_capped_by_the_limit():
    sandbox = _sandbox(limits=SandboxLimits(timeout_s=1), pool=0)
    with sandbox:
        r = sandbox.run("sleep 30", timeout=60)
    assert r.timed_out and r.duration_s < 3


# ----------------------------------------------------------------------------- pool and sessions


def test_pool_reuses_containers_and_cleans_between_uses(docker_sandbox):
    docker_sandbox.warm()
    started = docker_sandbox.pool.stats["started"]
    reused = docker_sandbox.pool.stats["reused"]
    dirty = docker_sandbox.run("hostname; echo secret > left.txt; echo t > /tmp/t; (sleep 300 &); ls")
    assert dirty.stdout.split()[1] == "left.txt"
    seen = {dirty.stdout.split()[0]}
    probe = textwrap.dedent("""
        import os, socket
        others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
        print(socket.gethostname(), os.listdir("/work"), os.listdir("/tmp"), len(others))
    """)
    for _ in range(4):
        host, rest = docker_sandbox.run(code=probe).stdout.split(" ", 1)
        seen.add(host)
        assert rest.strip() == "[] [] 0"  # no files, no leftover processes from the dirty run
    assert docker_sandbox.pool.stats["started"] == started  # no new container for these runs
    assert docker_sandbox.pool.stats["reused"] == reused + 5
    assert len(seen) <= docker_sandbox.pool.config.size


def test_session_keeps_files_and_is_removed_after(client):
    import docker

    sandbox = _sandbox(pool=0)
    with sandbox:
        with sandbox.session() as s:
            name = s.container_name
            assert s.run(code="open('state.txt', 'w').write('step 1')").ok
            r = s.run("cat state.txt; echo ' + step 2' >> state.txt; cat state.txt")
            assert r.stdout == "step 1step 1 + step 2\n"
            assert s.run(code="while True: pass", timeout=1).timed_out
            assert s.run("cat state.txt").stdout == "step 1 + step 2\n"  # a timeout keeps the files
            with sandbox.session() as other:
                assert other.run("ls").stdout == ""  # sessions do not share files
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(name)


def test_crashed_owner_containers_are_reaped(client):
    from rootstep.sandboxes._cleanup import reap

    script = textwrap.dedent("""
        import os, sys, signal
        from rootstep.sandboxes._docker import DockerSandbox
        from rootstep.sandboxes import SandboxUnavailableError
        try:
            s = DockerSandbox(pool=2)
        except SandboxUnavailableError as exc:
            print("UNAVAILABLE", exc, flush=True); sys.exit(0)
        s.warm()
        print(os.getpid(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no finally, no atexit: a crash
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    if proc.stdout.startswith("UNAVAILABLE"):
        pytest.skip(proc.stdout)
    pid = proc.stdout.split()[0]
    owned = client.containers.list(all=True, filters={"label": f"rootstep.sandbox.owner_pid={pid}"})
    assert len(owned) == 2
    # the runners saw their stdin close and exited, so nothing keeps running meanwhile
    deadline = time.monotonic() + 60  # a bound for a slow machine; the loop ends when all have exited
    while time.monotonic() < deadline:
        states = {c.id: client.containers.get(c.id).status for c in owned}
        if all(s == "exited" for s in states.values()):
            break
        time.sleep(0.2)
    assert all(s == "exited" for s in states.values()), states
    report = reap(client)
    assert {c.name for c in owned} <= set(report.containers)
    assert client.containers.list(all=True, filters={"label": f"rootstep.sandbox.owner_pid={pid}"}) == []


def test_live_owner_containers_are_not_reaped(docker_sandbox, client):
    from rootstep.sandboxes._cleanup import reap

    docker_sandbox.warm()
    ids = set(docker_sandbox.pool.idle_ids())
    reap(client)
    assert ids <= set(docker_sandbox.pool.idle_ids())
    assert docker_sandbox.run(code="print('still here')").ok


def test_reap_ignores_a_container_removed_by_its_owner_meanwhile(docker_sandbox, client, monkeypatch):
    """Several processes share one daemon: a container listed by one process's reaper may be removed by
    its owner before the reaper looks it up (the SDK's per-container GET then 404s). Replayed here
    deterministically: the listing is the daemon's real answer from before the removal."""
    from rootstep.sandboxes._cleanup import LABEL, owner_labels, reap

    gone = client.containers.create(docker_sandbox.image, command=["true"], labels=owner_labels("test"))
    stale = client.api.containers(all=True, filters={"label": f"{LABEL}=1"})
    assert any(c["Id"] == gone.id for c in stale)
    gone.remove(force=True)
    monkeypatch.setattr(client.api, "containers", lambda *a, **k: stale)
    reap(client)  # no NotFound


# ----------------------------------------------------------------------------- gateway-only network


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's naming
        body = b"gateway says hi"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_gateway_only_network_reaches_the_gateway_and_nothing_else():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    other = http.server.ThreadingHTTPServer(("0.0.0.0", 0), _Hello)  # a host service that must stay hidden
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        limits = SandboxLimits(network=SandboxNetwork.gateway_only(server.server_address[1]))
        sandbox = _sandbox(limits=limits)
        code = textwrap.dedent(f"""
            import os, socket, urllib.request
            url = os.environ["ROOTSTEP_GATEWAY_URL"]
            print(urllib.request.urlopen(url + "/v1/models", timeout=5).read().decode())
            for host, port in [("1.1.1.1", 80), ("172.17.0.1", {other.server_address[1]}),
                               ("192.0.2.2", {other.server_address[1]}), ("127.0.0.1", {other.server_address[1]}),
                               ("deb.debian.org", 80)]:
                try:
                    socket.create_connection((host, port), timeout=2)
                    print("CONNECTED", host, port)
                except OSError as exc:
                    print("blocked", host)
        """)
        with sandbox, sandbox.session() as s:
            r = s.run(code=code, timeout=30)
    finally:
        server.shutdown()
        other.shutdown()
    assert r.ok, r.stderr
    assert r.stdout.startswith("gateway says hi\n")
    assert "CONNECTED" not in r.stdout and r.stdout.count("blocked") == 5


def test_rebuild_is_a_no_op_when_inputs_are_unchanged(client):
    from rootstep.sandboxes import ENVIRONMENTS, build_image
    from rootstep.sandboxes._images import image_exists

    spec = ENVIRONMENTS["default"]
    if not image_exists(client, spec.tag()):
        pytest.skip("the default sandbox image is not built (`rootstep sandbox build`)")
    start = time.monotonic()
    assert build_image(client, spec) == spec.tag()
    assert time.monotonic() - start < 2


def test_doctor_reports_a_working_setup(client):
    from typer.testing import CliRunner

    from rootstep.sandboxes import ENVIRONMENTS
    from rootstep.sandboxes._images import image_exists
    from rootstep.sandboxes.cli import app

    if not image_exists(client, ENVIRONMENTS["default"].tag()):
        pytest.skip("the default sandbox image is not built (`rootstep sandbox build`)")
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    assert "smoke run" in result.output and "missing" not in result.output
