"""A step that first states the run's wrong answer, whose every written fix is refused, is corrected with the task's
reference answer in place of its own (`FixProposer.from_answer`, `first_stated`, `answered`): the math counterpart of
the reference-solution correction of failing code.

The run is real: AG2 on GSM8K test-1101 (Ahito ran 16 miles) from the main job of 2026-11-29 and again of
2026-11-30, the agents on the 0.5B. The coder's step 1 works out `36 - 8 = 28` in prose and boxes 28, the first
statement of the team's wrong answer; the critic's step 6 boxes the same 28 after the executor printed `28.0`. The
fix the 1.5B analyzer wrote of steps 6, 7 and 9 (`The code output is correct. The number of miles Ahito ran is
28.`) restates the answer, so it is refused; scripted here as its fix of step 1 too, it leaves step 1 without an
accepted fix, where the search used to leave the step open and stop."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rootstep.annotation import Budget, Meter, ReplayOutcome, TaskContext, find_decisive_step
from rootstep.annotation._propose import FixProposer
from rootstep.benchmarks import verify
from rootstep.gateway import Chat, register_script
from rootstep.model import Intervention, Step, Task, Trajectory, Usage, Verdict

REAL = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / "ag2_gsm8k_test-1101.json").read_text())
RESTATED = REAL["analyzer_fixes"]["6"]  # the 1.5B's real fix: the team's wrong 28 in prose


def _run(task: Task) -> Trajectory:
    steps = [Step.model_validate(s) for s in REAL["steps"]]
    final = REAL["final_answer"] + "\n\nProgram output:\n28.0"
    verdict = verify(task, final)
    assert not verdict.success
    return Trajectory(framework="ag2", benchmark="gsm8k", task_id=task.task_id, question=task.prompt,
                      ground_truth=task.ground_truth, steps=steps, final_answer=final, verdict=verdict,
                      recording={"gateway_run_id": "real", "task": task})


@pytest.fixture()
def run() -> Trajectory:
    return _run(Task.model_validate(REAL["task"]))


def _analyzer(name: str, run: Trajectory, ranked_step: int, prompts: list[str]) -> Chat:
    def answer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        m = re.search(r"STEP UNDER EXAMINATION: step (\d+)", prompts[-1])
        step = ranked_step if m is None else int(m.group(1))
        return json.dumps({"fix_needed": True, "mistake_step": step, "mistake_agent": run.steps[step].agent,
                           "reason": "the answer is wrong", "suggested_fix": RESTATED})

    register_script(name, answer)
    return Chat(f"scripted/{name}")


def _replay(run: Trajectory, replayed: list[Intervention]):
    task = Task.model_validate(REAL["task"])

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        replayed.append(i)
        if i.kind == "fix" and "\\boxed{16}" in i.new_content:  # the team carries the corrected answer to the end
            answer = "The number of miles Ahito ran is 16.\n\nAnswer: 16"
            return run.model_copy(update={"final_answer": answer}), verify(task, answer), ReplayOutcome(cost=Usage(llm_calls=1))
        assert run.verdict is not None
        return run, run.verdict, ReplayOutcome(cost=Usage(llm_calls=1))

    return replay


def test_the_first_step_to_state_the_wrong_answer_is_corrected_with_the_reference_answer(run: Trajectory):
    """Step 1 is the first to state 28: with no analyzer call its boxed 28 becomes 16, the rest of its message kept,
    the replay flips, the control fails: coder@1. The critic's step 6, which repeats the coder's 28, is never given
    the reference answer."""
    assert "\\boxed{28}" in run.steps[1].content and "\\boxed{28}" in run.steps[6].content
    prompts: list[str] = []
    replayed: list[Intervention] = []
    result = find_decisive_step(run, analyzer=_analyzer("first-wrong-answer", run, 6, prompts),
                                replay=_replay(run, replayed), budget=Budget(max_reasks=0),
                                verify=lambda t, a: verify(t, a))
    annotation = result.annotation
    assert annotation.status == "labelled" and (annotation.agent, annotation.step) == ("coder", 1), result.notes
    fix = next(i for i in replayed if i.kind == "fix" and i.step == 1)
    assert fix.new_content == run.steps[1].content.replace("\\boxed{28}", "\\boxed{16}")
    assert not any(i.kind == "fix" and i.step == 6 for i in replayed)  # the critic only repeated the coder's 28
    assert any(i.kind == "control" and i.step == 1 for i in replayed)
    assert any("first states the wrong answer '28'" in n and "the analyzer not asked" in n for n in result.notes), result.notes
    assert not any("STEP UNDER EXAMINATION: step 1 by" in p for p in prompts)  # the verifier judged it, not the analyzer
    assert any("its wrong answer replaced by the task's reference answer" in n for n in annotation.evidence.notes)


def test_the_first_step_to_state_the_wrong_answer_gets_the_answer_before_the_analyzer_is_asked(run: Trajectory):
    """The ranked answer would name step 1 with a fix of its own that states no answer (the 1.5B's real "divide by
    3.5" fix of this run, replayed and failed on 2026-11-30). Step 1 is the first to state 28, so before the analyzer
    is asked it gets 16 in its place (the grounded phase), replayed with its control beside it: the flip is the label,
    and the analyzer is never asked (on the main job of 2026-12-01 such a search spent 5 analyzer calls and no
    replay)."""
    prompts: list[str] = []
    replayed: list[Intervention] = []

    def answer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        return json.dumps({"fix_needed": True, "mistake_step": 1, "mistake_agent": "coder", "reason": "wrong ratio",
                           "suggested_fix": REAL["analyzer_fixes"]["1"]})

    register_script("tried-then-answered", answer)
    result = find_decisive_step(run, analyzer=Chat("scripted/tried-then-answered"), replay=_replay(run, replayed),
                                budget=Budget(max_reasks=0, max_candidates=1), verify=lambda t, a: verify(t, a))
    fixes = [(i.step, "\\boxed{16}" in i.new_content) for i in replayed if i.kind == "fix"]
    assert fixes == [(1, True)], fixes  # the reference answer at step 1, first
    assert (result.annotation.status, result.annotation.agent, result.annotation.step) == ("labelled", "coder", 1)
    assert [a.diagnosis.source for a in result.attempts] == ["grounded"]
    assert prompts == [] and result.annotation.search_stats.analyzer_calls == 0
    assert result.annotation.evidence.reason == "it is the first step to state the wrong answer '28'"


def _proposer(run: Trajectory, task: Task) -> FixProposer:
    return FixProposer(run, run.verdict, TaskContext(question=run.question, ground_truth=task.ground_truth, task=task),
                       lambda *a, **k: "", Meter(Budget()), [], [], 24_000, lambda t, a: verify(t, a), None, None)


def test_only_the_first_statement_of_the_wrong_answer_is_corrected(run: Trajectory):
    """The coder's step 1 first states 28; the critic's step 6 and the coder's step 7 repeat it after the executor
    printed `28.0` (step 5): only step 1 gets the reference answer; a plan or a program step states none."""
    task = Task.model_validate(REAL["task"])
    proposer = _proposer(run, task)
    assert proposer.first_stated(run.steps[1]) and proposer.from_answer(run.steps[1]) is not None
    for index in (6, 7):
        assert proposer.wrong_answer(run.steps[index].content) == "28"
        assert not proposer.first_stated(run.steps[index]) and proposer.from_answer(run.steps[index]) is None
    assert proposer.from_answer(run.steps[3]) is None  # the critic's program: no marked answer to replace
    # the marked 28 is the one replaced, not a later 28 of the prose
    later = run.steps[1].model_copy(update={"content": run.steps[1].content + " So Ahito ran 28 miles."})
    assert proposer.from_answer(later) == later.content.replace("\\boxed{28}", "\\boxed{16}")
    assert proposer.from_answer(run.steps[2]) is None  # the executor's tool step


def test_no_reference_answer_no_correction(run: Trajectory):
    """A task without a ground truth (a user's own benchmark): nothing to put in the step's place."""
    task = Task.model_validate({**REAL["task"], "ground_truth": ""})
    assert _proposer(run, task).from_answer(run.steps[1]) is None


def test_a_tried_step_with_nothing_left_to_try_does_not_count_as_a_cut(run: Trajectory):
    """Step 1's correction with the task's answer (grounded) and its ranked fix, which stated the right 16 too, were
    replayed and failed here; the critic's step 3 then flips, and the replay budget is spent. The scan before step 3
    meets only step 1, tried with a right answer: nothing is left to replay there, so nothing was stopped, and the
    search reports no cut and the earliest step established."""
    answers = iter([(1, "Let me recompute.\nAnswer: 16"), (3, "```python\nahito = 52 - 8 - 28\nprint(ahito)\n```")])
    replayed: list[Intervention] = []

    def answer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        step, fix = next(answers, (3, "unused"))
        return json.dumps({"fix_needed": True, "mistake_step": step, "mistake_agent": run.steps[step].agent,
                           "reason": "the answer is wrong", "suggested_fix": fix})

    register_script("nothing-left-to-try", answer)
    task = Task.model_validate(REAL["task"])

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        replayed.append(i)
        if i.kind == "fix" and i.step == 3:
            final = "Answer: 16"  # the grounded \\boxed{16} of step 1 fails in this team
            return run.model_copy(update={"final_answer": final}), verify(task, final), ReplayOutcome(cost=Usage(llm_calls=1))
        assert run.verdict is not None
        return run, run.verdict, ReplayOutcome(cost=Usage(llm_calls=1))

    result = find_decisive_step(run, analyzer=Chat("scripted/nothing-left-to-try"), replay=replay,
                                budget=Budget(max_reasks=0, max_candidates=2, max_replays=4),
                                verify=lambda t, a: verify(t, a))
    a = result.annotation
    assert (a.status, a.agent, a.step) == ("labelled", "critic", 3), result.notes
    assert [(i.step, i.kind) for i in replayed if i.kind == "fix"] == [(1, "fix"), (1, "fix"), (3, "fix")]
    assert [x.diagnosis.source for x in result.attempts] == ["grounded", "ranked", "ranked"]
    assert a.cost.replays == 5  # step 1's answer and its control, its ranked fix, step 3's flip and its control
    assert a.search_stats.cut_by is None, (a.search_stats, result.notes, a.earliest)


def test_a_step_that_states_the_wrong_answer_again_gets_the_answer_once_the_earlier_ones_were_tried(run: Trajectory):
    """Step 1's correction with the task's answer (grounded) is replayed and fails: this team does not carry it. The
    analyzer judges the programs of steps 3 and 4 correct (the 1.5B's kind of answer), and its fix of the critic's
    step 6, which boxes 28 again, restates 28 (the real one). Step 6 states 28 only after steps the search has
    tried, so it is corrected with 16 in its place, no fix of the analyzer's needed; the replay flips, the control
    fails: critic@6, every earlier agent step tried or judged correct. The seed-31 slice's smolagents MATH-500 572
    ended unresolved here: its manager's re-statement of 108 got only the 1.5B's fixes stating 108."""
    task = Task.model_validate(REAL["task"])
    replayed: list[Intervention] = []

    def answer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        m = re.search(r"STEP UNDER EXAMINATION: step (\d+)", messages[-1]["content"])
        if m is not None and int(m.group(1)) in (3, 4):
            return json.dumps({"fix_needed": False, "reason": "the program follows the plan"})
        return json.dumps({"fix_needed": True, "mistake_step": 6, "mistake_agent": "critic",
                           "reason": "the answer is wrong", "suggested_fix": RESTATED})

    register_script("restated-wrong-answer", answer)

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        replayed.append(i)
        if i.kind == "fix" and i.step == 6 and "\\boxed{16}" in i.new_content:
            final = "The number of miles Ahito ran is 16.\n\nAnswer: 16"
            return run.model_copy(update={"final_answer": final}), verify(task, final), ReplayOutcome(cost=Usage(llm_calls=1))
        assert run.verdict is not None
        return run, run.verdict, ReplayOutcome(cost=Usage(llm_calls=1))

    result = find_decisive_step(run, analyzer=Chat("scripted/restated-wrong-answer"), replay=replay,
                                budget=Budget(max_reasks=0, max_candidates=1), verify=lambda t, a: verify(t, a))
    a = result.annotation
    assert (a.status, a.agent, a.step) == ("labelled", "critic", 6), result.notes
    fixes = [(i.step, i.new_content) for i in replayed if i.kind == "fix"]
    assert fixes == [(1, run.steps[1].content.replace("\\boxed{28}", "\\boxed{16}")),
                     (6, run.steps[6].content.replace("\\boxed{28}", "\\boxed{16}"))], fixes
    assert any(i.kind == "control" and i.step == 6 for i in replayed)
    assert a.evidence.reason == ("it states the wrong answer '28' again after the earlier steps that stated it were tried "
                                 "(their corrections failed or were not the cause)")
    assert any("step 6 (critic) states again the wrong answer '28'" in n for n in result.notes), result.notes
    assert [d.step for d in result.declined] == [3, 4]  # judged correct; step 1 was replayed: nothing before 6 open


def test_a_restatement_counts_as_first_only_past_the_tried_steps(run: Trajectory):
    """`first_stated` with the steps already tried left out: the critic's step 6 repeats the coder's 28 of step 1
    (and of the executor's `28.0`, printed by step 4's program, step 5); with steps 1 and 4 passed it is the first
    statement left, with only step 1 passed the executor's output after step 4 still states it first."""
    proposer = _proposer(run, Task.model_validate(REAL["task"]))
    assert not proposer.first_stated(run.steps[6], passed={1})
    assert proposer.first_stated(run.steps[6], passed={1, 3, 4})
    assert proposer.from_answer(run.steps[6], passed={1, 3, 4}) == run.steps[6].content.replace("\\boxed{28}", "\\boxed{16}")
    assert not proposer.first_stated(run.steps[7], passed={1, 3, 4})  # the critic's step 6 said it before
