"""A review that approves right after the team's checks failed is not a correct step: the analyzer is asked for its
correction, not whether it is correct (`FixProposer.approves_failure`).

On the seed-31 slice (2026-12-02, bench/RESULTS.md) MetaGPT on MATH-500 572 ended with the reviewer's step 4 `APPROVED`
right after the runner's SyntaxError; the 1.5B judged it correct and the search ended with no label. The run here is
real up to its runner (tests/fixtures/real_runs/metagpt_humanevalplus_127.json, MetaGPT on HumanEval/127 from the same
slice: the runner's step 3 reports `exit code 1` and the AssertionError); its reviewer's step 4 is that `APPROVED`, the
reviewer's whole reply when it approves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rootstep.annotation import Budget, Meter, TaskContext
from rootstep.annotation._propose import FixProposer
from rootstep.benchmarks import load_tasks
from rootstep.gateway import Chat, register_script
from rootstep.model import Recording, Step, Trajectory

DATA = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / "metagpt_humanevalplus_127.json").read_text())
TASK = next(t for t in load_tasks("humanevalplus") if t.task_id == DATA["task_id"])


def run_with(reviewer: str, runner: str | None = None) -> Trajectory:
    steps = [Step.model_validate(s) for s in DATA["steps"][:5]]
    steps[4] = steps[4].model_copy(update={"content": reviewer})
    if runner is not None:
        steps[3] = steps[3].model_copy(update={"content": runner})
    return Trajectory(framework="metagpt", benchmark="humanevalplus", task_id=TASK.task_id, question=TASK.prompt,
                      steps=steps, final_answer=DATA["final_answer"], recording=Recording(gateway_run_id="real", task=TASK))


def proposer(run: Trajectory, analyzer: Any = None) -> FixProposer:
    chat = analyzer if analyzer is not None else (lambda *a, **k: "")
    return FixProposer(run, None, TaskContext(question=TASK.prompt, task=TASK), chat, Meter(Budget()), [], [], 24_000,
                       None, None, None)


def test_the_real_runner_step_failed():
    assert DATA["steps"][3]["agent"] == "runner" and DATA["steps"][3]["content"].startswith("exit code 1\n")


def test_an_approval_after_a_failed_run_is_asked_for_its_correction():
    prompts: list[str] = []
    fix = "The tests fail: intersection((-1, 1), (0, 4)) must be 'NO'. The engineer must fix the prime-length check."

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        return json.dumps({"mistake_step": 4, "mistake_agent": "reviewer", "reason": "it approved failing tests",
                           "suggested_fix": fix})

    register_script("approval-after-failure", analyzer)
    run = run_with("APPROVED")
    propose = proposer(run, Chat("scripted/approval-after-failure"))
    diagnosis, why = propose.ask_at(run.steps[4], [], set(), require_fix=False, source="sequential")
    assert why is None and diagnosis is not None and not diagnosis.declined and diagnosis.fix == fix
    assert "Write a corrected version of step 4" in prompts[0] and "fix_needed" not in prompts[0]
    assert any("step 4 (reviewer) approves after step 3's failed run (exit code 1)" in n for n in propose.notes)


def test_an_approval_after_a_passing_run_or_a_request_for_changes_may_be_judged_correct():
    assert proposer(run_with("APPROVED", runner="exit code 0")).approves_failure(run_with("APPROVED").steps[4]) is None
    changes = run_with(DATA["steps"][4]["content"])  # the real reviewer: "The engineer must change the code ..."
    assert proposer(changes).approves_failure(changes.steps[4]) is None


def test_a_timeout_is_a_failed_run():
    run = run_with("APPROVED", runner="timed out")
    assert proposer(run).approves_failure(run.steps[4]) == "step 3's failed run (timed out)"


SENT_BACK = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / "metagpt_humanevalplus_144.json").read_text())
"""MetaGPT on HumanEval/144 (seed-43 slice, 2026-12-03): the coder's step 1 returns `product % 1 == 0`, the runner's
step 3 reports the AssertionError, the reviewer's step 4 asks for a change. The 1.5B said step 4 needed a fix, its
retakes ran to their token limit, and the step was left open: the scan stopped there."""


def sent_back_run(coder: str | None = None) -> tuple[Trajectory, FixProposer]:
    from rootstep.sandboxes import get_sandbox
    from rootstep.benchmarks import verify

    task = next(t for t in load_tasks("humanevalplus") if t.task_id == SENT_BACK["task_id"])
    steps = [Step.model_validate(s) for s in SENT_BACK["steps"]]
    if coder is not None:
        steps[1] = steps[1].model_copy(update={"content": coder})
    run = Trajectory(framework="metagpt", benchmark="humanevalplus", task_id=task.task_id, question=task.prompt,
                     steps=steps, final_answer=SENT_BACK["final_answer"], recording=Recording(gateway_run_id="real", task=task))
    local = get_sandbox("local", allow_local=True)

    def no_analyzer(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("the analyzer is not asked about a review that sent failing code back")

    return run, FixProposer(run, None, TaskContext(question=task.prompt, task=task), no_analyzer, Meter(Budget()), [], [],
                            24_000, lambda t, a: verify(t, a, sandbox=local), None, None)


def test_a_review_that_sends_failing_code_back_is_cleared_with_no_call():
    run, propose = sent_back_run()
    assert run.steps[3].content.startswith("exit code 1") and "APPROVED" not in run.steps[4].content
    diagnosis, why = propose.ask_at(run.steps[4], [], set(), require_fix=False, source="earlier")
    assert why is None and diagnosis is not None and diagnosis.declined
    assert "asks for a change after step 3's failed run (exit code 1), on step 1's code" in diagnosis.reason


def test_a_review_after_a_passing_run_or_of_passing_code_is_the_analyzers():
    run, propose = sent_back_run()
    assert run.steps[7].content.startswith("exit code 0")
    assert propose.sends_back_failing(run.steps[8]) is None  # after the passing run of step 7: not cleared here
    reference = next(t for t in load_tasks("humanevalplus") if t.task_id == SENT_BACK["task_id"]).metadata["reference_solution"]
    right, on_right = sent_back_run(coder=f"```python\n{reference}\n```")
    assert on_right.sends_back_failing(right.steps[4]) is None  # the code it sent back passes the task's tests
