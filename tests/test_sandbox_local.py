"""Sandbox pieces that need no Docker daemon: the local fallback, argument checks, image specs, the CLI."""

from __future__ import annotations

import warnings

import pytest

from rootstep.sandboxes import (
    ExecResult,
    ImageSpec,
    LocalSandbox,
    NotIsolatedWarning,
    PoolConfig,
    Sandbox,
    SandboxLimits,
    SandboxNetwork,
    SandboxUnavailableError,
    get_sandbox,
)
from rootstep.sandboxes._request import make_request

UNREACHABLE_DOCKER = "unix:///nonexistent/rootstep-test-docker.sock"


@pytest.fixture
def no_local_env(monkeypatch):
    monkeypatch.delenv("ROOTSTEP_ALLOW_LOCAL_SANDBOX", raising=False)


@pytest.fixture
def local():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotIsolatedWarning)
        return LocalSandbox(SandboxLimits(timeout_s=5), allow=True)


# ----------------------------------------------------------------------------- refusal


def test_local_sandbox_is_refused_unless_allowed(no_local_env):
    with pytest.raises(SandboxUnavailableError, match="not isolated.*allow_local=True"):
        LocalSandbox()
    with pytest.raises(SandboxUnavailableError, match="ROOTSTEP_ALLOW_LOCAL_SANDBOX"):
        get_sandbox("local")


def test_local_sandbox_allowed_by_flag_or_env_warns_loudly(no_local_env, monkeypatch):
    with pytest.warns(NotIsolatedWarning, match="NOT isolated"):
        sandbox = get_sandbox("local", allow_local=True)
    assert isinstance(sandbox, LocalSandbox) and isinstance(sandbox, Sandbox)
    monkeypatch.setenv("ROOTSTEP_ALLOW_LOCAL_SANDBOX", "1")
    with pytest.warns(NotIsolatedWarning):
        assert isinstance(get_sandbox("local"), LocalSandbox)


def test_docker_unavailable_is_an_error_unless_local_allowed(no_local_env, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE_DOCKER)
    with pytest.raises(SandboxUnavailableError, match="Docker daemon is unreachable"):
        get_sandbox()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sandbox = get_sandbox(allow_local=True)
    messages = [str(w.message) for w in caught if issubclass(w.category, NotIsolatedWarning)]
    assert any("falling back to the local sandbox" in m for m in messages)
    assert isinstance(sandbox, LocalSandbox)
    assert sandbox.run(code="print('fallback')").isolated is False


def test_unknown_kind_is_rejected():
    with pytest.raises(ValueError, match="kind: expected 'docker' or 'local'"):
        get_sandbox("podman")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- local behaviour


def test_local_runs_code_commands_files_and_stdin(local):
    r = local.run(code="import sys; print(sys.stdin.read()[::-1])", stdin="abc")
    assert r.ok and r.stdout == "cba\n" and r.isolated is False
    r = local.run("cat d/x.txt && python3 y.py", files={"d/x.txt": "X\n", "y.py": "print('Y')"})
    assert r.stdout == "X\nY\n"
    assert local.run(["no-such-program-rootstep"]).exit_code == 127


def test_local_environment_is_minimal(local, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-secret")
    r = local.run(code="import os; print(sorted(os.environ))")
    assert "OPENAI_API_KEY" not in r.stdout and "sk-local-secret" not in r.stdout


def test_local_timeout_kills_the_process_group(local):
    r = local.run("sleep 30 & sleep 30", timeout=1)
    assert r.timed_out and r.exit_code == 137 and r.duration_s < 5


def test_local_memory_rlimit(local):
    r = local.run(code="b = bytearray(2 * 1024**3)")
    assert not r.ok and "MemoryError" in r.stderr


def test_local_output_cap():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotIsolatedWarning)
        sandbox = LocalSandbox(SandboxLimits(output_bytes=2048), allow=True)
    r = sandbox.run(code="print('y' * 100000)")
    assert r.output_truncated and len(r.stdout) == 2048


def test_local_session_keeps_files(local):
    with local.session() as s:
        s.run(code="open('n.txt', 'w').write('1')")
        assert s.run("cat n.txt").stdout == "1"
    assert local.run("ls").stdout == ""


