"""Shared by the framework adapter tests: a gateway in this process, the framework image, tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from rootstep.warehouse import Task


def add_task(task_id: str = "add") -> Task:
    """A small MBPP-style coding task checked by the real `code_tests` verifier in the sandbox."""
    tests = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(10, 5) == 15"]
    return Task(
        benchmark="mbpp", task_id=task_id, kind="coding", verifier="code_tests",
        prompt="Write a function add(a, b) that returns the sum of a and b.\nYour code should pass these tests:\n\n"
        + "\n".join(tests),
        metadata={"harness": "asserts", "tests": tests, "entry_point": "add"},
    )


def require_framework_image(name: str) -> None:
    """Skip, saying why, when Docker or the framework's image is unavailable."""
    from rootstep.adapters import get_adapter

    probe = get_adapter(name)
    built = probe.image_built()
    if built is None:
        pytest.skip("no Docker daemon is reachable")
    if not built:
        pytest.skip(f"the {name} image {probe.image_tag()} is not built: run `rootstep frameworks build`")


def framework_env(name: str, tmp_path_factory: Any, docker_sandbox: Any) -> Iterator[dict[str, Any]]:
    """A started in-process gateway and the adapter `name` bound to it; skips with the reason when
    Docker or the framework's image is unavailable."""
    from rootstep.adapters import get_adapter
    from rootstep.adapters.base import default_verifier
    from rootstep.adapters.gateway import Gateway, GatewayServer

    require_framework_image(name)
    journal: Path = tmp_path_factory.mktemp(f"{name}-journal")
    gateway = Gateway(journal, fsync=False)
    server = GatewayServer(gateway).start()
    try:
        yield {
            "gateway": gateway,
            "server": server,
            "adapter": get_adapter(name, gateway=server, verifier=default_verifier(docker_sandbox), timeout_s=300),
        }
    finally:
        server.stop()
        gateway.close()
