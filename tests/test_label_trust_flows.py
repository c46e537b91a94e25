"""Label trust end to end (issue 13), on real frameworks in Docker with scripted agents and real Prefect.

* AG2 on the MATH-500 task of the issue: a run whose only "error" is the answer's form is marked
  `verdict_suspect` and left out of counterfactual search; searched anyway (`include_suspect`), the
  analyzer's re-formatting fix (its words copied from the real analyzer's reply) succeeds but produces no
  label: status `verifier_suspect`.
* A self-correcting team (tests/_team_support.py) on a real MBPP+ task, AG2 and smolagents: a blind
  one-shot corruption is corrected by the team; team-aware injection at the coder's first step is
  rewritten away too; persistent injection flips it, labelled at the first corrupted step.
"""

from __future__ import annotations

import json

import pytest

from rootstep.gateway import register_script
from rootstep.benchmarks import load_tasks
from rootstep.annotation import Budget
from rootstep.warehouse import Warehouse

from . import _team_support as T
from ._adapter_support import require_framework_image

pytestmark = pytest.mark.docker

# The analyzer's reply on this run, as the issue quotes it from a capable model through hand-model.
REAL_ANALYZER_REPLY = json.dumps({
    "mistake_step": 1, "mistake_agent": "coder",
    "reason": "The mathematics is correct, but the verifier reported 'no answer found': the coder should also "
              "state the final answer in the standard \\boxed{} form.",
    "suggested_fix": "We need $x - 1 \\ge 0$ and $x \\ne 2$, so the domain starts at $x = 1$.\n\n"
                     "```python\nprint(min(x for x in range(-10, 10) if x >= 1 and x != 2))\n```\n\n"
                     "The smallest such integer is $\\boxed{1}$.",
})
# The coder's program checks its reasoning but prints nothing, and its prose states x=1 with no box or answer
# line: the verifier finds no answer. (The issue's own run printed the 1; since AG2's `Code output:` label is
# dropped from what a program printed, the verifier reads that 1 and the run is a success, as it should be.)
FORMAT_ONLY_CODER = ("We need $x - 1 \\ge 0$ and $x \\ne 2$, so the domain starts at $x = 1$.\n\n"
                     "```python\nassert all(x - 1 >= 0 and x != 2 for x in [1])\n```\n\n"
                     "The smallest such integer is x=1, which is in the domain.")


def _math_task():
    [task] = [t for t in load_tasks("math500") if "sqrt{x-1}}{x-2}" in t.prompt]
    return task


def test_format_only_failure_gives_no_label(prefect_harness, tmp_path, docker_sandbox):
    from rootstep.flows.annotate import counterfactual
    from rootstep.flows.collect import collect

    require_framework_image("ag2")
    task = _math_task()
    assert task.ground_truth == "1"
    register_script("trust-ag2-coder", lambda messages, params: FORMAT_ONLY_CODER)
    register_script("trust-ag2-critic", lambda messages, params: "The reasoning and the check agree. TERMINATE")
    register_script("trust-analyzer", lambda messages, params: REAL_ANALYZER_REPLY)
    wh_dir = str(tmp_path)
    report = collect(["ag2"], tasks=[task], model="scripted/trust-ag2-coder",
                     agent_models={"critic": "scripted/trust-ag2-critic"}, warehouse=wh_dir)
    [collected] = report.runs
    assert collected.success is False
    wh = Warehouse(wh_dir)
    [suspect] = wh.rows("SELECT * FROM verdict_suspect")
    assert suspect["run_id"] == collected.run_id and "no answer" in suspect["reason"]

    skipped = counterfactual("scripted/trust-analyzer", warehouse=wh_dir, budget=Budget(max_replays=2))
    assert skipped.runs == []  # not queued: the verdict may be the verifier's misreading
    assert wh.count("annotations") == 0
    from rootstep.flows.pipeline import pipeline

    # the pipeline's summary names it (it has no annotation to count: the queue left it out)
    piped = pipeline(["ag2"], tasks=[task], model="scripted/trust-ag2-coder",
                     agent_models={"critic": "scripted/trust-ag2-critic"}, analyzer_model="scripted/trust-analyzer",
                     warehouse=wh_dir, inject=False, budget=Budget(max_replays=2))
    assert [r.cached for r in piped.collected] == [True] and piped.annotated == []
    assert [(o.run_id, o.framework) for o in piped.left_out] == [(collected.run_id, "ag2")]
    assert piped.counts()["verdict_suspect"] == 1
    assert (f"left out as a suspect verdict ag2/{task.task_id} ({collected.run_id}): {suspect['reason']}; "
            f"search it anyway: rootstep annotate --run-id {collected.run_id} --include-suspect") in piped.render()
    assert wh.count("annotations") == 0

    searched = counterfactual("scripted/trust-analyzer", warehouse=wh_dir, include_suspect=True,
                              budget=Budget(max_replays=2, max_llm_calls=4, max_candidates=1))
    [done] = searched.runs
    assert done.status == "verifier_suspect" and not done.verified and done.agent is None
    assert wh.rows("SELECT count(*) AS n FROM labels")[0]["n"] == 0
    [annotation] = wh.rows("SELECT * FROM verifier_suspect")
    assert "only its presentation changed" in annotation["reason"]
    [replay] = wh.rows("SELECT * FROM replays WHERE run_id = ?", [collected.run_id])
    assert (replay["success_before"], replay["success_after"]) == (False, True)  # the re-format did "succeed"
    quality = wh.rows("SELECT * FROM quality WHERE framework = 'ag2'")[0]
    assert (quality["failures"], quality["suspect_verdicts"], quality["counterfactual_labels"],
            quality["verifier_suspect"]) == (1, 1, 0, 1)
    from typer.testing import CliRunner

    from rootstep.cli import app

    printed = CliRunner().invoke(app, ["quality", "-w", wh_dir], env={"COLUMNS": "250"})
    assert printed.exit_code == 0, printed.output
    assert "ag2" in printed.output and "math500" in printed.output and "no answer" in printed.output


