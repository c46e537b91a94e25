"""On a coding task, code that fails the task's tests is neither a correct step nor a correction
(`_Search.failing_code`, the counterpart of `wrong_answer` for math): a step holding such code is asked for
its correction, not whether it is correct, and a fix whose code fails is refused and re-asked with the first
failing test before any replay.

The task is MBPP 310 from the shared data, verified by the real `code_tests` verifier in the local sandbox
(a subprocess: the code is this test's own). The coder's `tuple(s)` and the 1.5B's fixes `tuple(list(s))` and
`tuple(s)` are from the main job of 2026-11-28 (the search replayed both and stayed unresolved)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rootstep.annotation import Budget, ReplayOutcome, find_decisive_step
from rootstep.benchmarks import load_tasks, verify
from rootstep.gateway import register_script
from rootstep.sandboxes import get_sandbox
from rootstep.gateway import Chat
from rootstep.model import Intervention, Recording, Step, Task, Trajectory, Usage, Verdict

CODER = "```python\ndef string_to_tuple(s):\n    # Convert the string to a tuple of characters\n    return tuple(s)\n```"
FIX_LIST = "```python\ndef string_to_tuple(s):\n    return tuple(list(s))\n```"  # the 1.5B's second fix
FIX_RIGHT = "```python\ndef string_to_tuple(s):\n    return tuple(s.replace(' ', ''))\n```"


@pytest.fixture(scope="module")
def task() -> Task:
    return next(t for t in load_tasks("mbpp") if t.task_id == "310")


@pytest.fixture(scope="module")
def check(task: Task):
    sandbox = get_sandbox("local", allow_local=True)
    return lambda t, answer: verify(t, answer, sandbox=sandbox)


def run_of(task: Task, check, coder: str, critic: str = "TERMINATE") -> Trajectory:
    steps = [Step(index=0, agent="executor", kind="human", content=task.prompt),
             Step(index=1, agent="coder", kind="agent", content=coder, call_ids=["c1"]),
             Step(index=2, agent="executor", kind="tool", content="exitcode: 0 (execution succeeded)\nCode output: "),
             Step(index=3, agent="critic", kind="agent", content=critic, call_ids=["c3"])]
    verdict = check(task, coder)
    return Trajectory(framework="sim", benchmark="mbpp", task_id="310", question=task.prompt, steps=steps,
                      final_answer=coder, verdict=verdict, recording=Recording(gateway_run_id="r", task=task))


def analyzer(name: str, answers: list[str]) -> tuple[Chat, list[str]]:
    prompts: list[str] = []

    def fn(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        return answers[min(len(prompts) - 1, len(answers) - 1)]

    register_script(name, fn)
    return Chat(f"scripted/{name}"), prompts


def diag(step: int, agent: str, fix: str) -> str:
    return json.dumps({"mistake_step": step, "mistake_agent": agent, "reason": "the space is kept", "suggested_fix": fix})


def replayer(task: Task, check) -> tuple[Any, list[Intervention]]:
    """A replay callable whose run takes a fix of step 1 as the coder's code (the critic restates nothing), and the
    interventions it was given."""
    replays: list[Intervention] = []

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        replays.append(i)
        result = run_of(task, check, i.new_content if i.step == 1 else CODER)
        assert result.verdict is not None
        return result, result.verdict, ReplayOutcome(cost=Usage(llm_calls=2))

    return replay, replays


def without_reference(task: Task) -> Task:
    """`task` as a user's own coding benchmark may give it: tests, no reference solution."""
    return task.model_copy(update={"metadata": {k: v for k, v in task.metadata.items() if k != "reference_solution"}})


def test_a_fix_whose_code_fails_the_tests_is_refused_before_its_replay(task, check):
    """(On a task without a reference solution: with one, the step's code is corrected from it before the analyzer
    is asked, the next tests.)"""
    task = without_reference(task)
    run = run_of(task, check, CODER)
    assert run.verdict is not None and not run.verdict.success
    replay, replays = replayer(task, check)

    chat, prompts = analyzer("failing-fix", [diag(1, "coder", FIX_LIST), diag(1, "coder", FIX_RIGHT)])
    result = find_decisive_step(run, analyzer=chat, replay=replay, budget=Budget(), verify=check)

    assert result.verified and result.step == 1
    assert [i.new_content for i in replays if i.kind == "fix"] == [FIX_RIGHT]  # tuple(list(s)) never replayed
    refused = prompts[1]
    assert "wrong_code: the fix's code fails the task's tests" in refused
    assert "('p', 'y', 't', 'h', 'o', 'n', ' ', '3', '.', '0')" in refused  # what the fix's function returned