# ----------------------------------------------------------------------------- argument checks


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(command=None, code=None), "command: pass a command"),
        (dict(command="ls", code="print(1)"), "command and code: pass one"),
        (dict(command="  ", code=None), "command: empty string"),
        (dict(command=[], code=None), "command: expected a non-empty list"),
        (dict(command=42, code=None), "command: expected str or list"),
        (dict(command=None, code="print(1)", timeout=0), "timeout: expected a positive number"),
        (dict(command=None, code="print(1)", timeout=float("nan")), "timeout: expected a positive number"),
        (dict(command=None, code="x" * 200_000), "code: 200000 bytes is over"),
        (dict(command="ls", code=None, files={"/etc/passwd": "x"}), r"files\['/etc/passwd'\]: must be a relative"),
        (dict(command="ls", code=None, files={"a/../../x": "x"}), "must be a relative path"),
        (dict(command="ls", code=None, files={"a.txt": 3}), "content must be str or bytes"),
        (dict(command="ls", code=None, stdin=3), "stdin: expected str"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, message):
    args = dict(files=None, stdin=None, timeout=10.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        make_request(args.pop("command"), args.pop("code"), args.pop("files"), args.pop("stdin"), args.pop("timeout"),
                     max_timeout=10)


def test_timeout_is_capped_at_the_limit():
    assert make_request("ls", None, None, None, 100, max_timeout=7).timeout == 7


def test_limits_and_network_validation():
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=1)
    with pytest.raises(ValueError, match="host_port is required"):
        SandboxNetwork(kind="gateway")
    net = SandboxNetwork.gateway_only(4000)
    assert net.kind == "gateway" and net.host == "127.0.0.1" and net.host_port == 4000
    assert SandboxLimits().network.kind == "none"


def test_pool_size_from_env(monkeypatch):
    monkeypatch.setenv("ROOTSTEP_SANDBOX_POOL_SIZE", "5")
    assert PoolConfig.from_env().size == 5
    monkeypatch.setenv("ROOTSTEP_SANDBOX_POOL_SIZE", "many")
    with pytest.raises(ValueError, match="ROOTSTEP_SANDBOX_POOL_SIZE"):
        PoolConfig.from_env()


def test_exec_result_ok():
    assert ExecResult(exit_code=0, stdout="", stderr="", duration_s=0.1).ok
    assert not ExecResult(exit_code=0, stdout="", stderr="", duration_s=0.1, timed_out=True).ok


# ----------------------------------------------------------------------------- image specs and CLI


def test_image_tags_are_hashes_of_their_inputs():
    a = ImageSpec(name="demo", requirements=("pytest==9.2.0", "pluggy==1.7.0"))
    b = ImageSpec(name="demo", requirements=("pluggy==1.7.0", "pytest==9.2.0"))
    c = ImageSpec(name="demo", requirements=("pytest==9.1.0", "pluggy==1.7.0"))
    assert a.tag() == b.tag() != c.tag()
    assert a.tag().startswith("rootstep-demo:") and len(a.tag().split(":")[1]) == 16
    assert "pip install --no-index" in a.dockerfile() and a.dockerfile().startswith(f"FROM {a.base.tag()}")


def test_image_specs_require_pins_and_good_names():
    with pytest.raises(ValueError, match="not pinned"):
        ImageSpec(name="demo", requirements=("pytest>=8",))
    with pytest.raises(ValueError, match="name"):
        ImageSpec(name="Bad Name")


def test_cli_has_the_sandbox_commands():
    from typer.testing import CliRunner

    from rootstep.cli import app

    result = CliRunner().invoke(app, ["sandbox", "--help"])
    assert result.exit_code == 0
    for command in ("build", "doctor", "reap"):
        assert command in result.output


def test_cli_build_skips_without_docker(monkeypatch):
    from typer.testing import CliRunner

    from rootstep.sandboxes.cli import app

    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE_DOCKER)
    result = CliRunner().invoke(app, ["build", "--skip-if-no-docker"])
    assert result.exit_code == 0
    result = CliRunner().invoke(app, ["build"])
    assert result.exit_code == 2


def test_a_wheel_folder_is_filled_once_and_only_a_complete_one_is_reused(tmp_path, monkeypatch):
    """`cached_wheels` (the environment images' and the framework images' wheels): filled once per key; a fill
    that fails (a download cut off) leaves the folder incomplete, and the next build fills it again."""
    import threading

    from rootstep.sandboxes import cached_wheels

    monkeypatch.setenv("ROOTSTEP_CACHE", str(tmp_path))
    steps: list[str] = []

    class Report:
        def step(self, text: str) -> None:
            steps.append(text)

    filled: list[str] = []

    def cut_off(dest) -> None:
        (dest / "half.whl").write_text("half")
        raise OSError("connection reset")

    with pytest.raises(OSError, match="connection reset"):
        cached_wheels("k1", "ag2", cut_off, Report())
    assert not (tmp_path / "sandbox" / "wheels" / "k1" / ".complete").exists()

    def fill(dest) -> None:
        filled.append(threading.current_thread().name)
        (dest / "a-1.0-py3-none-any.whl").write_text("wheel")

    threads = [threading.Thread(target=cached_wheels, args=("k1", "ag2", fill, Report()), name=f"t{i}") for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(filled) == 1  # three builds at once: one download, the others wait and reuse it
    assert sum("are cached" in s for s in steps) == 2
    dest = cached_wheels("k2", "smolagents", fill, Report())
    assert dest.name == "k2" and len(filled) == 2 and (dest / ".complete").exists()