@pytest.fixture(scope="module", params=["ag2", "smolagents"])
def team_run(request, prefect_harness, tmp_path_factory, docker_sandbox):
    """One success of the simulated self-correcting team on MBPP+ Mbpp/8, collected."""
    from rootstep.flows.collect import collect

    framework = request.param
    require_framework_image(framework)
    T.register_team()
    wh_dir = str(tmp_path_factory.mktemp(f"team-{framework}"))
    model, agent_models = T.TEAM_MODELS[framework]
    [task] = T.team_tasks(limit=1)
    [run] = collect([framework], tasks=[task], model=model, agent_models=agent_models, warehouse=wh_dir).runs
    assert run.success is True, run
    return {"framework": framework, "warehouse": wh_dir, "run_id": run.run_id}


def _inject_pure(team_run, mode: str, perturber: str, budget: Budget):
    from rootstep.annotation import inject_fault
    from rootstep.flows._session import open_session
    from rootstep.flows._searches import annotator_chat as _chat, search_replay as _replay_fn

    with open_session(team_run["warehouse"]) as session:
        run = session.warehouse.trajectory(team_run["run_id"])
        adapter = session.adapter(run.framework)
        return inject_fault(run, _chat(session, perturber, None, run, "perturber"), _replay_fn(session, run, []), budget,
                            programmatic=False, mode=mode, answer_agents=adapter.answer_agents)


def test_a_blind_one_shot_corruption_is_corrected_by_the_team(team_run):
    result = _inject_pure(team_run, "one_shot", T.PERTURBERS["one_shot"], Budget(max_candidates=1, max_replays=1))
    [attempt] = result.attempts
    assert attempt.replay.success_after is True and not result.flipped


def _first_coder_replays(team_run):
    """The edge bug forced at the coder's first step, replayed one-step and persistent."""
    from rootstep.flows._session import open_session
    from rootstep.flows._searches import search_replay as _replay_fn
    from rootstep.model import Intervention

    first_coder = {"ag2": 1, "smolagents": 2}[team_run["framework"]]
    task = T.TASKS[0]
    with open_session(team_run["warehouse"]) as session:
        run = session.warehouse.trajectory(team_run["run_id"])
        assert run.steps[first_coder].agent == "coder"
        content = T.ag2_message(task, task.edge_bug) if run.framework == "ag2" else T.smol_code_step(task, task.edge_bug)
        replay = _replay_fn(session, run, [])
        outcomes = {}
        for mode, persist in (("one_step", None), ("persistent", task.instruction)):
            result, verdict, outcome = replay(Intervention(run_id=run.id, step=first_coder, new_content=content,
                                                           kind="corruption", persist=persist))
            calls = session.gateway.calls(result.recording.gateway_run_id)
            outcomes[mode] = (verdict.success, result, calls, outcome)
        return outcomes


def test_the_team_rewrites_a_one_step_edge_bug_but_not_a_persistent_one(team_run):
    outcomes = _first_coder_replays(team_run)
    success, result, calls, outcome = outcomes["one_step"]
    assert success is True and outcome.cost.llm_calls > 0  # the re-check made the coder write its own solution again
    success, result, calls, outcome = outcomes["persistent"]
    assert success is False and "i * abs(i)" in result.final_answer  # it kept the mistake through the re-check
    live_coder = [c for c in calls if c.agent == "coder" and c.mode == "live"]
    assert live_coder and all(T.TASKS[0].instruction in str(c.request) for c in live_coder)
    assert all(T.TASKS[0].instruction not in str(c.request) for c in calls if c.agent != "coder")


def test_auto_injection_labels_the_self_correcting_team(team_run):
    """The pipeline's default: team-aware at points spread over the run, persistent where the team corrected
    it; which coder step carries the label depends on the seeded order of the points."""
    from rootstep.flows.annotate import inject

    report = inject(T.PERTURBERS["auto"], warehouse=team_run["warehouse"], inject_mode="auto", programmatic=False,
                    budget=Budget(max_candidates=4, max_replays=6, max_llm_calls=10))
    [done] = report.runs
    assert done.status == "labelled" and done.verified and done.agent == "coder", done
    wh = Warehouse(team_run["warehouse"])
    label = wh.label(done.labelled_run_id)
    first_coder = {"ag2": 1, "smolagents": 2}[team_run["framework"]]
    if done.step == first_coder:  # there, one step is rewritten away: only the persistent replay flips it
        assert done.mode == "persistent" and label.metadata["persist"] == T.TASKS[0].instruction
        assert "persistent injection" in label.evidence.notes[0]
    corrupted = wh.trajectory(done.labelled_run_id)
    assert corrupted.success is False and corrupted.parent_run_id == team_run["run_id"]
    assert "i * abs(i)" in corrupted.final_answer
    assert label.metadata["points"][-1] >= done.step  # the answer step closes the points