def test_a_step_whose_code_fails_is_asked_for_its_correction_not_cleared(task, check):
    """The critic restates the coder's failing code as the team's answer; the ranked fix corrects the critic's
    step and flips the run. The coder's earlier step holds the same failing code: judged correct by the
    analyzer, it would leave the label on the critic; it cannot be cleared, and its correction is the label."""
    critic = "The code is correct:\n" + CODER
    run = run_of(task, check, CODER, critic=critic).model_copy(update={"final_answer": critic})

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        final = i.new_content  # the critic restates whatever code it was given
        result = run_of(task, check, i.new_content if i.step == 1 else CODER, critic=final)
        result = result.model_copy(update={"final_answer": final, "verdict": check(task, final)})
        return result, result.verdict, ReplayOutcome(cost=Usage(llm_calls=1))

    decline = json.dumps({"fix_needed": False, "reason": "the code is correct"})
    chat, prompts = analyzer("failing-step", [diag(3, "critic", FIX_RIGHT), decline, diag(1, "coder", FIX_RIGHT)])
    result = find_decisive_step(run, analyzer=chat, replay=replay, budget=Budget(), verify=check)

    assert result.verified and result.step == 1 and result.agent == "coder"
    assert any("step 1 (coder) has code that fails the task's tests" in n for n in result.annotation.evidence.notes)


def test_by_default_a_refused_retake_is_not_asked_again(task, check):
    """`Budget.max_write_reasks` 0: the retake whose code fails is refused and the proposal ends there, one call;
    the analyzer's own diagnoses are still re-asked (`max_reasks`)."""
    from rootstep.annotation._budget import Meter
    from rootstep.annotation._propose import retake_step, check_fix

    run = run_of(task, check, CODER)
    request = [{"role": "system", "content": "You are the coder of a small team."},
               {"role": "user", "content": task.prompt}]
    chat, prompts = analyzer("retake-refused-once", [RETAKEN, FIX_RIGHT])
    log: list[Any] = []
    refuse = lambda text: None if check(task, text).success else "wrong_code: the fix's code fails the task's tests"  # noqa: E731
    text, why = retake_step(chat, request, run.steps[1], Meter(Budget(max_reasks=2)), log, check=refuse)
    assert text is None and len(prompts) == 1 and "no valid answer after 0 re-ask(s)" in why and "wrong_code" in why
    chat, prompts = analyzer("retake-refused-reasked", [RETAKEN, FIX_RIGHT])
    text, why = retake_step(chat, request, run.steps[1], Meter(Budget(max_write_reasks=1)), [], check=refuse)
    assert text == FIX_RIGHT and why is None and len(prompts) == 2  # asked again with the problem, mended
    assert check_fix(run.steps[1], FIX_RIGHT) is None


def test_code_that_defines_something_else_is_not_judged(task, check):
    """A helper or a test script is not the task's function: the tests say nothing about it."""
    run = run_of(task, check, CODER)
    helper = "```python\ndef strip_spaces(s):\n    return s.replace(' ', '')\n```"
    replays: list[Intervention] = []

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        replays.append(i)
        result = run_of(task, check, CODER)
        return result, result.verdict, ReplayOutcome(cost=Usage(llm_calls=1))

    chat, prompts = analyzer("helper-fix", [diag(1, "coder", helper)])
    find_decisive_step(run, analyzer=chat, replay=replay, budget=Budget(max_candidates=1, max_replays=3), verify=check)
    assert any(i.new_content == helper for i in replays)  # replayed: not refused as failing code
    assert not any("wrong_code" in p for p in prompts)


# The main job on a fresh machine (2026-11-28, MBPP 310): the 1.5B's ranked answer described the change, and its
# retake in the coder's seat wrote the coder's `tuple(s)` again with test prints that claim the right output.
RANKED_DESCRIBED = diag(1, "coder", "The coder should use the `tuple()` function to convert the string to a tuple of "
                                    "characters. The corrected code is as follows:\n" + CODER)
