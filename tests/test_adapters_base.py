"""The adapter contract without Docker: registry, step/call linking, replay preconditions, the CLI."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rootstep.adapters import adapter_class, get_adapter, list_adapters, register_adapter
from rootstep.adapters.base import Adapter, AdapterError, _parse_output, link_steps
from rootstep.model import Intervention, LLMCall, MissingRecording, Recording, Step, Trajectory

from ._adapter_support import add_task


def _call(agent: str, counter: int, step: int | None, purpose: str = "step") -> LLMCall:
    return LLMCall(run_id="r", framework="ag2", benchmark="mbpp", agent=agent, request_hash=f"h{agent}{counter}",
                   counter=counter, model="scripted/x", provider="scripted", purpose=purpose, step_index=step)


def test_registry_lists_and_builds_adapters():
    assert {"ag2", "metagpt", "smolagents"} <= set(list_adapters())
    ag2 = get_adapter("ag2", timeout_s=5)
    assert ag2.name == "ag2" and ag2.timeout_s == 5
    assert adapter_class("smolagents").package == "smolagents"
    for name in ("ag2", "metagpt", "smolagents"):
        cls = adapter_class(name)
        assert set(cls.step_kinds) == set(cls.agents)
        assert cls.image.tag().startswith(f"rootstep-fw-{name}:")
        assert all(req.count("==") == 1 for req in cls.image.requirements)
        assert f"{cls.package}=={cls.version}" in cls.image.requirements
    with pytest.raises(KeyError, match="unknown framework adapter 'nope'.*ag2"):
        get_adapter("nope")


def test_register_adapter_adds_a_framework():
    from rootstep.adapters import ADAPTERS

    # a scoped registry, so the toy framework does not leak into later tests' "known:" lists
    with ADAPTERS.scoped():

        @register_adapter
        class Toy(Adapter):
            name = "toy-test"
            agents = ("a",)

        assert "toy-test" in list_adapters() and isinstance(get_adapter("toy-test"), Toy)
        assert ADAPTERS.entry("toy-test").label == "registered in code"
    assert "toy-test" not in list_adapters()


def test_link_steps_by_step_index_agent_and_leftovers():
    raw = [
        {"agent": "executor", "kind": "human", "content": "task"},
        {"agent": "coder", "kind": "agent", "content": "code"},
        {"agent": "executor", "kind": "tool", "content": "exitcode: 0"},
        {"agent": "critic", "kind": "agent", "content": "ok"},
        {"agent": "coder", "kind": "agent", "content": "again"},
    ]
    selection = _call("manager", 0, None, purpose="speaker_selection")
    calls = [_call("coder", 0, 1), selection, _call("critic", 0, 3), _call("coder", 1, None)]
    steps, unlinked = link_steps(raw, calls)
    assert [s.call_ids for s in steps] == [[], [calls[0].id], [], [calls[2].id], [calls[3].id]]
    # the call without a step index went to the coder's unlinked step, by agent and order
    assert unlinked == [{"id": selection.id, "agent": "manager", "purpose": "speaker_selection",
                         "step_index": None, "mode": "live", "error": None}]


def test_link_steps_follows_the_drivers_indices():
    # smolagents-style: the driver numbers steps when their call starts; positions follow those numbers
    raw = [{"agent": "user", "kind": "human", "index": 0}, {"agent": "manager", "index": 1},
           {"agent": "coder", "index": 2}]
    calls = [_call("manager", 0, 1), _call("coder", 0, 2)]
    steps, unlinked = link_steps(raw, calls)
    assert [s.call_ids for s in steps] == [[], [calls[0].id], [calls[1].id]] and unlinked == []


def test_a_call_of_another_agent_is_not_linked():
    steps, unlinked = link_steps([{"agent": "coder", "kind": "agent"}], [_call("critic", 0, 0)])
    assert steps[0].call_ids == [] and unlinked[0]["agent"] == "critic"


def test_driver_output_is_found_after_framework_noise():
    out = 'noise\n<<<ROOTSTEP_TRAJECTORY>>>{"steps": [], "final_answer": "3"}\n'
    assert _parse_output(out) == {"steps": [], "final_answer": "3"}
    assert _parse_output("no marker") is None
    with pytest.raises(AdapterError, match="not JSON"):
        _parse_output("<<<ROOTSTEP_TRAJECTORY>>>{broken")


def test_driver_output_follows_the_one_contract_the_drivers_import():
    """`MARKER` and `DriverOutput` live in `_episode.py` (what the drivers import inside the container); a
    line that breaks the contract names the contract and the field."""
    from rootstep.adapters._drivers import _episode

    line = _episode.MARKER + '{"steps": [{"agent": "coder", "content": "x", "started_at": 1.5}], "final_answer": "3"}'
    assert _parse_output(line) == {"steps": [{"agent": "coder", "content": "x", "started_at": 1.5}], "final_answer": "3"}
    with pytest.raises(AdapterError, match=r"driver-output contract \(DriverOutput in adapters/_drivers/_episode.py\)"
                                           r"(.|\n)*steps\.0\.index"):
        _parse_output(_episode.MARKER + '{"steps": [{"index": "first"}]}')
    with pytest.raises(AdapterError, match=r"(.|\n)*answer\n  Extra inputs are not permitted"):
        _parse_output(_episode.MARKER + '{"steps": [], "answer": "3"}')


def _recorded() -> Trajectory:
    task = add_task()
    return Trajectory(
        framework="ag2", benchmark="mbpp", task_id="add",
        steps=[Step(index=0, agent="executor", kind="human", content="task"),
               Step(index=1, agent="coder", content="code", call_ids=["call_1"])],
        recording=Recording(gateway_run_id="ag2-run", task=task),
    )


def test_replay_refuses_what_cannot_be_replayed():
    adapter = get_adapter("ag2")
    with pytest.raises(MissingRecording, match="field `recording` is empty: it was not collected by a rootstep adapter"):
        adapter.replay(Trajectory(framework="ag2", benchmark="mbpp", task_id="x"))
    with pytest.raises(AdapterError, match="cannot be replayed by the smolagents adapter"):
        get_adapter("smolagents").replay(_recorded())
    with pytest.raises(ValueError, match="only LLM-produced agent steps"):
        adapter.replay(_recorded(), Intervention(run_id="x", step=0, new_content="y"))
    with pytest.raises(ValueError, match="outside the trajectory"):
        adapter.replay(_recorded(), Intervention(run_id="x", step=5, new_content="y"))
    with pytest.raises(AdapterError, match="no gateway"):
        adapter.replay(_recorded(), Intervention(run_id="x", step=1, new_content="y"))


def test_run_checks_the_task_kind_before_anything_else():
    task = add_task().model_copy(update={"kind": "qa"})
    with pytest.raises(ValueError, match="runs coding, math tasks, not 'qa'"):
        get_adapter("ag2").run(task, "scripted/x")


def test_a_tool_use_task_runs_only_on_a_framework_with_a_tool_use_team():
    from rootstep.benchmarks import load_tasks

    bfcl = load_tasks("bfcl", limit=1)[0]
    for name in ("ag2", "smolagents", "owl", "metagpt", "agentprune", "aflow"):
        assert adapter_class(name).cannot_run(bfcl) is None
    without = type("NoToolsAdapter", (adapter_class("ag2"),), {"name": "notools", "tool_use": False})
    assert without.cannot_run(bfcl) == ("the notools adapter has no tool-use team for bfcl tasks (adapters with one: "
                                        "aflow, ag2, agentprune, metagpt, owl, smolagents)")
    with pytest.raises(ValueError, match="no tool-use team for bfcl tasks"):
        without().run(bfcl, "scripted/x")
    assert adapter_class("ag2").cannot_run(add_task()) is None


def test_config_hash_depends_on_the_task_kind_and_is_stable():
    adapter = get_adapter("ag2")
    coding = add_task()
    math = coding.model_copy(update={"kind": "math"})
    assert adapter.config_hash(coding) == adapter.config_hash(coding) != adapter.config_hash(math)
    assert get_adapter("ag2", max_round=5).config_hash(coding) != adapter.config_hash(coding)  # options count


def test_frameworks_command_lists_adapters():
    wide = {**os.environ, "COLUMNS": "250"}
    done = subprocess.run([sys.executable, "-m", "rootstep", "frameworks", "list"], capture_output=True, text=True, env=wide)
    assert done.returncode == 0, done.stderr
    for text in ("ag2", "autogen==0.14.1", "smolagents==1.26.0", "metagpt==0.8.2", "rootstep-fw-ag2:", "coding, math"):
        assert text in done.stdout
    bad = subprocess.run([sys.executable, "-m", "rootstep", "frameworks", "build", "-f", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown framework" in bad.stderr


@pytest.mark.docker
def test_frameworks_build_runs_side_by_side_and_names_each_image():
    """`rootstep frameworks build --jobs 2` (what scripts/test.sh runs, on a machine where the images are built:
    each is checked, none rebuilt): every line names its image's framework, the table lists every framework."""
    wide = {**os.environ, "COLUMNS": "250"}
    done = subprocess.run([sys.executable, "-m", "rootstep", "frameworks", "build", "--jobs", "2", "--skip-if-no-docker"],
                          capture_output=True, text=True, env=wide)
    assert done.returncode == 0, done.stderr
    if "skipped" in done.stderr:
        pytest.skip(done.stderr.strip())
    for name in list_adapters():
        assert f"{name}: image rootstep-fw-{name}:" in done.stderr or f"{name}: framework {name}" in done.stderr, done.stderr
        assert f"│ {name} " in done.stderr


def test_metagpt_image_installs_its_checked_closure_without_resolving():
    from rootstep.adapters._images import METAGPT_IMAGE, WheelhouseImageSpec

    assert "--no-deps" in METAGPT_IMAGE.dockerfile() and "--no-index" in METAGPT_IMAGE.dockerfile()
    pins = dict(r.split("==") for r in METAGPT_IMAGE.requirements)
    assert pins["metagpt"] == "0.8.2" and "lancedb" not in pins  # the pin that no longer exists is overridden
    assert set(METAGPT_IMAGE.from_source) <= set(METAGPT_IMAGE.requirements)
    other = WheelhouseImageSpec(name="fw-metagpt", requirements=METAGPT_IMAGE.requirements)
    assert other.tag() != METAGPT_IMAGE.tag()  # what is built from source is an input of the tag
