"""Shared by the framework adapter tests: a gateway in this process, the framework image, tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from rootstep.model import Task


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
    from rootstep.gateway import Gateway, GatewayServer

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


def assert_calls_linked_one_per_agent_step(trajectory: Any, gateway: Any, n_calls: int) -> dict[str, Any]:
    """Every LLM step is linked to exactly the live (scripted) gateway call that produced it, tool and
    human steps to none, and no call is left unlinked; the run's calls by id."""
    calls = {c.id: c for c in gateway.calls(trajectory.recording.gateway_run_id)}
    assert len(calls) == n_calls and trajectory.metadata["unlinked_calls"] == []
    for step in trajectory.steps:
        if step.kind == "agent":
            assert len(step.call_ids) == 1
            call = calls[step.call_ids[0]]
            assert (call.agent, call.step_index, call.purpose, call.mode) == (step.agent, step.index, "step", "live")
            assert call.simulated
        else:
            assert step.call_ids == []
    return calls


def assert_exact_replay(env: dict[str, Any], failed: Any, replayed_calls: int) -> Any:
    """Replaying the unmodified failed run serves all `replayed_calls` calls from the recording, none
    live, and reproduces every step, the answer and the verdict; the replayed trajectory."""
    r = env["adapter"].replay(failed)
    info = r.replay
    assert info.live_calls == 0 and info.replayed_calls == replayed_calls and info.divergence is None
    assert info.identical is True
    assert [s.content_key() for s in r.steps] == [s.content_key() for s in failed.steps]
    assert r.final_answer == failed.final_answer and r.verdict.success is False
    assert r.parent_run_id == failed.id
    assert {c.mode for c in env["gateway"].calls(r.recording.gateway_run_id)} == {"replayed"}
    return r


def last_message_text(messages: list[dict[str, Any]]) -> str:
    """The text of the last message of a chat request (what a scripted agent reacts to)."""
    return str(messages[-1].get("content"))


def reply_when(marker: str, then: str, otherwise: str) -> Callable[[list[dict[str, Any]], dict[str, Any]], str]:
    """A scripted agent answering `then` when the last message holds `marker`, else `otherwise`."""
    return lambda messages, params: then if marker in last_message_text(messages) else otherwise


def register_scripts(scripts: dict[str, Callable[[list[dict[str, Any]], dict[str, Any]], str]]) -> None:
    """Register each scripted agent with the in-process gateway under its model name (`scripted/<name>`)."""
    from rootstep.gateway import register_script

    for model, script in scripts.items():
        register_script(model, script)


def scripted_env(name: str, tmp_path_factory: Any, docker_sandbox: Any,
                 scripts: dict[str, Callable[[list[dict[str, Any]], dict[str, Any]], str]]) -> Iterator[dict[str, Any]]:
    """`framework_env` with `scripts` (model name: scripted agent) registered with the gateway."""
    register_scripts(scripts)
    yield from framework_env(name, tmp_path_factory, docker_sandbox)