RETAKEN = ("```python\ndef string_to_tuple(s):\n    return tuple(s)\n\n# Test cases\nprint(string_to_tuple(\"python 3.0\"))"
           "  # Output: ('p', 'y', 't', 'h', 'o', 'n', '3', '.', '0')\nprint(string_to_tuple(\"item1\"))    # Output: "
           "('i', 't', 'e', 'm', '1')\n```")


def test_a_retake_whose_code_fails_is_re_asked_in_the_agents_seat_with_the_failing_test(task, check):
    """The retake was refused unseen (`wrong_code`) and the step stayed open with no replay; asked again in the
    coder's seat with the first failing test stated (`max_write_reasks=1`; the 1.5B never mended a refused
    retake, so by default it is not asked again), the corrected code is the fix replayed and the label. (With a
    reference solution the task's own code is the correction first: the next tests.)"""
    task = without_reference(task)
    run = run_of(task, check, CODER)
    request = [{"role": "system", "content": "You are the coder of a small team."},
               {"role": "user", "content": task.prompt}]
    seen: list[list[dict[str, Any]]] = []

    def fn(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        seen.append(messages)
        if messages[0]["content"].startswith("You are the coder"):
            return RETAKEN if len(messages) == 2 else FIX_RIGHT
        return RANKED_DESCRIBED

    register_script("retake-failing", fn)
    replay, replays = replayer(task, check)

    result = find_decisive_step(run, analyzer=Chat("scripted/retake-failing"), replay=replay,
                                budget=Budget(max_reasks=1, max_write_reasks=1), verify=check,
                                step_request=lambda step: request if step.index == 1 else None)

    assert result.verified and (result.agent, result.step) == ("coder", 1)
    assert [i.new_content for i in replays if i.kind == "fix"] == [FIX_RIGHT]  # RETAKEN never replayed
    retakes = [m for m in seen if m[0]["content"].startswith("You are the coder")]
    assert len(retakes) == 2 and retakes[1][:2] == request and retakes[1][2]["content"] == RETAKEN
    told = retakes[1][3]["content"]
    assert told.startswith("wrong_code: the fix's code fails the task's tests") and "got: ('p', 'y'" in told
    assert result.attempts[0].diagnosis.written == "retake"


REFERENCE = "```python\ndef string_to_tuple(str1):\n    result = tuple(x for x in str1 if not x.isspace()) \n    return result\n```"


def test_the_first_failing_step_is_corrected_from_the_reference_before_the_analyzer_is_asked(task, check):
    """The main job's MBPP 310 (2026-11-29): the 1.5B's retake kept `tuple(s)` and its rewrite left the message
    unchanged, so step 1 stayed open and nothing was replayed. The step's code fails the tests, so it gave a wrong
    answer: its code replaced by the task's reference solution is the fix, the rest of the message kept. It is tried
    first, with its control beside it (the grounded phase): the flip is the label and the analyzer is never asked."""
    assert task.metadata["reference_solution"].strip() in REFERENCE.replace("```python\n", "")
    coder = "Here is the function:\n" + CODER + "\nIt converts the string."
    run = run_of(task, check, coder)
    seen: list[list[dict[str, Any]]] = []

    def fn(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        seen.append(messages)
        return RANKED_DESCRIBED

    register_script("described-reference", fn)
    replay, replays = replayer(task, check)
    request = [{"role": "system", "content": "You are the coder of a small team."}, {"role": "user", "content": task.prompt}]
    result = find_decisive_step(run, analyzer=Chat("scripted/described-reference"), replay=replay, budget=Budget(),
                                verify=check, step_request=lambda step: request if step.index == 1 else None)

    assert result.verified and (result.agent, result.step) == ("coder", 1)
    fixes = [i.new_content for i in replays if i.kind == "fix"]
    assert fixes == ["Here is the function:\n" + REFERENCE + "\nIt converts the string."]
    assert sorted(i.kind for i in replays) == ["control", "fix"]  # side by side
    d = result.attempts[0].diagnosis
    assert (d.written, d.source) == ("reference", "grounded")
    assert seen == []  # no analyzer call: no ranked diagnosis, no retake, no rewrite
    assert result.annotation.cost.llm_calls == 4  # the replays' (2 each), none of the analyzer's
    assert any("its failing code replaced by the task's reference solution" in n for n in result.annotation.evidence.notes)


CRITIC_CODE = "Here is my version:\n" + FIX_LIST


def critic_run(task: Task, check) -> tuple[Trajectory, Any, list[Intervention]]:
    """The coder's failing `tuple(s)` at step 1, then the critic's own failing code at step 3, which the run ends
    with; a replay keeps the critic's step unless it is the one corrected (the critic writes its own code whatever
    the coder wrote), so correcting step 1 still fails."""
    run = run_of(task, check, CODER, critic=CRITIC_CODE).model_copy(
        update={"final_answer": CRITIC_CODE, "verdict": check(task, CRITIC_CODE)})
    replays: list[Intervention] = []

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        replays.append(i)
        critic = i.new_content if i.step == 3 else CRITIC_CODE
        result = run_of(task, check, i.new_content if i.step == 1 else CODER, critic=critic)
        result = result.model_copy(update={"final_answer": critic, "verdict": check(task, critic)})
        return result, result.verdict, ReplayOutcome(cost=Usage(llm_calls=1))

    return run, replay, replays


def test_a_described_fix_of_a_later_failing_step_is_the_tasks_reference_solution_without_a_model_call(task, check):
    """The first failing step got the reference first (and still failed); the analyzer then describes a change of
    the critic's failing code: that step's correction is written from the reference with no retake or rewrite call,
    replayed and the label (the coder's step 1 was tried)."""
    run, replay, replays = critic_run(task, check)
    described = diag(3, "critic", "The critic should use the `tuple()` function without the spaces. The corrected code is "
                                  "as follows:\n" + FIX_LIST)
    chat, prompts = analyzer("described-reference-later", [described])
    result = find_decisive_step(run, analyzer=chat, replay=replay, budget=Budget(), verify=check,
                                step_request=lambda step: None)

    assert result.verified and (result.agent, result.step) == ("critic", 3)
    assert [(i.step, i.kind) for i in replays if i.kind == "fix"] == [(1, "fix"), (3, "fix")]
    assert [a.diagnosis.written for a in result.attempts] == ["reference", "reference"]
    assert [a.diagnosis.source for a in result.attempts] == ["grounded", "ranked"]
    assert len(prompts) == 1  # the ranked diagnosis only: no retake, no rewrite
    assert result.attempts[1].diagnosis.instruction is not None  # the analyzer's description, kept


def test_a_ranked_fix_that_fails_the_tests_after_its_re_asks_falls_back_to_the_reference(task, check):
    """The analyzer's own code is preferred: re-asked with the failing test first; when its fixes still fail, the
    step it named is corrected with the reference solution instead of ending the ranked phase with no replay."""
    run, replay, replays = critic_run(task, check)
    chat, prompts = analyzer("ranked-failing-reference", [diag(3, "critic", "Here is my version:\n" + CODER)])
    result = find_decisive_step(run, analyzer=chat, replay=replay, budget=Budget(max_reasks=1), verify=check)

    assert result.verified and (result.agent, result.step) == ("critic", 3)
    assert len(prompts) == 2 and "wrong_code" in prompts[1]  # the analyzer re-asked once with the failing test
    assert [(i.step, i.new_content) for i in replays if i.kind == "fix"][1:] == [(3, "Here is my version:\n" + REFERENCE)]
    assert result.attempts[1].diagnosis.reason == "the space is kept"  # the analyzer's finding, its fix the task's
    assert any("the ranked fix of step 3 failed the task's tests" in n for n in result.annotation.evidence.notes)


def test_the_scan_corrects_an_earlier_failing_step_from_the_reference_and_leaves_other_steps_to_the_analyzer(task, check):
    """In the scan of earlier steps a step whose code fails the tests is corrected from the reference without asking
    the analyzer; a step without the task's function (the critic's review) is still asked; without a reference
    solution the failing step is asked for its correction as before."""
    from rootstep.annotation._propose import FixProposer, TaskContext
    from rootstep.annotation._budget import Meter

    run = run_of(task, check, CODER, critic="The code looks right. TERMINATE")
    chat, prompts = analyzer("scan-reference", [json.dumps({"fix_needed": False, "reason": "a review"})])
    proposer = FixProposer(run, run.verdict, TaskContext.of(run), chat, Meter(Budget()), [], [], 24_000, check, None, None)
    found, why = proposer.ask_at(run.steps[1], [], set(), require_fix=False, source="earlier")
    assert why is None and found is not None and (found.step, found.written, found.fix) == (1, "reference", REFERENCE)
    assert found.reason.startswith("its code fails the task's tests (assert: assert string_to_tuple(")
    assert prompts == []
    found, why = proposer.ask_at(run.steps[3], [], set(), require_fix=False, source="earlier")
    assert found is not None and found.declined and len(prompts) == 1
    plain = run_of(without_reference(task), check, CODER)
    proposer = FixProposer(plain, plain.verdict, TaskContext.of(plain), chat, Meter(Budget(max_reasks=0)), [], [],
                           24_000, check, None, None)
    found, why = proposer.ask_at(plain.steps[1], [], set(), require_fix=False, source="earlier")
    assert found is None and len(prompts) == 2 and "wrong_code" not in (why or "")


def recorded_agentprune(fixture: str) -> tuple[Task, list[Step], Any, Any]:
    """A recorded AgentPrune HumanEval+ run (tests/fixtures/real_runs/`fixture`): its task, its steps, a proposer over
    it with the real `code_tests` verifier on a local sandbox, and that verifier."""
    from rootstep.annotation import Meter, TaskContext
    from rootstep.annotation._propose import FixProposer

    data = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / fixture).read_text())
    he = next(t for t in load_tasks("humanevalplus") if t.task_id == data["task_id"])
    steps = [Step.model_validate(s) for s in data["steps"]]
    sandbox = get_sandbox("local", allow_local=True)
    check = lambda t, a: verify(t, a, sandbox=sandbox)  # noqa: E731
    run = Trajectory(framework="agentprune", benchmark="humanevalplus", task_id=he.task_id, question=he.prompt,
                     steps=steps, final_answer=steps[2].content, recording=Recording(gateway_run_id="real", task=he))
    proposer = FixProposer(run, None, TaskContext(question=he.prompt, task=he), lambda *a, **k: "", Meter(Budget()),
                           [], [], 24_000, check, None, None)
    return he, steps, proposer, check


