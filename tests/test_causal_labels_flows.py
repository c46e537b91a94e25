"""Causal labels end to end (issue 23): real AG2 and AgentPrune in Docker, scripted agents through the
gateway, real Prefect flows and the warehouse.

* a flaky AG2 team (sampled, temperature 0.7: its coder gets the answer right on a later, live call
  whatever it is told) whose control replay succeeds too: no label at that step, and the scan goes on to the
  step that states the wrong answer again, put to three controls;
* a deterministic AG2 team (temperature 0, scripted): the control is proven identical without a live
  call; a re-check with another analyzer lands on another step and is reported;
* an AgentPrune ensemble on GSM8K whose four agents all give one wrong answer: each single fix leaves the
  majority wrong, the decision node's fix flips it, and the joint fix of the four agents gives a
  multi-step label, not a last-step one; with a small budget the scan stops: `unproven_earliest`;
* a fix that hands over the reference answer at the first agent step (a plan) is rejected and re-asked;
* an MBPP+ run whose answer holds no code is a plain failure, searched (not suspect), and labelled.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest

from rootstep.gateway import register_script
from rootstep.benchmarks import load_tasks
from rootstep.annotation import Budget
from rootstep.warehouse import Warehouse

from . import _team_support as T
from ._adapter_support import require_framework_image

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def prefect_harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield


@pytest.fixture(scope="module")
def gsm():
    task = next(t for t in load_tasks("gsm8k") if re.fullmatch(r"\d+", (t.ground_truth or "").split("####")[-1].strip()))
    right = int(task.ground_truth.split("####")[-1].strip())
    return task, right, right + 7


def _text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content")) for m in messages)


def _step_prompt(prompt: str) -> int | None:
    m = re.search(r"STEP UNDER EXAMINATION: step (\d+)", prompt)
    return int(m.group(1)) if m else None


def _analyzer(name: str, answer) -> str:
    def fn(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompt = messages[-1]["content"]
        return answer(prompt, _step_prompt(prompt))

    register_script(name, fn)
    return f"scripted/{name}"


def _fix(step: int, agent: str, text: str) -> str:
    return json.dumps({"mistake_step": step, "mistake_agent": agent, "reason": "the arithmetic is wrong",
                       "suggested_fix": text, "fix_needed": True})


DECLINE = json.dumps({"fix_needed": False, "reason": "this step is correct"})


# ------------------------------------------------------------------------------------------- AG2 on GSM8K


def _ag2_team(prefix: str, right: int, wrong: int, *, flaky: bool, one_model: bool = False) -> tuple[str, dict[str, str]]:
    """coder: its answer, kept when its own earlier message stated one it had re-derived (a fixed step carries on);
    from its own working (`I worked it out step by step.`, whatever answer that states) it works the answer out
    wrong again; the flaky coder answers wrong on its first two calls (the recording) and right on every later,
    live one.
    critic: asks once for a re-check, then TERMINATE. `one_model`: one script for both agents (the command
    line has one --model), answering as the agent whose system prompt it is sent."""
    calls = {"coder": 0}

    def coder(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        calls["coder"] += 1
        mine = [str(m.get("content")) for m in messages if m.get("role") == "assistant"]
        if flaky:
            value = wrong if calls["coder"] <= 2 else right
        else:
            rederived = [m for m in mine if not m.startswith("I worked it out step by step.")]
            stated = [int(x) for x in re.findall(r"Answer: (\d+)", "\n".join(rederived))]
            value = stated[-1] if stated else wrong
        return f"I worked it out step by step.\nAnswer: {value}"

    def critic(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        if "Please re-check" in _text(messages):
            return "Agreed. TERMINATE"
        return "Please re-check the arithmetic and state the final answer again."

    if one_model:
        register_script(prefix, lambda m, p: (critic if "You are the critic" in str(m[0].get("content")) else coder)(m, p))
        return f"scripted/{prefix}", {}
    register_script(f"{prefix}-coder", coder)
    register_script(f"{prefix}-critic", critic)
    return f"scripted/{prefix}-coder", {"critic": f"scripted/{prefix}-critic"}


def test_a_flaky_teams_flip_that_its_control_shows_too_is_no_label_and_the_scan_goes_on(
        prefect_harness, tmp_path, docker_sandbox, gsm):
    """Step 1's flips (the task's answer in its place, the ranked fix) are matched by its control: a re-roll, not
    the cause. The coder's step 4 states the wrong answer again; with step 1 tried it gets the task's answer in
    its place, which flips the run, and since a control of this search flipped it is put to three controls,
    which all fail (after step 4 the critic only terminates): coder@4, the first step whose correction is the
    cause."""
    from rootstep.flows._session import open_session
    from rootstep.flows.annotate import counterfactual
    from rootstep.flows.collect import collect

    require_framework_image("ag2")
    task, right, wrong = gsm
    model, agent_models = _ag2_team("flaky", right, wrong, flaky=True)
    analyzer = _analyzer("causal-flaky-analyzer", lambda p, step: _fix(1, "coder", f"Let me recompute.\nAnswer: {right}")
                         if step is None else DECLINE)
    with open_session(str(tmp_path), adapter_options={"temperature": 0.7}) as session:
        [run] = collect(["ag2"], tasks=[task], model=model, agent_models=agent_models, session=session).runs
        assert run.success is False
        report = counterfactual(analyzer, session=session, budget=Budget(max_candidates=1))
    [done] = report.runs
    assert (done.status, done.verified, done.agent, done.step) == ("labelled", True, "coder", 4), done
    wh = Warehouse(str(tmp_path))
    replays = [(r["intervention_kind"], r["intervention_step"], r["success_after"]) for r in wh.rows(
        "SELECT intervention_kind, intervention_step, success_after FROM replays WHERE run_id = ? ORDER BY created_at",
        [run.run_id])]
    at_1 = [r for r in replays if r[1] == 1]
    # step 1 given the task's answer first (the grounded phase) with its control beside it, then the ranked fix,
    # which flipped too, against the same control (not a second one): every one of them succeeded
    assert sorted(k for k, _, _ in at_1) == ["control", "fix", "fix"] and all(ok for _, _, ok in at_1)
    # three controls of step 4, each the same re-simulation (the critic terminates): one stored replay row
    assert [r for r in replays if r[1] == 4] == [("fix", 4, True), ("control", 4, False)]
    assert {r[1] for r in replays} == {1, 4}
    label = wh.label(run.run_id)
    assert label.metadata["not_causal_steps"] == [1, 1] and label.earliest == "established"
    proof = label.flip_check
    assert (proof.flips, proof.trials, proof.control_flips, proof.control_trials) == (1, 1, 0, 3)
    assert len(proof.controls_replayed) == 3 and label.confidence < 1.0
    assert label.evidence.reason.startswith("it states the wrong answer '25' again after the earlier steps that stated it")
    assert any("states again the wrong answer '25'" in n for n in label.evidence.notes), label.evidence.notes
    [q] = wh.rows("SELECT not_causal, counterfactual_labels FROM quality")
    assert q == {"not_causal": 0, "counterfactual_labels": 1}


def test_a_deterministic_control_is_proven_identical_and_a_recheck_elsewhere_is_reported(
        prefect_harness, tmp_path, docker_sandbox, gsm):
    from rootstep.flows.annotate import counterfactual, recheck
    from rootstep.flows.collect import collect

    require_framework_image("ag2")
    task, right, wrong = gsm
    model, agent_models = _ag2_team("steady", right, wrong, flaky=False)
    first = _analyzer("causal-steady-a", lambda p, step: _fix(1, "coder", f"Let me recompute.\nAnswer: {right}")
                      if step is None else DECLINE)
    wh_dir = str(tmp_path)
    [run] = collect(["ag2"], tasks=[task], model=model, agent_models=agent_models, warehouse=wh_dir).runs
    assert run.success is False
    [done] = counterfactual(first, warehouse=wh_dir, budget=Budget(max_candidates=1)).runs
    assert (done.status, done.verified, done.agent, done.step) == ("labelled", True, "coder", 1), done
    wh = Warehouse(wh_dir)
    label = wh.label(run.run_id)
    check = label.flip_check.model_dump()
    assert check["controls_replayed"] == [] and check["controls_proven_identical"] == 1
    assert "answered deterministically" in check["proven_identical_because"]
    assert wh.rows("SELECT count(*) AS n FROM replays WHERE intervention_kind = 'control'")[0]["n"] == 0
    assert label.earliest == "established"
    [row] = wh.rows("SELECT confidence FROM labels")
    assert row["confidence"] == label.confidence == 1.0  # the control side is known exactly

    # a re-check with a fresh analyzer that blames the coder's second message instead: step 1, the first to state the
    # wrong answer, is given the reference answer in its place first (`from_answer`, the grounded phase), and fails
    # (the coder works the answer out again from its unchanged working); the ranked fix of step 4 flips, and the scan
    # finds step 1 tried
    second = _analyzer("causal-steady-b", lambda p, step: DECLINE if step is not None and step != 4 else
                       _fix(4, "coder", f"Rechecked.\nAnswer: {right}"))
    [again] = recheck(second, 1, warehouse=wh_dir, budget=Budget(max_candidates=1)).runs
    assert again.recheck_of == label.id and again.agrees is False and (again.agent, again.step) == ("coder", 4), again
    [agreement] = wh.rows("SELECT label_step, recheck_step, agrees FROM agreement")
    assert agreement == {"label_step": 1, "recheck_step": 4, "agrees": False}
    assert wh.label(run.run_id).id == label.id  # the re-check does not replace the label
    [q] = wh.rows("SELECT rechecks, agreement FROM quality")
    assert q == {"rechecks": 1, "agreement": 0.0}


def test_the_pipeline_command_rechecks_labels_and_keeps_only_those_above_min_confidence(prefect_harness, tmp_path,
                                                                                        docker_sandbox):
    """`rootstep pipeline --recheck N --min-confidence C` (as `annotate` has them): the collected failure's
    label is re-done from scratch and the agreement reported; with a confidence floor above the label's
    (no control replay: 2/3 that the fix raised the flip rate), the label is stored unverified (out of
    `labels`) and there is nothing to re-check."""
    from typer.testing import CliRunner

    from rootstep.cli import app

    require_framework_image("ag2")
    seed, task = next((s, t) for s in range(50) for t in load_tasks("gsm8k", limit=1, seed=s)
                      if re.fullmatch(r"\d+", (t.ground_truth or "").strip()))
    right = int(task.ground_truth)
    model, _ = _ag2_team("pipe-team", right, right + 7, flaky=False, one_model=True)
    analyzer = _analyzer("pipe-analyzer", lambda p, step: _fix(1, "coder", f"Let me recompute.\nAnswer: {right}")
                         if step is None else DECLINE)
    common = ["pipeline", "-f", "ag2", "-b", "gsm8k:1", "--seed", str(seed), "--model", model, "--analyzer-model",
              analyzer, "--no-inject", "--max-candidates", "1", "--recheck", "1"]

    kept = str(tmp_path / "kept")
    done = CliRunner().invoke(app, [*common, "--warehouse", kept, "--min-confidence", "0.05"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert "re-checked 1 labels from scratch: 1 found again at the same agent and step" in done.output, done.output
    wh = Warehouse(kept)
    [label] = wh.rows("SELECT id, agent, step, confidence FROM labels")
    assert (label["agent"], label["step"]) == ("coder", 1) and label["confidence"] == 1.0  # a proven control
    [agreement] = wh.rows("SELECT label_id, recheck_step, agrees FROM agreement")
    assert agreement == {"label_id": label["id"], "recheck_step": 1, "agrees": True}

    floor = str(tmp_path / "floor")
    done = CliRunner().invoke(app, [*common, "--warehouse", floor, "--controls", "0", "--min-confidence", "0.9"],
                              catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert "re-checked" not in done.output  # no label to re-check
    wh = Warehouse(floor)
    assert wh.rows("SELECT count(*) AS n FROM labels")[0]["n"] == 0
    [stored] = wh.rows("SELECT status, verified, notes FROM annotations")
    assert stored["status"] == "labelled" and stored["verified"] is False
    assert any("confidence 0.6667 is below --min-confidence 0.9: not verified" in n for n in stored["notes"]), stored["notes"]


# ------------------------------------------------------------------------------------ AgentPrune ensemble


ROUND = ("math_solver", "analyst", "programmer", "inspector")


def _ensemble(prefix: str, wrong: int, plan_first: bool = False) -> tuple[str, dict[str, str]]:
    """Every agent answers `wrong` (a plan instead, for the math solver, with `plan_first`); the decision node
    gives the majority of the agents' stated answers."""
    def agent(name: str):
        def reply(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
            if plan_first and name == "math_solver":
                return "Plan: read the quantities, then compute the total step by step."
            return f"I computed it from the quantities in the task.\nAnswer: {wrong}"
        return reply

    def decision(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        said = Counter(re.findall(r"Answer: (\d+)", _text(messages[1:])))
        value = said.most_common(1)[0][0] if said else str(wrong)
        return f"The agents' answers weighed.\nAnswer: {value}"

    models = {name: f"scripted/{prefix}-{name}" for name in ROUND}
    for name in ROUND:
        register_script(f"{prefix}-{name}", agent(name))
    register_script(f"{prefix}-decision", decision)
    return f"scripted/{prefix}-decision", models


def _ensemble_run(tmp_path, prefix: str, gsm, **kw):
    """The scripted ensemble and a flow session whose AgentPrune runs one round with every edge kept."""
    from rootstep.flows._session import open_session

    require_framework_image("agentprune")
    task, right, wrong = gsm
    model, agent_models = _ensemble(prefix, wrong, **kw)
    session = open_session(str(tmp_path), adapter_options={"rounds": 1, "pruning_ratio": 0.0})
    return session, model, agent_models, task, right


def test_an_ensemble_repeating_one_error_gets_a_multi_step_label(prefect_harness, tmp_path, docker_sandbox, gsm):
    from rootstep.flows.annotate import counterfactual
    from rootstep.flows.collect import collect

    session_cm, model, agent_models, task, right = _ensemble_run(tmp_path, "ens", gsm)

    def analyzer(prompt: str, step: int | None) -> str:
        if step is None:  # the symptom: the decision node's answer
            return _fix(int(re.findall(r"\[step (\d+)\] decision", prompt)[-1]), "decision", f"Weighed again.\nAnswer: {right}")
        agent = re.search(rf"STEP UNDER EXAMINATION: step {step} by (\w+)", prompt).group(1)
        return _fix(step, agent, f"I recomputed it.\nAnswer: {right}")

    name = _analyzer("causal-ensemble", analyzer)
    with session_cm as session:
        [run] = collect(["agentprune"], tasks=[task], model=model, agent_models=agent_models, session=session).runs
        assert run.success is False
        trajectory = session.warehouse.trajectory(run.run_id)
        agents = [s.index for s in trajectory.steps if s.kind == "agent" and s.agent in ROUND]
        assert len(agents) == 4
        [done] = counterfactual(name, session=session, budget=Budget(max_candidates=1)).runs
    assert (done.status, done.verified) == ("labelled", True), done
    assert done.agent != "decision" and done.step == agents[0] and done.steps == agents
    wh = Warehouse(str(tmp_path))
    steps = wh.rows("SELECT step, agent, is_primary FROM label_steps ORDER BY step")
    assert [s["step"] for s in steps] == agents and [s["is_primary"] for s in steps] == [True, False, False, False]
    label = wh.label(run.run_id)
    assert label.multi_step is True and label.earliest == "established"
    joint = wh.rows("SELECT * FROM replays WHERE intervention_also IS NOT NULL")
    assert len(joint) == 1 and joint[0]["success_after"] is True
    # the decision node's own fix flipped the run too, but a single fix of any agent did not
    outcomes = {r["intervention_step"]: r["success_after"] for r in wh.rows(
        "SELECT intervention_step, success_after FROM replays WHERE intervention_kind = 'fix' "
        "AND intervention_also IS NULL")}
    assert [outcomes[i] for i in agents] == [False] * 4 and True in outcomes.values()
    [q] = wh.rows("SELECT multi_step_labels FROM quality")
    assert q["multi_step_labels"] == 1


def test_a_budget_stopped_scan_is_unproven_earliest(prefect_harness, tmp_path, docker_sandbox, gsm):
    from rootstep.flows.annotate import counterfactual
    from rootstep.flows.collect import collect

    session_cm, model, agent_models, task, right = _ensemble_run(tmp_path, "ens-budget", gsm)
    name = _analyzer("causal-budget", lambda p, step: _fix(int(re.findall(r"\[step (\d+)\] decision", p)[-1]), "decision",
                                                          f"Weighed again.\nAnswer: {right}") if step is None else
                     _fix(step, re.search(rf"step {step} by (\w+)", p).group(1), f"Recomputed.\nAnswer: {right}"))
    with session_cm as session:
        [run] = collect(["agentprune"], tasks=[task], model=model, agent_models=agent_models, session=session).runs
        [done] = counterfactual(name, session=session, budget=Budget(max_candidates=1, max_replays=2)).runs
    assert (done.status, done.verified, done.agent) == ("unproven_earliest", False, "decision"), done
    wh = Warehouse(str(tmp_path))
    assert wh.rows("SELECT count(*) AS n FROM labels")[0]["n"] == 0
    [row] = wh.rows("SELECT * FROM unproven_earliest")
    assert any("earliest not established" in n for n in row["notes"])
    assert any("scan stopped" in n and "replay budget of 2 spent" in n for n in row["notes"])


def test_a_fix_that_hands_over_the_answer_at_the_first_agent_step_is_rejected(
        prefect_harness, tmp_path, docker_sandbox, gsm):
    from rootstep.flows.annotate import counterfactual
    from rootstep.flows.collect import collect

    session_cm, model, agent_models, task, right = _ensemble_run(tmp_path, "ens-leak", gsm, plan_first=True)
    asked: list[str] = []

    def analyzer(prompt: str, step: int | None) -> str:
        asked.append(prompt)
        if step is None and len([p for p in asked if _step_prompt(p) is None]) == 1:
            first = int(re.search(r"\[step (\d+)\] math_solver", prompt).group(1))
            return _fix(first, "math_solver", f"Plan: the total is {right}.\nAnswer: {right}")  # hands it over
        if step is None:
            return _fix(int(re.findall(r"\[step (\d+)\] decision", prompt)[-1]), "decision", f"Weighed.\nAnswer: {right}")
        if "Write a corrected version" in prompt:  # a step stating a wrong answer is asked for its correction
            agent = re.search(rf"STEP UNDER EXAMINATION: step {step} by (\w+)", prompt).group(1)
            return _fix(step, agent, f"I recomputed it.\nAnswer: {right}")
        return DECLINE

    name = _analyzer("causal-leak", analyzer)
    with session_cm as session:
        [run] = collect(["agentprune"], tasks=[task], model=model, agent_models=agent_models, session=session).runs
        [done] = counterfactual(name, session=session, budget=Budget(max_candidates=1)).runs
    assert "answer_leak" in asked[1] and "hand over the answer" in asked[1]  # re-asked with the reason
    wh = Warehouse(str(tmp_path))
    assert all(f"Plan: the total is {right}" not in (r["intervention_content"] or "")
               for r in wh.rows("SELECT intervention_content FROM replays"))
    [annotation] = wh.rows("SELECT * FROM annotations")
    assert annotation["answer_leaks"] == 1
    # the decision node's fix flips; the solvers that state the wrong answer are each corrected (alone they do
    # not flip it: the others still carry the error) and their joint fix does: a multi-step label
    assert done.status == "labelled" and done.verified
    [q] = wh.rows("SELECT answer_leaks FROM quality")
    assert q["answer_leaks"] == 1


# ------------------------------------------------------------------------------------------- no code


def test_a_run_with_no_code_in_its_answer_is_searched_not_suspect(prefect_harness, tmp_path, docker_sandbox):
    from rootstep.flows.annotate import counterfactual
    from rootstep.flows.collect import collect

    require_framework_image("ag2")
    [task] = T.team_tasks(limit=1)
    team = T.TASKS[0]
    register_script("nocode-coder", lambda m, p: "The function should square every number of the list.")
    register_script("nocode-critic", lambda m, p: "Looks right. TERMINATE")
    analyzer = _analyzer("causal-nocode", lambda p, step: _fix(1, "coder", T.ag2_message(team, team.good))
                         if step is None else DECLINE)
    wh_dir = str(tmp_path)
    [run] = collect(["ag2"], tasks=[task], model="scripted/nocode-coder", agent_models={"critic": "scripted/nocode-critic"},
                    warehouse=wh_dir).runs
    assert run.success is False
    wh = Warehouse(wh_dir)
    assert wh.rows("SELECT count(*) AS n FROM verdict_suspect")[0]["n"] == 0
    details = json.loads(wh.rows("SELECT verdict_details FROM runs")[0]["verdict_details"])
    assert details["failure"] == "no code in the final answer"
    [done] = counterfactual(analyzer, warehouse=wh_dir, budget=Budget(max_candidates=1)).runs
    assert (done.status, done.verified, done.agent, done.step) == ("labelled", True, "coder", 1), done
