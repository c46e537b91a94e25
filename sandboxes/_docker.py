"""The Docker sandbox: short runs through the warm pool, episodes in a container of their own."""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rootstep.sandboxes._api import ExecResult, Sandbox, SandboxSession
from rootstep.sandboxes._cleanup import reap
from rootstep.sandboxes._container import Container, remove_all
from rootstep.sandboxes._gateway import GatewayRelay
from rootstep.sandboxes._images import ensure_image
from rootstep.sandboxes._limits import PoolConfig, SandboxError, SandboxLimits, SandboxUnavailableError
from rootstep.sandboxes._request import Request, check_env


def docker_client() -> Any:
    """A client of the local Docker daemon, or SandboxUnavailableError saying how to get one."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a dependency
        raise SandboxUnavailableError("the `docker` Python package is missing: run scripts/bootstrap.sh") from exc
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:
        raise SandboxUnavailableError(
            f"the Docker daemon is unreachable ({type(exc).__name__}: {exc}); start it (systemctl start docker) "
            "or set DOCKER_HOST, and check that this user may use the socket (group `docker`)"
        ) from exc
    return client


class DockerSession(SandboxSession):
    """One container kept for a multi-step episode: files written by one run are there for the next;
    processes are killed after each run."""

    def __init__(self, sandbox: DockerSandbox, container: Container):
        self._sandbox, self._container = sandbox, container

    @property
    def container_name(self) -> str:
        return self._container.name

    @property
    def timeout_cap(self) -> float:
        return self._sandbox.limits.timeout_s

    def execute(self, request: Request) -> ExecResult:
        if self._container.closed:
            raise SandboxError("this sandbox session's container is gone (it was killed after a stuck run)")
        return self._container.execute(request, clean=False)


class DockerSandbox(Sandbox):
    """Runs code in hardened Docker containers built from the rootstep images.

    Args:
        image: image tag; default the `default` environment (`rootstep sandbox build` makes it).
        limits: hard limits and the network policy; default `SandboxLimits()` (no network).
        pool: warm pool size or config; default `PoolConfig.from_env()` (2, or
            `ROOTSTEP_SANDBOX_POOL_SIZE`). Only sandboxes without network use the pool; 0 turns it off.
        env: extra environment variables for code in the sandbox. Nothing else of the host's
            environment is passed in.
        client: a docker client (default: from the environment, checked with a ping).

    `run` uses a warm container when there is a pool and a fresh one otherwise (`pool=0`: always a fresh one); `session()` gives an
    episode its own container. Create it once and reuse it; `close()` (or `with`) removes containers.
    """

    def __init__(
        self,
        image: str | None = None,
        limits: SandboxLimits | None = None,
        *,
        pool: PoolConfig | int | None = None,
        env: dict[str, str] | None = None,
        client: Any = None,
    ):
        if limits is not None and not isinstance(limits, SandboxLimits):
            raise ValueError(f"limits: expected SandboxLimits, got {type(limits).__name__}")
        self.limits = limits or SandboxLimits()
        if isinstance(pool, int) and not isinstance(pool, bool):
            pool = PoolConfig(size=pool)
        elif pool is not None and not isinstance(pool, PoolConfig):
            raise ValueError(f"pool: expected PoolConfig or int, got {type(pool).__name__}")
        self.client = client or docker_client()
        self.image = ensure_image(self.client, image)
        reap(self.client)  # containers left by owners that crashed
        self._env = check_env(env)
        self._relay: GatewayRelay | None = None
        network = self.limits.network
        if network.kind == "gateway":
            assert network.host_port is not None
            self._relay = GatewayRelay(network.host, network.host_port)
            self._env["ROOTSTEP_GATEWAY_URL"] = f"http://127.0.0.1:{network.container_port}"
        config = pool if pool is not None else PoolConfig.from_env()
        self.pool = None
        if config.size > 0 and network.kind == "none":
            from rootstep.sandboxes._pool import WarmPool

            self.pool = WarmPool(lambda: self._new_container("pool"), config)
        self._sessions: set[Container] = set()
        self._lock = threading.Lock()
        self._closed = False
        _live.add(self)

    def _new_container(self, role: str) -> Container:
        return Container(self.client, self.image, self.limits, role=role, env=self._env, relay=self._relay)

    def warm(self) -> None:
        """Start the pool's containers now rather than on first use."""
        if self.pool is not None:
            self.pool.fill()

    @property
    def timeout_cap(self) -> float:
        return self.limits.timeout_s

    def execute(self, request: Request) -> ExecResult:
        """`run`'s request in a warm container of the pool (cleaned after the run), else in a fresh one."""
        self._check_open()
        if self.pool is None:
            return self._run_cold(request)
        container = self.pool.acquire()
        healthy = False
        try:
            result = container.execute(request, clean=True)
            healthy = not container.closed
            return result
        finally:
            self.pool.release(container, healthy=healthy)

    def _run_cold(self, request: Request) -> ExecResult:
        container = self._new_container("cold")
        try:
            return container.execute(request, clean=False)
        finally:
            container.remove()

    @contextmanager
    def session(self) -> Iterator[DockerSession]:
        """A container of its own for a multi-step episode, removed when the block ends."""
        self._check_open()
        container = self._new_container("session")
        with self._lock:
            self._sessions.add(container)
        try:
            yield DockerSession(self, container)
        finally:
            with self._lock:
                self._sessions.discard(container)
            container.remove()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("this DockerSandbox was closed")

    def close(self) -> None:
        """Remove the pool's and open sessions' containers and stop the gateway relay."""
        if self._closed:
            return
        self._closed = True
        if self.pool is not None:
            self.pool.close()
        with self._lock:
            sessions, self._sessions = list(self._sessions), set()
        remove_all(sessions)
        if self._relay is not None:
            self._relay.close()

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_live: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()


@atexit.register
def close_all() -> None:
    """Close every Docker sandbox of this process: their pool and session containers are removed (an
    episode waiting on one ends at once) and a closed sandbox starts none. At exit, and when a run is
    stopped (SIGINT / SIGTERM)."""
    for sandbox in list(_live):
        try:
            sandbox.close()
        except Exception:
            pass
