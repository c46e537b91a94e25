"""`rootstep run`: a framework on benchmark tasks now, stored and shown (AG2 for real in Docker, a
scripted model through the gateway), and its bad input."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rootstep.cli import app

from ._adapter_support import require_framework_image

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_unknown_framework_is_refused_before_anything_runs(tmp_path):
    wh = tmp_path / "wh"
    result = invoke("run", "--framework", "autogpt", "--benchmark", "gsm8k", "--warehouse", str(wh))
    assert result.exit_code == 2
    assert "--framework 'autogpt': unknown framework; known: " in result.output
    known = result.output.split("known: ", 1)[1].split()
    assert {"ag2", "smolagents", "metagpt", "owl", "aflow", "agentprune"} <= {k.strip(",") for k in known}
    assert not wh.exists()


def test_unknown_benchmark_is_refused(tmp_path):
    result = invoke("run", "-f", "ag2", "--benchmark", "no-such-bench", "--warehouse", str(tmp_path / "wh"))
    assert result.exit_code == 2
    assert "--benchmark 'no-such-bench'" in result.output and "gsm8k" in result.output


def test_limit_must_be_positive(tmp_path):
    result = invoke("run", "-f", "ag2", "--limit", "0", "--warehouse", str(tmp_path / "wh"))
    assert result.exit_code == 2 and "--limit" in result.output


@pytest.mark.docker
def test_run_stores_and_shows_each_trajectory(tmp_path, docker_sandbox):
    from rootstep.gateway import register_script
    from rootstep.benchmarks import load_tasks
    from rootstep.warehouse import Warehouse

    require_framework_image("ag2")
    tasks = load_tasks("gsm8k", limit=2, seed=3)
    answers = {t.prompt: t.ground_truth for t in tasks}

    def solver(messages, params):
        if str(messages[0].get("content")).startswith("You are the critic"):
            return "The computation is right. TERMINATE"
        answer = next(a for q, a in answers.items() if q in str(messages))
        return f"```python\nprint({answer})\n```\nAnswer: {answer}"

    register_script("cli-run-solver", solver)
    wh = str(tmp_path / "wh")
    result = invoke("run", "-f", "ag2", "-b", "gsm8k", "--limit", "2", "--seed", "3", "--model",
                    "scripted/cli-run-solver", "--warehouse", wh)
    assert result.exit_code == 0, result.output
    # each trajectory is shown: its agents, the executed code's output, the outcome
    assert result.output.count("Code output:") == 2 and "critic" in result.output and "success" in result.output
    store = Warehouse(wh)
    runs = store.rows("SELECT id, task_id, success, n_steps, model FROM runs ORDER BY task_id")
    assert sorted(r["task_id"] for r in runs) == sorted(t.task_id for t in tasks)
    assert all(r["success"] and r["n_steps"] == 4 and r["model"] == "scripted/cli-run-solver" for r in runs)
    calls = store.rows("SELECT count(*) AS n FROM llm_calls")[0]["n"]
    assert calls == 4  # coder + critic per run, journaled by the gateway
    shown = invoke("show", runs[0]["id"], "--warehouse", wh)
    assert shown.exit_code == 0 and "coder" in shown.output
    # `run` has no cache: the task runs again (its calls are journaled), and the identical trajectory
    # has the same content-derived id, so the warehouse still holds one row for it
    again = invoke("run", "-f", "ag2", "-b", "gsm8k", "--limit", "1", "--seed", "3", "--model",
                   "scripted/cli-run-solver", "--warehouse", wh)
    assert again.exit_code == 0 and "Code output:" in again.output
    after = Warehouse(wh)
    assert after.rows("SELECT count(*) AS n FROM runs")[0]["n"] == 2
    assert after.rows("SELECT count(*) AS n FROM llm_calls")[0]["n"] == 6
