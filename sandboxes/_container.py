"""One sandbox container with the runner as PID 1, talked to through the attach socket.

Every container is created with the same hardening, whatever its use (warm pool, cold run, session):
no network interface but loopback, read-only root, tmpfs /work and /tmp, user 1000, all capabilities
dropped, no-new-privileges, CPU/memory(+swap)/pids/open-files limits, no log driver (output never
lands on the host's disk), an explicit minimal environment, and the owner labels the reaper reads.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any

from rootstep.sandboxes._api import ExecResult
from rootstep.sandboxes._cleanup import owner_labels
from rootstep.sandboxes._gateway import CONTAINER_DIR, SOCKET_NAME, GatewayRelay
from rootstep.sandboxes._images import RUNNER_PATH, SANDBOX_UID
from rootstep.sandboxes._limits import SandboxError, SandboxLimits
from rootstep.sandboxes._request import BASE_ENV, Request

START_TIMEOUT_S = 60.0
GRACE_S = 10.0  # how long past a run's timeout the host waits for the runner's answer


class _Frames:
    """Reads docker's multiplexed attach stream (8-byte header: stream, 0, 0, 0, big-endian size)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()
        self.stdout = bytearray()
        self.stderr = bytearray()

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(1 << 20)
        except socket.timeout as exc:
            raise TimeoutError from exc
        if not chunk:
            raise EOFError
        self.buf += chunk

    def line(self, deadline: float) -> bytes:
        """The next full line the runner wrote on stdout."""
        while True:
            nl = self.stdout.find(b"\n")
            if nl >= 0:
                line = bytes(self.stdout[: nl + 1])
                del self.stdout[: nl + 1]
                return line
            while len(self.buf) < 8:
                self._fill(deadline)
            kind, size = self.buf[0], struct.unpack(">I", bytes(self.buf[4:8]))[0]
            while len(self.buf) < 8 + size:
                self._fill(deadline)
            payload = bytes(self.buf[8 : 8 + size])
            del self.buf[: 8 + size]
            if kind == 2:
                self.stderr = (self.stderr + payload)[-8192:]
            else:
                self.stdout += payload


