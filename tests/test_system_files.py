"""System files and the command adapter without Docker (issue 14): parsing and its errors, how the gateway
attributes a request to an agent (URL, header, system prompt, none), how steps come out of the journal,
and plugins registered through entry points (a real `pip install --target` of a package)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rootstep.adapters._command import public_task, steps_from_calls, system_adapter
from rootstep.adapters._system import SystemFileError, load_system
from rootstep.gateway import Gateway, RunContext, create_app, register_script
from rootstep.model import LLMCall, Task

PAIR = Path(__file__).parent / "fixtures" / "systems" / "stdlib_pair" / "system.toml"
HANDOFFS = Path(__file__).resolve().parent.parent / "examples" / "openai_agents_handoffs"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "system.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_the_test_system_parses_into_an_adapter():
    spec = load_system(PAIR)
    cls = system_adapter(spec)
    assert cls.name == "stdlib-pair" and cls.agents == ("user", "solver", "checker")
    assert cls.answer_agents == ("checker",) and cls.task_kinds == ("math",)
    rules = cls().gateway_rules()
    assert rules["agent_header"] == "X-Agent" and rules["agents"] == ("solver", "checker")
    assert set(spec.program_files()) == {"pair.py", "system.toml"}


@pytest.mark.parametrize("text, problem", [
    ('name = "x"\n[[agents]]\nname = "a"\n', "field `command` is missing"),
    ('name = "X y"\ncommand = ["true"]\n[[agents]]\nname = "a"\n', "field `name`"),
    ('name = "x"\ncommand = ["true"]\n', "field `agents`: Field required"),
    ('name = "x"\ncommand = []\n[[agents]]\nname = "a"\n', "field `command`"),
    ('name = "x"\ncommand = ["true"]\n[answer]\nfrom = "socket"\n[[agents]]\nname = "a"\n', "field `answer.from`"),
    ('name = "x"\ncommand = ["true"]\n[attribution]\nby = "header"\n[[agents]]\nname = "a"\n', "needs `header`"),
    ('name = "x"\ncommand = ["true"]\n[[agents]]\nname = "a"\nsystem_prompt = "(("\n', "not a regular expression"),
    ('name = "x"\ncommand = ["true"]\n[[agents]]\nname = "a"\n[[agents]]\nname = "a"\n', "a declared twice"),
    ('name = "x"\ncommand = ["true"]\n[environment]\nimage = "i"\nrequirements = "r.txt"\n[[agents]]\nname = "a"\n',
     "give one of requirements, pyproject or image"),
])
def test_bad_system_files_name_file_and_field(tmp_path, text, problem):
    path = _write(tmp_path, text)
    with pytest.raises(SystemFileError) as caught:
        load_system(path)
    assert str(path) in str(caught.value) and problem in str(caught.value), caught.value


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(SystemFileError, match="no such system file"):
        load_system(tmp_path / "nope.toml")


def test_the_program_never_sees_the_ground_truth():
    task = Task(benchmark="gsm8k", task_id="t1", prompt="2+2?", ground_truth="4", verifier="numeric", kind="math",
                metadata={"secret": "x"})
    shown = public_task(task, "End with Answer: <number>.")
    assert "4" not in str(shown.values()) and "secret" not in str(shown)
    assert shown["prompt"] == "2+2?" and shown["answer_instruction"].startswith("End with")


# ------------------------------------------------------------------------------------ attribution


def _client(tmp_path: Path, **rules) -> tuple[TestClient, Gateway]:
    register_script("attr-echo", lambda messages, params: "ok")
    gateway = Gateway(tmp_path / "journal", fsync=False)
    gateway.register(RunContext(run_id="r1", model="scripted/attr-echo", **rules))
    return TestClient(create_app(gateway)), gateway


def _ask(client: TestClient, path: str, system: str = "You are the solver.", **headers: str):
    body = {"model": "m", "messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]}
    return client.post(path, json=body, headers=headers)


def test_attribution_by_url_header_and_system_prompt(tmp_path):
    client, gateway = _client(tmp_path, agents=("solver", "checker"), agent_header="X-Agent",
                              agent_prompts=[("You are the checker", "checker"), ("You are the solver", "solver")],
                              attribution_source="my.toml")
    assert _ask(client, "/run/r1/agent/checker/v1/chat/completions").status_code == 200  # the URL wins
    assert _ask(client, "/run/r1/v1/chat/completions", **{"X-Agent": "checker"}).status_code == 200
    assert _ask(client, "/run/r1/v1/chat/completions", system="You are the solver. Be brief.").status_code == 200
    assert [c.agent for c in gateway.calls("r1")] == ["checker", "checker", "solver"]
    refused = _ask(client, "/run/r1/v1/chat/completions", system="You are a poet.")
    assert refused.status_code == 400 and refused.json()["error"]["type"] == "unattributed_request"
    message = refused.json()["error"]["message"]
    assert "my.toml" in message and "You are a poet." in message and "solver, checker" in message
    ghost = _ask(client, "/run/r1/agent/ghost/v1/chat/completions")
    assert ghost.status_code == 400 and "its URL gave 'ghost'" in ghost.json()["error"]["message"]
    assert gateway.stats("r1").unattributed == 2 and len(gateway.calls("r1")) == 3


def test_runs_without_declared_agents_keep_the_old_rules(tmp_path):
    client, gateway = _client(tmp_path)
    assert _ask(client, "/run/r1/v1/chat/completions", **{"X-Rootstep-Agent": "coder"}).status_code == 200
    assert _ask(client, "/run/r1/v1/chat/completions").status_code == 200
    assert [c.agent for c in gateway.calls("r1")] == ["coder", "unknown"]


# ------------------------------------------------------------------------------------ steps


def _call(agent: str, messages: list[dict], reply: dict, n: int) -> LLMCall:
    return LLMCall(run_id="r", framework="demo", benchmark="gsm8k", agent=agent, request_hash=f"h{n}", counter=0, model="scripted/x", provider="scripted",
                   mode="live", request={"messages": messages},
                   response={"choices": [{"index": 0, "message": {"role": "assistant", **reply}}]})


def test_steps_come_from_the_calls_with_tool_results_between():
    tc = {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "2+2"}'}}
    sys_c = {"role": "system", "content": "You are the checker."}
    calls = [
        _call("solver", [{"role": "user", "content": "2+2?"}], {"content": "Answer: 4"}, 1),
        _call("checker", [sys_c, {"role": "user", "content": "check"}], {"content": None, "tool_calls": [tc]}, 2),
        _call("checker", [sys_c, {"role": "user", "content": "check"}, {"role": "assistant", "tool_calls": [tc]},
                          {"role": "tool", "tool_call_id": "c1", "content": "4"}], {"content": "Right. Answer: 4"}, 3),
        # a later request that carries the same tool result again makes no second tool step
        _call("solver", [{"role": "user", "content": "2+2?"}, {"role": "assistant", "tool_calls": [tc]},
                         {"role": "tool", "tool_call_id": "c1", "content": "4"}], {"content": "Done."}, 4),
    ]
    steps = steps_from_calls("2+2?", calls)
    assert [(s.agent, s.kind) for s in steps] == [("user", "human"), ("solver", "agent"), ("checker", "agent"),
                                                  ("checker", "tool"), ("checker", "agent"), ("solver", "agent")]
    assert steps[3].content == "4" and steps[3].metadata["tool_call_id"] == "c1" and not steps[3].call_ids
    assert steps[2].tool_calls == [tc] and steps[2].call_ids == [calls[1].id]


# ------------------------------------------------------------------------------------ plugins


PLUGIN = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "rootstep-demo-plugin"
        version = "0.3.0"
        [tool.setuptools]
        packages = ["rootstep_demo_plugin"]
        [tool.setuptools.package-data]
        rootstep_demo_plugin = ["system/*"]
        [project.entry-points."rootstep.adapters"]
        handoffs = "rootstep_demo_plugin:SYSTEM_FILE"
        broken-one = "rootstep_demo_plugin:does_not_exist"
        [project.entry-points."rootstep.verifiers"]
        demo-yes = "rootstep_demo_plugin:always_right"
    """,
    "rootstep_demo_plugin/__init__.py": """
        from pathlib import Path

        from rootstep.model import Verdict

        SYSTEM_FILE = str(Path(__file__).parent / "system" / "system.toml")


        def always_right(answer, task, **options):
            \"\"\"Accepts any non-empty answer (a plugin verifier).\"\"\"
            return Verdict(success=bool(answer), method="demo", details={})
    """,
}


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("plugin-src")
    for rel, text in PLUGIN.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(textwrap.dedent(text).lstrip())
    # the package ships the OpenAI Agents SDK example (examples/openai_agents_handoffs) as its system
    system = src / "rootstep_demo_plugin" / "system"
    shutil.copytree(HANDOFFS, system)
    text = (system / "system.toml").read_text().replace('name = "openai-agents-handoffs"', 'name = "handoffs-plugin"')
    (system / "system.toml").write_text(text)
    site = tmp_path_factory.mktemp("plugin-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "--target", str(site), str(src)], check=True, timeout=300)
    return site


def _rootstep(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "rootstep", *args], capture_output=True, text=True, env=env, timeout=300)


