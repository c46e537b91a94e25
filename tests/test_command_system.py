"""Your own program as a framework (issue 14), on the standard-library test system: two agents over one
URL, attributed by a header, a calculator tool whose result comes back as a tool step.

Recorded, replayed exactly (zero live calls, same steps), an intervention that flips the outcome, a
verified counterfactual label from the annotate flow, and every bad input of the issue: a clear error
naming the system file, field or run, with nothing stored.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rootstep.gateway import register_script
from rootstep.benchmarks import load_tasks
from rootstep.model import Intervention

pytestmark = pytest.mark.docker

PAIR = Path(__file__).parent / "fixtures" / "systems" / "stdlib_pair"
ANSWER = re.compile(r"Answer:\s*(\S+)")


def _task():
    return load_tasks("gsm8k", limit=1, seed=0)[0]


def _team(solver_answer):
    """The pair's model: the solver answers `solver_answer(task)`; the checker calls the calculator once
    and then repeats whatever the solution's answer is (it checks the arithmetic, not the reasoning)."""

    def reply(messages, params):
        system = messages[0]["content"]
        if system.startswith("You are the solver"):
            n = solver_answer()
            return f"Adding up the amounts step by step gives {n}.\nAnswer: {n}"
        found = ANSWER.findall(next(m["content"] for m in messages if m["role"] == "user"))
        n = found[-1] if found else "0"
        if messages[-1]["role"] == "tool":
            return f"The calculator gives {messages[-1]['content']}, which matches the solution.\nAnswer: {n}"
        return {"content": "Let me verify the final sum.",
                "tool_calls": [{"id": "call_check_1", "name": "calculator", "arguments": {"expression": f"{n} + 0"}}]}

    return reply


@pytest.fixture()
def pair(tmp_path, docker_sandbox):
    from rootstep.adapters import get_adapter, use_systems
    from rootstep.gateway import Gateway, GatewayServer

    [name] = use_systems([str(PAIR / "system.toml")])
    gateway = Gateway(tmp_path / "journal")
    server = GatewayServer(gateway).start()
    try:
        yield get_adapter(name, gateway=server, timeout_s=180)
    finally:
        server.stop()


def test_record_replay_intervene(pair):
    task = _task()
    register_script("pair-right", _team(lambda: task.ground_truth))
    run = pair.run(task, "scripted/pair-right")
    assert run.framework == "stdlib-pair" and run.verdict.success, run.verdict
    shape = [(s.agent, s.kind) for s in run.steps]
    assert shape == [("user", "human"), ("solver", "agent"), ("checker", "agent"), ("checker", "tool"),
                     ("checker", "agent")]
    assert run.steps[2].tool_calls[0]["function"]["name"] == "calculator"
    assert run.steps[3].content == str(float(task.ground_truth)) or run.steps[3].content == task.ground_truth
    assert all(len(s.call_ids) == 1 for s in run.steps if s.kind == "agent")
    assert run.recording.system.file == str(PAIR / "system.toml")
    assert "ground_truth" not in json.dumps([c.request for c in pair.gateway.gateway.calls(run.recording.gateway_run_id)])

    again = pair.replay(run)
    assert again.replay.identical and again.replay.live_calls == 0
    assert [s.content_key() for s in again.steps] == [s.content_key() for s in run.steps]

    wrong = int(task.ground_truth) + 7
    flipped = pair.replay(run, Intervention(run_id=run.id, step=1, new_content=f"The total is {wrong}.\nAnswer: {wrong}"))
    assert flipped.replay.prefix_identical and flipped.replay.forced_calls == 1
    assert not flipped.verdict.success and flipped.final_answer == f"Answer: {wrong}"


