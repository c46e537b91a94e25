"""A step whose answer is what its program prints, and the first to state the run's wrong answer, is corrected with
the task's answer in its program's output (`FixProposer.from_printed`), before the analyzer is asked (the grounded
phase of `find_decisive_step`).

The run is real (tests/fixtures/real_runs/ag2_gsm8k_test-474_program.json): AG2 on GSM8K test-474 from the main job of
2026-12-01, the agents on the 0.5B. The coder's step 1 plans in prose and writes a program that assumes 100 students
and prints `Answer: 25.0` (the answer is 80); the executor ran it, the critic and the coder went round it, and the
critic's program at step 6 printed 25.0 again. In that search the 1.5B analyzer's fixes of step 1 all printed 25.0
or stated 26.67 (its real answers are in the fixture): 5 analyzer calls, no replay, unresolved. The programs run in
the real Docker sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rootstep.annotation import Budget, ReplayOutcome, find_decisive_step
from rootstep.annotation._budget import Meter
from rootstep.annotation._propose import FixProposer, TaskContext
from rootstep.benchmarks import code_blocks, program_output, sandbox_runner, verify
from rootstep.gateway import Chat, register_script
from rootstep.model import Intervention, Recording, Step, Task, Trajectory, Usage, Verdict

pytestmark = pytest.mark.docker
DATA = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / "ag2_gsm8k_test-474_program.json").read_text())
TASK = Task.model_validate(DATA["task"])


@pytest.fixture(scope="module")
def runner(docker_sandbox):
    return sandbox_runner(docker_sandbox)


def real_run() -> Trajectory:
    steps = [Step.model_validate(s) for s in DATA["steps"]]
    return Trajectory(framework="ag2", benchmark="gsm8k", task_id=TASK.task_id, question=TASK.prompt,
                      ground_truth=TASK.ground_truth, steps=steps, final_answer=DATA["final_answer"],
                      verdict=verify(TASK, DATA["final_answer"]), recording=Recording(gateway_run_id="real", task=TASK))


def proposer(run: Trajectory, runner: Any, task: Task = TASK) -> FixProposer:
    return FixProposer(run, run.verdict, TaskContext(question=run.question, ground_truth=task.ground_truth, task=task),
                       lambda *a, **k: "", Meter(Budget()), [], [], 24_000, lambda t, a: verify(t, a), runner, None)


def test_the_programs_printed_answer_is_replaced_and_the_prose_kept(runner):
    run = real_run()
    coder = run.steps[1]
    assert program_output(coder.content, runner) == "Answer: 25.0"
    p = proposer(run, runner)
    assert p.wrong_answer(coder.content) == "25.0" and p.first_stated(coder)
    fixed = p.from_answer(coder)
    assert fixed is not None
    [block] = [b for b in code_blocks(fixed) if b.python]
    assert block.code.strip() == "print('Answer: 80')"
    assert program_output(fixed, runner) == "Answer: 80"
    assert fixed.startswith(coder.content[:code_blocks(coder.content)[0].start])  # the coder's plan before it, kept
    assert p.fix_problem(coder, fixed) is None  # it gave a (wrong) answer: the correction hands nothing over
    # the critic's program at step 6 prints the 25.0 the executor had printed already: not the first statement
    critic = run.steps[6]
    assert program_output(critic.content, runner) == "Answer: 25.0" and not p.first_stated(critic)
    assert p.from_answer(critic) is None


def test_without_a_runner_or_a_reference_answer_nothing_is_replaced(runner):
    run = real_run()
    assert proposer(run, None).from_printed(run.steps[1], "Answer: 25.0", "80") is None  # the program not run: no wrong answer read
    blank = TASK.model_copy(update={"ground_truth": ""})
    assert proposer(run, runner, blank).from_answer(run.steps[1]) is None


def test_the_search_labels_the_coders_program_with_no_analyzer_call(runner):
    """The search that ended unresolved after 5 analyzer calls: the coder's step 1 is corrected first, its
    control replayed beside it; with the program printing 80 the team carries the answer (scripted as the 0.5B team
    would end: the critic's TERMINATE after the executor's output), the control fails, and coder@1 is the label with
    no analyzer call."""
    run = real_run()
    prompts: list[str] = []

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        return DATA["analyzer_answers"][0]["answer"]

    register_script("printed-answer", analyzer)
    replayed: list[Intervention] = []

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        replayed.append(i)
        if i.kind == "fix" and program_output(i.new_content, runner) == "Answer: 80":
            steps = [*run.steps[:1], run.steps[1].model_copy(update={"content": i.new_content}),
                     Step(index=2, agent="executor", kind="tool", content="exitcode: 0 (execution succeeded)\nCode output: Answer: 80"),
                     Step(index=3, agent="critic", kind="agent", content="The answer is 80. TERMINATE", call_ids=["c3"])]
            final = "The answer is 80. TERMINATE"
            done = run.model_copy(update={"steps": steps, "final_answer": final, "parent_run_id": run.id})
            return done, verify(TASK, final), ReplayOutcome(cost=Usage(llm_calls=1))
        assert run.verdict is not None
        return run, run.verdict, ReplayOutcome(cost=Usage(llm_calls=11))

    result = find_decisive_step(run, analyzer=Chat("scripted/printed-answer"), replay=replay, budget=Budget(),
                                verify=lambda t, a: verify(t, a), run_program=runner)
    a = result.annotation
    assert (a.status, a.agent, a.step, a.earliest) == ("labelled", "coder", 1, "established")
    assert prompts == [] and a.search_stats.analyzer_calls == 0
    assert sorted((i.step, i.kind) for i in replayed) == [(1, "control"), (1, "fix")]
    d = result.attempts[0].diagnosis
    assert (d.source, d.written) == ("grounded", "answer")
    assert a.evidence.reason == "it is the first step to state the wrong answer '25.0'"
    assert any("its wrong answer replaced by the task's reference answer" in n for n in a.evidence.notes)


def test_a_failed_grounded_correction_leaves_the_search_to_the_analyzer(runner):
    """When the team does not carry the corrected answer, the search goes on as before: the analyzer's ranked
    answer (its real one, a described change of step 1) is asked, and the grounded attempt is among what it is told
    failed."""
    run = real_run()
    prompts: list[str] = []

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        return json.dumps({"fix_needed": False, "reason": "fine"}) if "STEP UNDER EXAMINATION" in prompts[-1] \
            else DATA["analyzer_answers"][0]["answer"]

    register_script("printed-answer-failed", analyzer)

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        assert run.verdict is not None
        return run, run.verdict, ReplayOutcome(cost=Usage(llm_calls=11))

    result = find_decisive_step(run, analyzer=Chat("scripted/printed-answer-failed"), replay=replay,
                                budget=Budget(max_candidates=1, max_reasks=0), verify=lambda t, a: verify(t, a),
                                run_program=runner)
    assert result.attempts[0].diagnosis.source == "grounded" and result.attempts[0].success is False
    tested = prompts[0][prompts[0].index("CORRECTIONS ALREADY TESTED"):]  # the ranked question shows the failed correction
    assert tested.splitlines()[1].startswith("- step 1 (coder): fix") and "still failed" in tested
    assert result.annotation.status == "unresolved"


def test_a_corrected_program_gets_its_claimed_output_and_its_prose_box_corrected_too(runner):
    """AG2 on MATH-500 precalculus/356 (seed-53 slice, 2026-12-04; tests/fixtures/real_runs/ag2_math500_precalculus_356.json):
    the critic's step 3 is a sympy program printing the projection (`y = 4*x/5 + ...`), a hallucinated ```output
    block and a prose `\\boxed{y = 2x + y}`. Its correction replaced only the program (`print('y = -2x')`): the box
    still gave the old answer, the 0.5B coder copied it at step 4, the correction "failed", and the label went to the
    coder's restatement at step 4. The corrected step states the right answer everywhere it states one."""
    data = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / "ag2_math500_precalculus_356.json").read_text())
    task = Task.model_validate(data["task"])
    steps = [Step.model_validate(s) for s in data["steps"]]
    run = Trajectory(framework="ag2", benchmark="math500", task_id=task.task_id, question=task.prompt,
                     ground_truth=task.ground_truth, steps=steps, final_answer=data["final_answer"],
                     verdict=verify(task, data["final_answer"]), recording=Recording(gateway_run_id="real", task=task))
    p = proposer(run, runner, task)
    critic = steps[3]
    assert "\\boxed{y = 2x + y}" in critic.content and "```output\ny = 2x + y" in critic.content
    assert p.wrong_answer(critic.content) is not None and p.first_stated(critic)
    fixed = p.from_answer(critic)
    assert fixed is not None
    [block] = [b for b in code_blocks(fixed) if b.python]
    assert block.code.strip() == "print('y = -2x')"
    assert "\\boxed{y = -2x}" in fixed and "2x + y" not in fixed  # the prose box and the claimed output follow the program
    assert fixed.startswith("```python\n") and p.fix_problem(critic, fixed) is None
    prose_only = "The equation of the line is \\(\\boxed{y = 2x + y}\\)."
    assert p.prose_corrected(prose_only, "y = -2x") == "The equation of the line is \\(\\boxed{y = -2x}\\)."
    assert p.prose_corrected("No answer stated here.", "y = -2x") == "No answer stated here."
