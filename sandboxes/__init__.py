"""Docker sandboxes: locally built images, warm container pool, hard limits, local fallback.

    from rootstep.sandboxes import get_sandbox
    sandbox = get_sandbox()                       # Docker; raises SandboxUnavailableError with the fix
    result = sandbox.run(code="print(1 + 1)")     # warm pool, clean work dir, no network
    with sandbox.session() as s:                  # an episode: files stay between runs
        s.run(files={"a.py": "x = 1"}, command="python3 a.py")

Docker imports happen when a Docker sandbox is made, not on import. See docs/sandbox.md.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Literal

from rootstep.sandboxes._api import ExecResult, Sandbox, SandboxSession
from rootstep.sandboxes._images import (
    AGENT_COMPUTE,
    ENVIRONMENTS,
    RUNNER_PATH,
    RUNNER_SOURCE,
    SANDBOX_UID,
    BaseSpec,
    ImageSpec,
    QuietReporter,
    binary_wheels_download,
    build_all,
    build_base,
    build_image,
    cache_dir,
    cache_lock,
    cached_wheels,
    default_image,
    docker_build,
    image_exists,
    stream_command,
)
from rootstep.sandboxes._limits import (
    PoolConfig,
    SandboxError,
    SandboxLimits,
    SandboxNetwork,
    SandboxUnavailableError,
)
from rootstep.sandboxes._local import LocalSandbox, NotIsolatedWarning, local_allowed

if TYPE_CHECKING:
    from rootstep.sandboxes._docker import DockerSandbox, docker_client

__all__ = [
    "AGENT_COMPUTE",
    "ENVIRONMENTS",
    "RUNNER_PATH",
    "RUNNER_SOURCE",
    "SANDBOX_UID",
    "BaseSpec",
    "DockerSandbox",
    "ExecResult",
    "ImageSpec",
    "LocalSandbox",
    "NotIsolatedWarning",
    "PoolConfig",
    "QuietReporter",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxNetwork",
    "SandboxSession",
    "SandboxUnavailableError",
    "binary_wheels_download",
    "build_all",
    "build_base",
    "build_image",
    "cache_dir",
    "cache_lock",
    "cached_wheels",
    "close_all",
    "default_image",
    "docker_build",
    "docker_client",
    "get_sandbox",
    "image_exists",
    "stream_command",
]


def __getattr__(name: str) -> Any:
    if name in ("DockerSandbox", "docker_client"):  # the Docker SDK is imported on first use
        from rootstep.sandboxes import _docker

        return getattr(_docker, name)
    raise AttributeError(f"module 'rootstep.sandboxes' has no attribute {name!r}")


def close_all() -> None:
    """Close every Docker sandbox of this process: their containers are removed (an episode waiting on
    one ends at once) and a closed sandbox starts none. Used when a run is stopped (SIGINT / SIGTERM);
    nothing is imported when this process never made a Docker sandbox."""
    import sys

    docker = sys.modules.get("rootstep.sandboxes._docker")
    if docker is not None:
        docker.close_all()


def get_sandbox(
    kind: Literal["docker", "local"] = "docker",
    allow_local: bool = False,
    limits: SandboxLimits | None = None,
    image: str | None = None,
    **options: Any,
) -> Sandbox:
    """The sandbox to run untrusted code in.

    Args:
        kind: "docker" (isolated, the default) or "local" (a subprocess; NOT isolated).
        allow_local: permit the local sandbox, for kind="local" and as a fallback when Docker is
            unavailable for kind="docker". `ROOTSTEP_ALLOW_LOCAL_SANDBOX=1` permits it too.
        limits: hard limits and the network policy (default `SandboxLimits()`: no network).
        image: image tag for Docker (default: the `default` environment). Ignored by the local one.
        options: passed to `DockerSandbox` (`pool`, `env`, `client`).

    Raises SandboxUnavailableError (with the fix) when Docker is unavailable and the local fallback
    was not allowed, and ValueError for an unknown `kind`.
    """
    if kind not in ("docker", "local"):
        raise ValueError(f"kind: expected 'docker' or 'local', got {kind!r}")
    allowed = allow_local or local_allowed()
    if kind == "local":
        return LocalSandbox(limits, allow=allowed, env=options.get("env"))
    from rootstep.sandboxes._docker import DockerSandbox

    try:
        return DockerSandbox(image, limits, **options)
    except SandboxUnavailableError as exc:
        if not allowed:
            raise
        warnings.warn(f"Docker sandbox unavailable ({exc}); falling back to the local sandbox", NotIsolatedWarning,
                      stacklevel=2)
        return LocalSandbox(limits, allow=True, env=options.get("env"))