def test_annotate_gives_a_verified_label(prefect_harness, tmp_path, docker_sandbox):
    from rootstep.adapters import use_systems
    from rootstep.annotation import Budget
    from rootstep.flows.annotate import counterfactual
    from rootstep.flows.collect import collect
    from rootstep.warehouse import Warehouse

    [name] = use_systems([str(PAIR / "system.toml")])
    task = _task()
    slip = int(task.ground_truth) - 10  # the solver drops an amount; the checker only re-adds its numbers
    register_script("pair-slip", _team(lambda: slip))
    register_script("pair-analyzer", lambda messages, params: json.dumps({
        "mistake_step": 1, "mistake_agent": "solver",
        "reason": f"The solver's total {slip} leaves out one of the amounts in the question; the checker only "
                  "re-added the solver's own numbers, so the slip went through.",
        "suggested_fix": f"Adding every amount in the question gives {task.ground_truth}.\nAnswer: {task.ground_truth}",
    }))
    wh = tmp_path / "wh"
    [run] = collect([name], tasks=[task], model="scripted/pair-slip", warehouse=str(wh)).runs
    assert run.success is False and run.error is None
    report = counterfactual("scripted/pair-analyzer", warehouse=str(wh), budget=Budget(max_replays=2))
    [annotated] = report.runs
    assert annotated.status == "labelled" and annotated.verified, annotated
    assert (annotated.agent, annotated.step) == ("solver", 1)
    label = Warehouse(wh).rows("SELECT agent, step, method, verified FROM labels WHERE run_id = ?", [run.run_id])
    assert label == [{"agent": "solver", "step": 1, "method": "counterfactual", "verified": True}]


# ---------------------------------------------------------------------------------------------- bad input

_CALL = """import json, os, urllib.request
body = {"model": "m", "messages": [{"role": "system", "content": "You are X."}, {"role": "user", "content": "hi"}]}
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
                             headers={"Content-Type": "application/json", "X-Agent": AGENT})
try:
    content = json.load(urllib.request.urlopen(req))["choices"][0]["message"]["content"]
    print(content if PRINT else "")
except Exception as exc:
    print("request failed:", exc, file=__import__("sys").stderr)
    raise SystemExit(EXIT)
"""