def test_a_pip_installed_plugin_adds_a_framework_and_a_verifier(plugin_site):
    listed = _rootstep(plugin_site, "frameworks", "list")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if "handoffs-plugin" in line)
    assert "plugin rootstep-demo-plugin 0.3.0" in row and "triage, solver, reviewer" in row
    assert "ag2" in listed.stdout  # the built-ins still list
    # the broken entry point is reported by name and breaks nothing
    assert "not loaded: rootstep.adapters:broken-one: AttributeError" in " ".join(listed.stdout.split())
    verifiers = _rootstep(plugin_site, "benchmark", "verifiers")
    assert verifiers.returncode == 0 and "demo-yes" in verifiers.stdout, verifiers.stdout + verifiers.stderr


def test_show_prints_tool_calls_of_an_agent_step():
    from rich.console import Console

    from rootstep._render import print_trajectory
    from rootstep.model import Trajectory, Verdict

    tc = {"id": "c1", "type": "function", "function": {"name": "transfer_to_solver", "arguments": "{}"}}
    steps = steps_from_calls("2+2?", [_call("triage", [{"role": "user", "content": "2+2?"}], {"content": None, "tool_calls": [tc]}, 1)])
    run = Trajectory(framework="demo", benchmark="gsm8k", task_id="t", steps=steps, verdict=Verdict(success=False))
    console = Console(record=True, width=120)
    print_trajectory(console, "run_x", run, None, [], width=300)
    text = console.export_text()
    assert "tool call: transfer_to_solver({})" in text and "(empty)" not in text