class Container:
    """A started sandbox container; `execute` sends one request and returns its result."""

    def __init__(
        self,
        client: Any,
        image: str,
        limits: SandboxLimits,
        *,
        role: str,
        env: dict[str, str],
        relay: GatewayRelay | None = None,
    ):
        from docker.types import LogConfig, Mount, Ulimit

        self.client, self.limits, self.env, self.uses = client, limits, env, 0
        self.name = f"rootstep-sbx-{uuid.uuid4().hex[:12]}"
        self._lock = threading.Lock()
        self._sock: Any = None
        self.closed = False
        mem = f"{limits.memory_mb}m"
        uid = SANDBOX_UID
        container_env = dict(BASE_ENV)
        mounts = []
        if relay is not None:
            mounts.append(Mount(target=CONTAINER_DIR, source=relay.directory, type="bind", read_only=True))
            container_env["ROOTSTEP_RELAY_PORT"] = str(limits.network.container_port)
            container_env["ROOTSTEP_RELAY_SOCKET"] = f"{CONTAINER_DIR}/{SOCKET_NAME}"
        self.container = client.containers.create(
            image,
            command=["python3", RUNNER_PATH],
            name=self.name,
            user=f"{uid}:{uid}",
            working_dir="/work",
            environment=container_env,
            network_mode="none",
            read_only=True,
            tmpfs={
                "/work": f"rw,exec,nosuid,nodev,size={limits.work_mb}m,uid={uid},gid={uid},mode=0700",
                "/tmp": f"rw,exec,nosuid,nodev,size={limits.tmp_mb}m,uid={uid},gid={uid},mode=0700",
            },
            mounts=mounts,
            mem_limit=mem,
            memswap_limit=mem,
            nano_cpus=int(limits.cpus * 1e9),
            pids_limit=limits.pids,
            ulimits=[Ulimit(name="nofile", soft=limits.nofile, hard=limits.nofile)],
            security_opt=["no-new-privileges"],
            cap_drop=["ALL"],
            ipc_mode="private",
            stdin_open=True,
            tty=False,
            log_config=LogConfig(type="none"),
            labels=owner_labels(role),
        )
        try:
            resp = client.api.attach_socket(
                self.container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            self._resp = resp  # keeps the HTTP response (and so the socket) alive
            self._sock = getattr(resp, "_sock", resp)
            self._frames = _Frames(self._sock)
            self.container.start()
            ready = self._frames.line(time.monotonic() + START_TIMEOUT_S)
            if b"ready" not in ready:
                raise SandboxError(f"sandbox runner did not start: {ready[:200]!r}")
        except BaseException as exc:
            detail = bytes(self._frames.stderr).decode(errors="replace")[-2000:] if self._sock else ""
            self.remove()
            if isinstance(exc, (EOFError, TimeoutError)):
                raise SandboxError(
                    f"sandbox container {self.name} (image {image}) did not start: {detail or type(exc).__name__}; "
                    f"the image must contain the rootstep runner at {RUNNER_PATH} (build it with build_image)"
                ) from exc
            raise

    @property
    def short_id(self) -> str:
        return self.container.id[:12]

    def execute(self, request: Request, *, clean: bool, extra_env: dict[str, str] | None = None) -> ExecResult:
        """Run one request. Raises SandboxError when the runner breaks; the container is then unusable."""
        with self._lock:
            if self.closed:
                raise SandboxError(f"sandbox container {self.name} was already removed")
            self.uses += 1
            env = dict(self.env, **(extra_env or {}))
            wire = request.wire(env=env, output_bytes=self.limits.output_bytes, clean=clean)
            payload = json.dumps(wire).encode() + b"\n"
            started = time.monotonic()
            deadline = started + request.timeout + GRACE_S + len(payload) / 20e6
            try:
                self._sock.settimeout(max(deadline - time.monotonic(), 1.0))
                self._sock.sendall(payload)
                line = self._frames.line(deadline)
            except TimeoutError:
                # The runner did not answer in time (it is stuck): the container goes, the run timed out.
                self.remove()
                return ExecResult(exit_code=137, stdout="", stderr="sandbox: runner unresponsive, container killed",
                                  duration_s=time.monotonic() - started, timed_out=True)
            except (EOFError, OSError) as exc:
                oom = self._oom_killed()
                detail = bytes(self._frames.stderr).decode(errors="replace")[-2000:]
                self.remove()
                if oom:
                    return ExecResult(exit_code=137, stdout="", stderr="sandbox: container killed by the OOM killer",
                                      duration_s=time.monotonic() - started, oom_killed=True)
                raise SandboxError(f"sandbox container {self.name} died during a run: {detail or exc}") from exc
        answer = json.loads(line)
        if answer.get("error") and "exit_code" not in answer:
            raise SandboxError(f"sandbox runner could not run the request: {answer['error']}")
        return _result(answer)

    def _oom_killed(self) -> bool:
        try:
            self.container.reload()
            return bool(self.container.attrs.get("State", {}).get("OOMKilled"))
        except Exception:
            return False

    def remove(self) -> None:
        """Remove the container (force); safe to call twice."""
        import docker.errors

        self.closed = True
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise


def _result(answer: dict) -> ExecResult:
    import base64

    code = int(answer["exit_code"])
    return ExecResult(
        exit_code=128 - code if code < 0 else code,  # killed by signal N -> 128+N, as shells report it
        stdout=base64.b64decode(answer["stdout"]).decode(errors="replace"),
        stderr=base64.b64decode(answer["stderr"]).decode(errors="replace"),
        duration_s=float(answer["duration_s"]),
        timed_out=bool(answer["timed_out"]),
        oom_killed=bool(answer["oom_killed"]),
        output_truncated=bool(answer["output_truncated"]),
        isolated=True,
    )


def remove_all(containers: Iterable[Container]) -> None:
    """Remove every container, going on past any that fails (closing down: what can be removed is)."""
    for container in containers:
        try:
            container.remove()
        except Exception:
            pass
