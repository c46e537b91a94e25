"""Resource limits and the network policy of a sandbox, and the sandbox errors."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rootstep.model import RootstepError


class SandboxUnavailableError(RootstepError):
    """No sandbox of the asked kind can be had here; the message says why and how to fix it."""


class SandboxError(RootstepError):
    """The sandbox machinery itself failed (not the code it ran): a dead container, a broken runner."""


class SandboxNetwork(BaseModel):
    """Where code in the sandbox may connect to.

    - `none` (the default): the container has no network interface but loopback.
    - `gateway`: still no network interface, but `127.0.0.1:<container_port>` inside the container is
      relayed, through a unix socket bind-mounted from the host, to `host:host_port` on the host (the
      LLM gateway) and to nothing else. The internet, the host's other ports and other containers stay
      unreachable because there is no route to them at all. Inside, `ROOTSTEP_GATEWAY_URL` says where
      the gateway is.
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["none", "gateway"] = "none"
    host: str = "127.0.0.1"
    host_port: int | None = Field(default=None, ge=1, le=65535)
    container_port: int = Field(default=8765, ge=1024, le=65535)

    @classmethod
    def none(cls) -> SandboxNetwork:
        return cls(kind="none")

    @classmethod
    def gateway_only(cls, host_port: int, *, host: str = "127.0.0.1", container_port: int = 8765) -> SandboxNetwork:
        """Reach only the gateway listening on the host at `host:host_port` (default loopback)."""
        return cls(kind="gateway", host=host, host_port=host_port, container_port=container_port)

    @model_validator(mode="after")
    def _check(self) -> SandboxNetwork:
        if self.kind == "gateway" and self.host_port is None:
            raise ValueError("network: host_port is required for a gateway-only network")
        return self


class SandboxLimits(BaseModel):
    """Hard limits of one sandbox container (the local fallback applies what rlimits can)."""

    model_config = ConfigDict(frozen=True)

    cpus: float = Field(default=1.0, gt=0, le=64, description="CPU cores (CFS quota)")
    memory_mb: int = Field(default=512, ge=32, le=65536, description="memory incl. tmpfs, no swap")
    pids: int = Field(default=128, ge=8, le=32768, description="processes and threads")
    timeout_s: float = Field(default=10.0, gt=0, le=24 * 3600, description="wall clock of one execution")
    output_bytes: int = Field(default=1_000_000, ge=1024, le=256_000_000, description="per stream")
    work_mb: int = Field(default=256, ge=1, le=65536, description="size of the tmpfs work dir /work")
    tmp_mb: int = Field(default=64, ge=1, le=65536, description="size of the tmpfs /tmp")
    nofile: int = Field(default=1024, ge=64, le=1_048_576, description="open files per process")
    network: SandboxNetwork = Field(default_factory=SandboxNetwork.none)


class PoolConfig(BaseModel):
    """The warm pool: `size` containers kept started for short executions (0 turns the pool off)."""

    model_config = ConfigDict(frozen=True)

    size: int = Field(default=2, ge=0, le=64)
    max_uses: int = Field(default=200, ge=1, description="a container is replaced after this many runs")

    @classmethod
    def from_env(cls) -> PoolConfig:
        """`ROOTSTEP_SANDBOX_POOL_SIZE` overrides the default size."""
        raw = os.environ.get("ROOTSTEP_SANDBOX_POOL_SIZE")
        if raw is None:
            return cls()
        try:
            return cls(size=int(raw))
        except ValueError as exc:
            raise ValueError(f"ROOTSTEP_SANDBOX_POOL_SIZE: expected an integer 0..64, got {raw!r}") from exc