def test_pseudo_code_of_the_function_is_failing_code_and_gets_the_reference():
    """AgentPrune on HumanEval/38 (slice of 2026-11-30, seed 23): the analyst's step 1 designs `decode_cyclic` as
    `function decode_cyclic(s: str):` with the encoder's body, a wrong version of the task's function that no Python
    parser reads; its prose fix was replayed and failed, and the inspector's failing Python at step 2, given the
    reference solution, flipped and took the label. Pseudo-code of the function is judged as failing code, so the
    analyst's step gets the same correction first (its block replaced, its prose kept)."""
    he, steps, proposer, _ = recorded_agentprune("agentprune_humanevalplus_38.json")
    analyst = steps[1]
    assert "function decode_cyclic(s: str):" in analyst.content
    assert proposer.failing_code(analyst.content) is not None
    fixed = proposer.from_reference(analyst)
    assert fixed is not None and "function decode_cyclic" not in fixed and he.metadata["reference_solution"].strip() in fixed
    assert fixed.startswith(analyst.content[:200])  # the analyst's prose before its block is kept
    assert proposer.failing_code(fixed) is None  # the correction passes the tests
    plan = analyst.model_copy(update={"content": "Split into groups of three and rotate each group back."})
    assert proposer.failing_code(plan.content) is None and proposer.from_reference(plan) is None  # no code: asked