def _system(tmp_path: Path, name: str, program: str | None, **fields: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    if program is not None:
        (folder / "prog.py").write_text(program)
    lines = [f'name = "{name}"', 'task_kinds = ["math"]', *[f"{k} = {v}" for k, v in fields.items() if "." not in k]]
    lines += ["[attribution]", 'by = "header"', 'header = "X-Agent"', "[[agents]]", 'name = "solver"']
    (folder / "system.toml").write_text("\n".join(lines) + "\n")
    return folder / "system.toml"


@pytest.mark.parametrize("case, program, expected", [
    ("never-calls", "print('Answer: 3')", "never called the gateway"),
    ("exits", "import sys; print('boom', file=sys.stderr); sys.exit(3)", "exited with code 3; stderr ends:\nboom"),
    ("no-answer", _CALL.replace("AGENT", "'solver'").replace("PRINT", "False").replace("EXIT", "1"), "gave no answer"),
    ("ghost", _CALL.replace("AGENT", "'ghost'").replace("PRINT", "True").replace("EXIT", "0"),
     "matched no agent: run stdlib-ghost"),
])
def test_bad_programs_are_clear_errors(tmp_path, docker_sandbox, case, program, expected):
    from rootstep.adapters import get_adapter, use_systems
    from rootstep.adapters.base import AdapterError
    from rootstep.gateway import Gateway, GatewayServer

    register_script("pair-any", lambda messages, params: "Answer: 3")
    path = _system(tmp_path, f"stdlib-{case}", program, command='["python3", "prog.py"]', timeout_s="60")
    [name] = use_systems([str(path)])
    server = GatewayServer(Gateway(tmp_path / "journal")).start()
    try:
        with pytest.raises(AdapterError) as caught:
            get_adapter(name, gateway=server, timeout_s=90).run(_task(), "scripted/pair-any")
    finally:
        server.stop()
    message = str(caught.value)
    assert expected.replace("run stdlib-ghost", "") in message and str(path) in message, message
    if case == "ghost":
        assert "header X-Agent gave 'ghost'" in message


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "rootstep", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200", **(env or {})}, timeout=600)


@pytest.mark.parametrize("body, field", [
    ('task_kinds = ["math"]\n[[agents]]\nname = "a"\n', "field `command` is missing"),
    ('command = ["python3", "p.py"]\n[[agents]]\nname = "a"\n', "field `command`: "),
    ('command = ["true"]\ncolour = "red"\n[[agents]]\nname = "a"\n', "field `colour`: Extra inputs are not permitted"),
    ('command = ["true"]\n[attribution]\nby = "system_prompt"\n[[agents]]\nname = "a"\n',
     "attribution by system_prompt needs a `system_prompt` for a"),
    ('command = ["true"]\n[environment]\nrequirements = "nope.txt"\n[[agents]]\nname = "a"\n',
     "field `environment.requirements`"),
    ('command = ["true"]\nname = "ag2"\n[[agents]]\nname = "a"\n', "is a built-in framework"),
    ('command = ["true"\n', "not valid TOML"),
])
def test_bad_system_files_name_the_field_and_store_nothing(tmp_path, body, field):
    folder = tmp_path / "sys"
    folder.mkdir()
    if not re.search(r"^name =", body.split("[[")[0], re.M):
        body = 'name = "bad-one"\n' + body
    (folder / "system.toml").write_text(body)
    wh = tmp_path / "wh"
    done = _cli("run", "--system", str(folder / "system.toml"), "-b", "gsm8k", "--limit", "1", "--warehouse", str(wh))
    assert done.returncode == 2, done.stderr
    text = " ".join(done.stderr.split())
    assert str(folder / "system.toml") in done.stderr.replace("\n", "") and field in text, done.stderr
    assert not wh.exists()


def test_an_image_that_does_not_build_names_the_field(tmp_path, docker_sandbox):
    folder = tmp_path / "sys"
    folder.mkdir()
    (folder / "requirements.txt").write_text("rootstep-no-such-package-anywhere==0.0.1\n")
    (folder / "system.toml").write_text('name = "no-build"\ncommand = ["true"]\n[environment]\n'
                                        'requirements = "requirements.txt"\n[[agents]]\nname = "a"\n')
    done = _cli("run", "--system", str(folder / "system.toml"), "-b", "gsm8k", "--limit", "1",
                "--warehouse", str(tmp_path / "wh"))
    text = " ".join(done.stderr.split())
    assert done.returncode == 2 and "field `environment.requirements`" in text and "do not resolve" in text, done.stderr
    assert not (tmp_path / "wh").exists()


def test_a_prebuilt_image_gets_the_runner(tmp_path, docker_sandbox, pair):
    """`environment.image`: an existing local image (here the sandbox base) with the runner added."""
    from rootstep.adapters import get_adapter, use_systems
    from rootstep.sandboxes._images import BaseSpec

    folder = tmp_path / "img"
    shutil.copytree(PAIR, folder)
    text = (folder / "system.toml").read_text().replace('name = "stdlib-pair"', 'name = "stdlib-pair-image"')
    (folder / "system.toml").write_text(text + f'\n[environment]\nimage = "{BaseSpec().tag()}"\n')
    [name] = use_systems([str(folder / "system.toml")])
    adapter = get_adapter(name, gateway=pair.gateway, timeout_s=180)
    task = _task()
    register_script("pair-right-2", _team(lambda: task.ground_truth))
    run = adapter.run(task, "scripted/pair-right-2")
    assert run.verdict.success and run.recording.image.startswith("rootstep-sys-stdlib-pair-image:")


def test_a_nondeterministic_program_gets_a_divergence_report(tmp_path, docker_sandbox):
    """The clock in a prompt: the recording replays no more, and the error shows the diff."""
    from rootstep.adapters import get_adapter, use_systems
    from rootstep.adapters.base import AdapterError
    from rootstep.gateway import Gateway, GatewayServer

    register_script("pair-any", lambda messages, params: "Answer: 3")
    program = _CALL.replace('"content": "hi"', '"content": "time " + repr(__import__("time").time())')
    path = _system(tmp_path, "stdlib-clock", program.replace("AGENT", "'solver'").replace("PRINT", "True")
                   .replace("EXIT", "1"), command='["python3", "prog.py"]', timeout_s="60")
    [name] = use_systems([str(path)])
    server = GatewayServer(Gateway(tmp_path / "journal")).start()
    try:
        adapter = get_adapter(name, gateway=server, timeout_s=90)
        run = adapter.run(_task(), "scripted/pair-any")
        with pytest.raises(AdapterError) as caught:
            adapter.replay(run)
    finally:
        server.stop()
    message = str(caught.value)
    assert "the replay diverged from the recording" in message and "recorded call #0" in message, message
    assert re.search(r"^-.*\"time \d", message, re.M) and re.search(r"^\+.*\"time \d", message, re.M), message