def test_pseudo_code_of_the_function_is_the_steps_own_answer_so_its_reference_correction_is_no_leak():
    """AgentPrune on HumanEval/100 (slice of 2026-12-04, seed 53): the analyst's step 1 writes `make_a_pile` as
    ```plaintext pseudo-code with the wrong rule (an odd level plus 1); its correction to the reference solution was
    refused as an answer leak ("the step states no answer"), so step 1 was left open and the inspector's label at
    step 2 stayed `unproven_earliest`. Pseudo-code of the function is a wrong answer of the step's own: correcting it
    hands nothing over."""
    from rootstep.benchmarks._suspect import answer_leak, gives_answer

    he, steps, proposer, check = recorded_agentprune("agentprune_humanevalplus_100.json")
    analyst = steps[1]
    assert "```plaintext\nfunction make_a_pile(n):" in analyst.content
    assert gives_answer(he, analyst.content)
    fixed = proposer.from_reference(analyst)
    assert fixed is not None and answer_leak(he, analyst.content, fixed, check) is None
    found = proposer.referenced(analyst, set(), "earlier")
    assert found is not None and (found.step, found.written) == (1, "reference")
    plan = "Start with n stones and add 2 for every next level."  # a plan in prose states no answer
    assert not gives_answer(he, plan) and answer_leak(he, plan, fixed, check) is not None
