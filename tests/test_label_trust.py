"""Label trust in the annotation core (issue 13): no label from a presentation-only fix, the analyzer's
"no agent error", answers cut at the token limit, team-aware / persistent fault injection, and
perturbations that change the work rather than the team's checks.

The analyzer and perturber are scripted models; their answers are modelled on what a capable model
answered through hand-model (the analyzer that wrote "The mathematics is correct, but the verifier
reported 'no answer found' ... state the final answer in the standard \\boxed{} form").
"""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from rootstep.gateway import register_script
from rootstep.benchmarks import load_tasks, mark_suspect, verify
from rootstep.annotation import Budget, ReplayOutcome, TaskContext, find_decisive_step, inject_fault, programmatic_perturbations
from rootstep.annotation._propose import Asked, ask_valid, rewrite_budget
from rootstep.annotation._budget import Meter
from rootstep.annotation._injection import cannot_flip, injection_points
from rootstep.annotation._perturbations import change_constant, flip_operator
from rootstep.gateway import Chat
from rootstep.model import Intervention, Recording, Step, Task, Trajectory, Usage, Verdict

MATH = Task(benchmark="math500", task_id="domain", verifier="math", kind="math", ground_truth="1",
            prompt="What is the smallest integer x for which f(x) = sqrt(x-1)/(x-2) is a real number?")


def scripted(name: str, answers: list[Any] | Callable[[str, int], Any]) -> tuple[Chat, list[str]]:
    prompts: list[str] = []

    def fn(messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
        prompts.append(messages[-1]["content"])
        n = len(prompts) - 1
        return answers(prompts[-1], n) if callable(answers) else answers[n]

    register_script(name, fn)
    return Chat(f"scripted/{name}"), prompts


def run_of(task: Task, contents: list[tuple[str, str, str]], final: str | None = None) -> Trajectory:
    """A collected-looking run: (agent, kind, content) steps; the final answer is the last agent step's."""
    steps = [Step(index=i, agent=a, kind=k, content=c, call_ids=[f"c{i}"] if k == "agent" else [])
             for i, (a, k, c) in enumerate(contents)]
    answer = final if final is not None else next(s.content for s in reversed(steps) if s.kind == "agent")
    verdict = mark_suspect(task, answer, steps, verify(task, answer), verify)
    return Trajectory(framework="sim", benchmark=task.benchmark, task_id=task.task_id, question=task.prompt,
                      ground_truth=task.ground_truth, steps=steps, final_answer=answer, verdict=verdict,
                      recording=Recording(gateway_run_id="ledger-run", task=task))


def replayer(run: Trajectory, task: Task, rest: Callable[[list[Step], Intervention], list[tuple[str, str, str]]]):
    """A replay callable: the prefix as recorded, the intervention forced, then `rest(prefix, i)`."""
    calls: list[Intervention] = []

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        calls.append(i)
        prefix = [(s.agent, s.kind, s.content) for s in run.steps[: i.step]] + [(run.steps[i.step].agent, "agent", i.new_content)]
        built = run_of(task, prefix)
        result = run_of(task, prefix + rest(built.steps, i))
        return result, result.verdict, ReplayOutcome(cost=Usage(llm_calls=1, replayed_calls=i.step))

    replay.calls = calls  # type: ignore[attr-defined]
    return replay


# --------------------------------------------------------------------------- counterfactual


def test_reformatting_the_answer_step_is_not_a_label_but_verifier_suspect():
    # the writer's answer is right ("1") but written as a sentence the math verifier cannot read
    run = run_of(MATH, [("user", "human", MATH.prompt), ("solver", "agent", "x-1 >= 0 and x != 2, so x >= 1: x = 1 works."),
                        ("writer", "agent", "We are done: x = 1 is the smallest such integer.")])
    assert run.success is False and run.verdict.details.get("suspect") is None  # not caught before the search
    analyzer, prompts = scripted("trust-reformat", [
        json.dumps({"mistake_step": 2, "mistake_agent": "writer",
                    "reason": "The mathematics is correct, but the verifier reported no answer; the writer should "
                              "state the final answer in the standard \\boxed{} form.",
                    "suggested_fix": "We are done: the smallest such integer is $\\boxed{1}$."}),
        json.dumps({"fix_needed": False, "reason": "the domain analysis is right"}),
    ])
    result = find_decisive_step(run, analyzer=analyzer, replay=replayer(run, MATH, lambda steps, i: []), verify=verify)
    a = result.annotation
    assert (a.status, a.verified, a.agent, a.step) == ("verifier_suspect", False, None, None)
    assert result.attempts[0].replay.success_after is True and result.attempts[0].presentation_only
    assert "only its presentation changed" in a.evidence.reason and "final answer" in a.evidence.reason
    assert any("succeeded, not accepted" in n for n in a.evidence.notes)


def test_reformatting_an_early_step_of_a_real_failure_verifies_nothing_and_the_search_goes_on():
    # the coder was right, the critic talked it into a wrong answer: a real failure (decisive: the critic)
    run = run_of(MATH, [("executor", "human", MATH.prompt), ("coder", "agent", "x >= 1 and x != 2.\nAnswer: 1"),
                        ("critic", "agent", "No: at x = 1 the numerator is 0, take the next one. Use 3."),
                        ("coder", "agent", "You are right.\nAnswer: 3"), ("critic", "agent", "Agreed. TERMINATE")])
    assert run.success is False and run.verdict.details.get("suspect") is None

    def rest(steps: list[Step], i: Intervention) -> list[tuple[str, str, str]]:
        # the live team: a critic that objects unless the coder's answer is boxed; agreeing ends the chat
        if i.step == 1:
            return [("critic", "agent", "Boxed and correct. TERMINATE")] if "boxed" in i.new_content else []
        return [("critic", "agent", "Agreed. TERMINATE")] if "TERMINATE" in i.new_content else []

    def rest_final(steps: list[Step], i: Intervention) -> list[tuple[str, str, str]]:
        out = rest(steps, i)
        # the run's answer is the coder's last message
        return out

    analyzer, prompts = scripted("trust-early", [
        json.dumps({"mistake_step": 1, "mistake_agent": "coder", "reason": "state it in the standard form",
                    "suggested_fix": "x >= 1 and x != 2.\n$\\boxed{1}$"}),
        json.dumps({"mistake_step": 2, "mistake_agent": "critic", "reason": "x = 1 gives 0/(-1) = 0, which is real",
                    "suggested_fix": "Correct: f(1) = 0 is real. TERMINATE"}),
    ])

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        if i.kind == "control":  # the step as recorded: this deterministic team replays the recorded failure
            return run, run.verdict, ReplayOutcome(cost=Usage(llm_calls=1))
        prefix = [(s.agent, s.kind, s.content) for s in run.steps[: i.step]] + [(run.steps[i.step].agent, "agent", i.new_content)]
        built = prefix + rest_final([], i)
        coder_last = next(c for a, k, c in reversed(built) if a == "coder")
        result = run_of(MATH, built, final=coder_last)
        return result, result.verdict, ReplayOutcome(cost=Usage(llm_calls=1))

    result = find_decisive_step(run, analyzer=analyzer, replay=replay, verify=verify)
    a = result.annotation
    assert (a.status, a.verified, a.agent, a.step) == ("labelled", True, "critic", 2)
    # the coder's step 1 already states the right answer: its reformatting is refused before any replay
    # (`right_already`) and fed back; the scan clears it without asking
    assert [x.diagnosis.step for x in result.attempts] == [2]
    assert "right_already: step 1 (coder) already states the answer" in prompts[1]
    assert any("step 1 (coder) states the answer" in n and "judged correct" in n for n in a.evidence.notes)


def test_analyzer_may_say_no_agent_error_and_the_verifier_confirms_it():
    run = run_of(MATH, [("user", "human", MATH.prompt), ("coder", "agent", "So x = 1.\nFinal result -> 1 (x=1)")])
    analyzer, _ = scripted("trust-noerror", [json.dumps({
        "no_agent_error": True, "answer_step": 1,
        "reason": "The coder's answer 1 is correct; the verifier did not read it."})])
    replay = replayer(run, MATH, lambda steps, i: [])
    result = find_decisive_step(run, analyzer=analyzer, replay=replay, verify=verify)
    a = result.annotation
    assert (a.status, a.verified, a.step) == ("verifier_suspect", False, None)
    assert a.metadata["confirmed"] is True and a.metadata["answer_step"] == 1 and replay.calls == []
    assert result.no_agent_error.confirmed and "'1'" in result.no_agent_error.confirmed

    # a claim the verifier does not back is still not a label, and is marked unconfirmed
    wrong = run_of(MATH, [("user", "human", MATH.prompt), ("coder", "agent", "x must exceed 2.\nAnswer: 3")])
    analyzer, _ = scripted("trust-noerror-wrong", [json.dumps({"no_agent_error": True, "answer_step": None,
                                                               "reason": "looks right to me"})])
    result = find_decisive_step(wrong, analyzer=analyzer, replay=replayer(wrong, MATH, lambda s, i: []), verify=verify)
    assert result.annotation.status == "verifier_suspect" and result.annotation.metadata["confirmed"] is False
    assert any("NOT confirmed" in n for n in result.annotation.evidence.notes)


def test_no_agent_error_is_refused_when_asked_about_one_step_and_bad_answer_steps_are_reasked():
    run = run_of(MATH, [("user", "human", MATH.prompt), ("coder", "agent", "x > 2.\nAnswer: 3")])
    analyzer, prompts = scripted("trust-noerror-bad", [
        json.dumps({"no_agent_error": True, "answer_step": 9, "reason": "fine"}),
        json.dumps({"mistake_step": 1, "mistake_agent": "coder", "reason": "x = 1 is allowed",
                    "suggested_fix": "x >= 1 and x != 2.\nAnswer: 1"}),
    ])
    result = find_decisive_step(run, analyzer=analyzer, replay=replayer(run, MATH, lambda s, i: []), verify=verify)
    assert "answer_step must be the number of the step" in prompts[1]
    assert (result.annotation.status, result.annotation.step) == ("labelled", 1)


# --------------------------------------------------------------------------- answers cut at the token limit


def test_a_cut_answer_is_never_parsed_and_is_asked_again_with_more_room():
    cut = {"content": '{"mistake_step": 1, "mistake_agent": "coder", "suggested_fix": "def f(x):\\n    retu',
           "finish_reason": "length"}
    whole = json.dumps({"mistake_step": 1, "mistake_agent": "coder", "reason": "r", "suggested_fix": "def f(x): return 1"})
    chat, prompts = scripted("trust-cut", [cut, whole])
    chat.max_tokens = 300
    log: list[Asked] = []
    seen: list[str] = []
    value, why = ask_valid(chat, lambda prev, problem: "prompt", lambda a: (seen.append(a) or (a, None)),
                           Meter(Budget()), log, "analyzer.j2")
    assert value == whole and why is None and seen == [whole]  # the cut answer reached no parser
    assert chat.max_tokens == 600 and "finish_reason=length" in log[0].problem and len(prompts) == 2


def test_answer_budget_is_sized_to_the_longest_step():
    short = run_of(MATH, [("user", "human", "q"), ("coder", "agent", "Answer: 1")])
    long = run_of(MATH, [("user", "human", "q"), ("coder", "agent", "x = 1\n" * 2000)])
    assert rewrite_budget(short) == 1024
    assert rewrite_budget(long) == int(2 * 12000 / 3.5) + 512
    assert rewrite_budget(long, cap=4096) == 4096 and rewrite_budget(short, floor=256) == int(2 * 9 / 3.5) + 512


# --------------------------------------------------------------------------- fault injection

CODE_TASK = Task(benchmark="mbppplus", task_id="sim", verifier="exact", kind="coding", ground_truth="ok",
                 prompt="Write count_pos(xs) returning how many numbers are > 0.\nassert count_pos([1, -2, 3]) == 2",
                 metadata={"entry_point": "count_pos"})
GOOD = "```python\ndef count_pos(xs):\n    return sum(1 for x in xs if x > 0)\n\nprint(count_pos([1, -2, 3]))\n```"


class Team:
    """A simulated AG2-like team: coder, executor, critic. The critic reviews what the executor printed
    for the visible example and, like real critics, asks once for the edge cases to be re-checked: the
    coder then rewrites its code from scratch (its own solution, `GOOD`) unless a standing instruction in
    its system prompt (a persistent corruption) keeps the mistake. Omega: the final code counts zeros and
    negatives right (`hidden`)."""

    def __init__(self) -> None:
        self.interventions: list[Intervention] = []

    @staticmethod
    def outcome(code: str) -> tuple[str, bool, bool]:
        namespace: dict[str, Any] = {}
        body = code.split("```python\n", 1)[1].split("```", 1)[0]
        exec(body.replace("print(", "(lambda *a: None)("), namespace)  # noqa: S102 - test-only simulation
        f = namespace["count_pos"]
        visible = f([1, -2, 3]) == 2
        hidden = visible and f([0, 0]) == 0 and f([]) == 0 and f([-1, 5]) == 1
        return str(f([1, -2, 3])), visible, hidden

    def steps(self, coder_first: str, persist: str | None) -> list[tuple[str, str, str]]:
        printed, visible, _ = self.outcome(coder_first)
        out = [("executor", "tool", f"exitcode: 0\nCode output: {printed}")]
        if not visible:
            out.append(("critic", "agent", f"count_pos([1, -2, 3]) printed {printed}, expected 2. Please fix."))
        else:
            out.append(("critic", "agent", "The example passes. Re-check zero and empty inputs, then resend."))
        second = coder_first if persist else GOOD  # a rewrite, unless the agent keeps its standing instruction
        printed, _, _ = self.outcome(second)
        return out + [("coder", "agent", second), ("executor", "tool", f"exitcode: 0\nCode output: {printed}"),
                      ("critic", "agent", "Looks right. TERMINATE")]

    def run(self) -> Trajectory:
        return self.trajectory([("executor", "human", CODE_TASK.prompt), ("coder", "agent", GOOD)] + self.steps(GOOD, None))

    def trajectory(self, contents: list[tuple[str, str, str]]) -> Trajectory:
        steps = [Step(index=i, agent=a, kind=k, content=c, call_ids=[f"c{i}"] if k == "agent" else [])
                 for i, (a, k, c) in enumerate(contents)]
        final = next(s.content for s in reversed(steps) if s.agent == "coder")
        ok = self.outcome(final)[2]
        return Trajectory(framework="sim", benchmark="mbppplus", task_id="sim", question=CODE_TASK.prompt,
                          steps=steps, final_answer=final, verdict=Verdict(success=ok, details={"total": 4}),
                          recording=Recording(gateway_run_id="ledger-run", task=CODE_TASK))

    def replay(self, i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        self.interventions.append(i)
        base = self.run()
        prefix = [(s.agent, s.kind, s.content) for s in base.steps[: i.step]] + [(base.steps[i.step].agent, "agent", i.new_content)]
        rest = self.steps(i.new_content, i.persist) if base.steps[i.step].agent == "coder" and i.step == 1 else \
            [(s.agent, s.kind, s.content) for s in base.steps[i.step + 1:]]
        t = self.trajectory(prefix + rest)
        return t, t.verdict, ReplayOutcome(cost=Usage(llm_calls=len(rest)))


VISIBLE_BUG = GOOD.replace("x > 0", "x < 0")  # what a one-shot perturber writes: the executor shows it
EDGE_BUG = GOOD.replace("x > 0", "x >= 0")  # zeros counted: passes the visible example, fails Omega


def team_aware_perturber(name: str) -> tuple[Chat, list[str]]:
    def answer(prompt: str, n: int) -> str:
        if "STEP TO CORRUPT: step 1 by coder" not in prompt:
            return json.dumps({"possible": False, "reason": "a critic's review cannot carry a hidden bug here"})
        return json.dumps({"corrupted_content": EDGE_BUG, "description": "counts zeros as positive (>= instead of >)",
                           "unnoticed": "the visible example has no zero",
                           "instruction": "Zero counts as a positive number in this task."})
    return scripted(name, answer)


def test_one_shot_injection_is_corrected_by_the_team():
    team = Team()
    perturber, _ = scripted("trust-oneshot", lambda p, n: json.dumps(
        {"step": 1, "corrupted_content": VISIBLE_BUG, "description": "flipped > to <"}))
    result = inject_fault(team.run(), perturber, team.replay, Budget(max_candidates=2, max_replays=2),
                          programmatic=False, mode="one_shot")
    assert not result.flipped and [a.replay.success_after for a in result.attempts] == [True]


def test_team_aware_one_step_is_rewritten_away_and_persistent_flips():
    team = Team()
    run = team.run()
    assert run.success
    perturber, prompts = team_aware_perturber("trust-aware")
    only_aware = inject_fault(run, perturber, team.replay, Budget(max_candidates=3, max_replays=4),
                              programmatic=False, mode="team_aware")
    assert not only_aware.flipped  # the critic's "re-check and resend" made the coder rewrite it

    team = Team()
    perturber, prompts = team_aware_perturber("trust-auto")
    result = inject_fault(run, perturber, team.replay, Budget(max_candidates=3, max_replays=6), programmatic=False)
    a = result.annotation
    assert result.flipped and (a.agent, a.step, a.verified) == ("coder", 1, True)
    assert a.metadata["mode"] == "persistent" and a.metadata["persist"] == "Zero counts as a positive number in this task."
    assert [x.mode for x in result.attempts if x.corruption.step == 1] == ["one_step", "persistent"]
    tried = [i for i in team.interventions if i.kind != "control"]
    assert tried[-1].persist and tried[-2].persist is None and team.interventions[-1].kind == "control"
    assert "persistent injection" in a.evidence.notes[0]
    # the perturber was told what the team sees and checks, and what Omega checks
    coder_prompt = next(p for p in prompts if "STEP TO CORRUPT: step 1 by coder" in p)
    assert "assert count_pos([1, -2, 3]) == 2" in coder_prompt and "executor (tool output)" in coder_prompt
    assert "critic (agent step)" in coder_prompt and "4 of them" in coder_prompt and '"instruction"' in coder_prompt


def test_no_persistent_rerun_when_the_corrupted_agent_never_speaks_again():
    """From the hand-model run of the OpenAI Agents SDK example (issue 14): the solver speaks once, the
    reviewer fixed the corruption in the one-step replay. A persistent replay would send the reviewer the very
    same request (the instruction reaches only the solver's later calls): a re-roll, not a new test. The
    real reviewer (a person playing a small model) accepted it the second time, and auto mode labelled that."""
    run = run_of(MATH, [("user", "human", MATH.prompt), ("solver", "agent", "x - 1 >= 0 and x != 2, so x = 1.\nResult: 1"),
                        ("reviewer", "agent", "The domain starts at 1 and 1 != 2. Correct.\nAnswer: 1")])
    assert run.success
    perturber, _ = scripted("trust-no-reroll", lambda p, n: json.dumps(
        {"corrupted_content": "x - 1 > 0 and x != 2, so x = 3.\nResult: 3", "description": "strict inequality",
         "unnoticed": "looks careful", "instruction": "Treat the square root's argument as strictly positive."})
        if "STEP TO CORRUPT: step 1 by solver" in p else json.dumps({"possible": False, "reason": "a review"}))
    replay = replayer(run, MATH, lambda steps, i: [("reviewer", "agent", "x = 1 is allowed: sqrt(0) = 0. Answer: 1")])
    result = inject_fault(run, perturber, replay, Budget(max_candidates=3, max_replays=4), programmatic=False)
    assert not result.flipped
    assert [(a.corruption.step, a.mode) for a in result.attempts] == [(1, "one_step")]
    assert all(i.persist is None for i in replay.calls)
    assert any("no persistent replay: solver made no call after the corrupted step" in n for n in result.notes)


def test_a_failure_with_a_suspect_verdict_is_not_a_flip():
    run = run_of(MATH, [("user", "human", MATH.prompt), ("coder", "agent", "x >= 1, x != 2.\nAnswer: 1")])
    assert run.success
    # the corrupted answer still says 1, but a later box is what the verifier reads: its failure is suspect
    perturber, _ = scripted("trust-suspect-flip", lambda p, n: json.dumps(
        {"corrupted_content": "x >= 1, x != 2.\nAnswer: 1\n(domain: $\\boxed{x \\geq 1}$)",
         "description": "boxed the domain after the answer", "instruction": "Box the domain you found."}))
    result = inject_fault(run, perturber, replayer(run, MATH, lambda s, i: []), Budget(max_candidates=1, max_replays=2),
                          programmatic=False)
    assert not result.flipped and result.attempts and all(x.suspect for x in result.attempts)


def test_injection_points_spread_over_agents_with_the_answer_step_last():
    team = Team()
    run = team.run()
    points = injection_points(run, 3, seed=0)
    agent_steps = [s.index for s in run.steps if s.kind == "agent"]
    final_coder = max(s.index for s in run.steps if s.agent == "coder")
    assert points[-1] == final_coder and len(points) == 3 and set(points) <= set(agent_steps)
    assert {run.steps[p].agent for p in points[:-1]} == {"coder", "critic"}  # two agents before the answer step
    assert all(p <= final_coder for p in points)  # not the critic's TERMINATE after the answer
    assert injection_points(run, 3, seed=0) == points  # deterministic
    spread = {tuple(injection_points(run, 2, seed=s)) for s in range(8)}
    assert len(spread) > 1  # another seed, other points


def test_ensemble_candidates_the_majority_repeats_cannot_flip():
    steps = [Step(index=0, agent="user", kind="human", content="q")] + [
        Step(index=i, agent="answer_generate", content=f"<thought>t</thought>\nAnswer: {a}", call_ids=[f"c{i}"])
        for i, a in ((1, "5"), (2, "5"), (3, "5"))] + [Step(index=4, agent="sc_ensemble", content="A", call_ids=["c4"])]
    run = Trajectory(framework="aflow", benchmark="gsm8k", task_id="t", steps=steps, final_answer="5",
                     verdict=Verdict(success=True))
    assert "2 of the 2 other independent answer_generate candidates" in cannot_flip(run, steps[1], ("answer_generate",))
    assert cannot_flip(run, steps[1], ()) is None
    assert set(injection_points(run, 4, independent_agents=("answer_generate",), answer_agents=("sc_ensemble",))) == {4}
    # without the framework's answer agents the step that holds the answer ("5") is taken for the answer step
    assert max(injection_points(run, 4, answer_agents=())) == 3
    split = run.model_copy(update={"steps": [*steps[:2], steps[2].model_copy(update={"content": "Answer: 6"}), *steps[3:]]})
    assert cannot_flip(split, split.steps[1], ("answer_generate",)) is None  # 5, 6, 5: corrupting a 5 may flip
    # code candidates compare as programs: layout and comments do not make them differ
    programs = ["```python\ndef add(a, b):\n    return a + b\n```", "```python\ndef add(a, b):\n    # sum\n    return (a + b)\n```",
                "```python\ndef add(a,b): return a+b\n```"]
    code_steps = [Step(index=0, agent="user", kind="human", content="q")] + [
        Step(index=i + 1, agent="custom", content=p, call_ids=[f"c{i}"]) for i, p in enumerate(programs)]
    code_run = Trajectory(framework="aflow", benchmark="mbpp", task_id="t", steps=code_steps, verdict=Verdict(success=True))
    assert cannot_flip(code_run, code_steps[1], ("custom",))


# --------------------------------------------------------------------------- programmatic perturbations


def test_programmatic_perturbations_change_the_work_not_the_teams_checks():
    code = ("```python\ndef add(a, b):\n    return a + b\n\nprint(add(1, 2) == 3)\nassert add(2, 2) == 4\n```")
    step = Step(index=1, agent="coder", content=code, call_ids=["c"])
    run = Trajectory(framework="sim", benchmark="b", task_id="t", steps=[Step(index=0, agent="u", kind="human"), step],
                     verdict=Verdict(success=True))
    perturbations = programmatic_perturbations(run, seed=0)
    assert {p.name for p in perturbations} >= {"flip_operator", "truncate_message"}
    for p in perturbations:
        if p.name == "truncate_message":  # cut inside the function, not after it
            assert "def add(a, b):" in p.content and "return a + b" not in p.content, p.content
            continue
        changed = [line for line, old in zip(p.content.splitlines(), code.splitlines()) if line != old]
        assert "print(" not in " ".join(changed) and "assert" not in " ".join(changed), p.description
        assert "print(add(1, 2) == 3)" in p.content and "assert add(2, 2) == 4" in p.content
    import random

    flipped = flip_operator(step, random.Random(0))
    assert flipped is not None and "return a - b" in flipped.content
    assert change_constant(step, random.Random(0)) is None  # the only constants are in the checks
    script = Step(index=1, agent="coder", content="```python\neggs = 16 - 3 - 4\nprint(eggs * 2)\n```", call_ids=["c"])
    assert "print(eggs * 2)" in change_constant(script, random.Random(1)).content  # a script's computation only


@pytest.mark.parametrize("mode", ["one_shot", "team_aware", "persistent", "auto"])
def test_every_mode_needs_a_success(mode: str):
    failed = run_of(MATH, [("user", "human", MATH.prompt), ("coder", "agent", "Answer: 3")])
    with pytest.raises(ValueError, match="failed"):
        inject_fault(failed, None, lambda i: None, mode=mode)  # type: ignore[arg-type]


def test_task_context_reads_the_runs_task():
    run = run_of(MATH, [("user", "human", MATH.prompt), ("coder", "agent", "Answer: 3")])
    assert TaskContext.of(run).task == MATH


GSM = Task(benchmark="gsm8k", task_id="balloons", verifier="numeric", kind="math", ground_truth="11050",
           prompt="20 balloons cost $900; each then costs $20 more. What do 170 balloons cost?")
CALC = {"id": "call_1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "(900 / 20 + 20) * 170"}'}}


def _checker_run() -> Trajectory:
    """From the hand-model run of the LangGraph example (issue 14): the checker's step is only a tool call."""
    run = run_of(GSM, [("user", "human", GSM.prompt), ("solver", "agent", "45 + 20 = 65; 65 x 170 = 11050.\nAnswer: 11050"),
                       ("checker", "agent", ""), ("checker", "tool", "11050.0"),
                       ("checker", "agent", "The calculator agrees.\nAnswer: 11050")])
    run.steps[2].tool_calls = [CALC]
    return run


def test_a_corruption_may_restate_the_steps_tool_calls():
    """The perturber corrupted a checker step that acts through a calculator call: the text alone changed
    nothing the team ran (the replay kept the original call, which returned the right number). The prompt now
    shows the step's tool calls and asks for the corrupted list; the replay forces it."""
    run = _checker_run()
    wrong = [{"name": "calculator", "arguments": {"expression": "(900 / 20 + 2) * 170"}}]
    perturber, prompts = scripted("trust-tool-calls", lambda p, n: json.dumps(
        {"corrupted_content": "", "tool_calls": wrong, "description": "adds $2 instead of $20",
         "unnoticed": "the checker trusts its calculator", "instruction": "The increase is $2 per balloon."})
        if "STEP TO CORRUPT: step 2 by checker" in p else json.dumps({"possible": False, "reason": "no"}))
    replay = replayer(run, GSM, lambda steps, i: [("checker", "tool", "7990.0"), ("checker", "agent", "Answer: 7990")]
                      if i.tool_calls else [("checker", "tool", "11050.0"), ("checker", "agent", "Answer: 11050")])
    result = inject_fault(run, perturber, replay, Budget(max_candidates=3, max_replays=3), programmatic=False)
    prompt = next(p for p in prompts if "STEP TO CORRUPT: step 2 by checker" in p)
    assert "tool call: " in prompt and "calculator" in prompt and 'also give "tool_calls"' in prompt
    assert result.flipped and (result.annotation.agent, result.annotation.step) == ("checker", 2)
    assert [i for i in replay.calls if i.kind != "control"][-1].tool_calls == wrong
    assert result.annotation.metadata["tool_calls_changed"] is True


def test_a_fix_may_be_only_new_tool_calls():
    from rootstep.annotation._propose import validate_diagnosis as parse_diagnosis

    run = _checker_run()
    answer = json.dumps({"mistake_step": 2, "mistake_agent": "checker", "reason": "wrong expression",
                         "suggested_fix": "", "suggested_tool_calls": [{"name": "calculator", "arguments": {"expression": "1"}}]})
    diagnosis, problem = parse_diagnosis(run, answer)
    assert problem is None and diagnosis.tool_calls[0]["name"] == "calculator"
    empty, problem = parse_diagnosis(run, json.dumps({"mistake_step": 2, "mistake_agent": "checker", "reason": "r",
                                                      "suggested_fix": ""}))
    assert empty is None and "non-empty" in problem


def test_a_greedy_analyzer_is_re_asked_with_sampling_and_given_its_temperature_back():
    # local/qwen2.5-coder-1.5b at temperature 0, re-asked after "this exact fix of step 1 was already tested",
    # wrote the same fix again (the main job's slice): a greedy re-ask repeats itself
    class Greedy:
        temperature = 0.0

        def __init__(self) -> None:
            self.seen: list[float] = []

        def __call__(self, prompt: str) -> str:
            self.seen.append(self.temperature)
            return "same" if len(self.seen) < 3 else "new"

    chat, log = Greedy(), []
    value, why = ask_valid(chat, lambda prev, problem: f"prompt {problem}",
                           lambda a: (a, None) if a == "new" else (None, "already tested"),
                           Meter(Budget(max_reasks=2)), log, "analyzer.j2")
    assert (value, why) == ("new", None) and chat.seen == [0.0, 0.7, 0.7]
    assert chat.temperature == 0.0 and [a.problem for a in log] == ["already tested", "already tested", None]


# Replies of local/qwen2.5-coder-1.5b recorded on the main job's slice (AG2, GSM8K test-120 and test-1101,
# 2026-11-25): the analyzer described its change instead of writing the step, once declined in a fix, and the
# perturber copied the prompt's placeholder back as its corruption (a replay then handed it to the team).
QWEN_1_5B_DESCRIBED = [
    "The coder should have calculated the total number of sheets of paper on one pad of paper as 900 sheets, "
    "which is the correct answer.",
    "To correct this, the coder should have written: `total_sheets_of_paper = sheets_per_pad * 30` instead of "
    "`total_sheets_of_paper = sheets_per_pad * 30.0`.",
    "No changes needed.",
    # the 1.5B's whole fix of an AgentPrune programmer's code (slice of 2026-11-27, HumanEval/25)
    "The function should return an empty list when the input number is 1.",
    # its fix of an AgentPrune inspector's code, replayed as the inspector's message (slice of 2026-11-28, seed 5,
    # HumanEval/58): the team then wrote its own code and the run flipped
    "Add checks to handle these edge cases. For example, check if both lists are empty before proceeding with the "
    "common elements calculation.",
    # its whole fix of an AG2 coder's first step, replayed as the coder's message with no answer in it (main job,
    # fresh machine, 2026-11-28, GSM8K test-1101): the team then lost the variables it needed
    "To correctly calculate the distance run by Ahito, we need to add the distances of Amber and Micah and then "
    "subtract the distance run by Amber from the total distance run by Micah.",
    # its fix of an AG2 coder's first step (`Answer: The radius of the sphere is 1 unit.`), replayed as the coder's
    # message (slice of 2026-11-29, seed 7, MATH-500 geometry/456): it failed, step 1 counted as tried, and the label
    # went to the critic's later code, whose retake flipped the run
    "The correct answer should be the radius that satisfies the equation volume = 4 * pi * surface_area, which is "
    "approximately 1.22 units.",
    # its fix of an AgentPrune inspector's code, replayed as the inspector's message (the same slice, HumanEval/49):
    # the team then wrote code of its own that passed, and the flip was the label's proof
    "The suggested fix is to use the correct algorithm of exponentiation by squaring, which is a well-known method "
    "for computing 2^n mod p, which is efficient and has a time complexity of O(log p).",
]
QWEN_1_5B_PLACEHOLDER = "<the full corrupted text of step 7>"


def _coder_run() -> Trajectory:
    return run_of(GSM, [("user", "human", GSM.prompt),
                        ("coder", "agent", "```python\nprint(2 * 30)\n```"),
                        ("executor", "tool", "60"),
                        ("critic", "agent", "The code output is correct. TERMINATE")])


@pytest.mark.parametrize("fix", QWEN_1_5B_DESCRIBED)
def test_a_fix_that_describes_a_change_is_re_asked_not_replayed(fix):
    from rootstep.annotation._propose import validate_diagnosis

    run = _coder_run()
    step = 3 if fix.startswith("No changes") else 1
    agent = run.steps[step].agent
    diagnosis, problem = validate_diagnosis(run, json.dumps({"mistake_step": step, "mistake_agent": agent,
                                                             "reason": "r", "suggested_fix": fix}))
    assert diagnosis is None and ("describes a change" in problem or "no change is needed" in problem)
    # the step's own words pass, including ones that say what should be (not a description of an edit)
    for own in ("```python\nprint(2 * 30 * 4)\n```", "The answer should be 240.", "We should multiply by 4 weeks.",
                "To find the total, we need to multiply by 4 weeks: 2 * 30 * 4 = 240."):
        ok, problem = validate_diagnosis(run, json.dumps({"mistake_step": 1, "mistake_agent": "coder", "reason": "r",
                                                          "suggested_fix": own}))
        assert problem is None and ok.fix == own


def test_a_fix_that_names_the_agents_own_work_in_the_third_person_is_a_description():
    """The 1.5B's fixes of AG2 critic steps 3 and 6 on MATH-500 1408 (slice of 2026-11-28, seed 5) were replayed as
    the critic's message; said of another agent's work, or without a possessive, the words stay a message."""
    from rootstep.annotation._propose import validate_diagnosis

    run = _coder_run()
    said = "The critic's code output should be the solution to the equation, which is a complex number."
    diagnosis, problem = validate_diagnosis(run, json.dumps({"mistake_step": 3, "mistake_agent": "critic",
                                                             "reason": "r", "suggested_fix": said}))
    assert diagnosis is None and "describes a change" in problem
    # a critic may well tell the coder what its code should do
    for own in ("The coder's code should print 240, not 60. Fix it.", "The code output should be 240."):
        ok, problem = validate_diagnosis(run, json.dumps({"mistake_step": 3, "mistake_agent": "critic", "reason": "r",
                                                          "suggested_fix": own}))
        assert problem is None and ok.fix == own


def test_a_corruption_that_is_the_prompts_placeholder_is_re_asked():
    from rootstep.annotation._propose import validate_corruption_at

    run = _coder_run()
    answer = json.dumps({"corrupted_content": QWEN_1_5B_PLACEHOLDER, "description": "changed the check",
                         "unnoticed": "the critic trusts the output"})
    corruption, problem = validate_corruption_at(run.steps[3], answer, set(), need_instruction=False)
    assert corruption is None and "placeholder" in problem and QWEN_1_5B_PLACEHOLDER in problem


# Replies of local/qwen2.5-coder-1.5b as the analyzer of the main job on a fresh machine (AG2, GSM8K test-474,
# 2026-11-25, tests/fixtures/real_runs/ag2_gsm8k_test-474.json): the ranked answer described the change
# ("Change the calculation to ..."), and asked in plain text to make it in the coder's message, it wrote the
# message (its arithmetic is still wrong: the 1.5B is a weak analyzer, which is what the replay finds out).
QWEN_1_5B_RANKED_DESCRIBED = (
    "{\n  \"mistake_step\": 1,\n  \"mistake_agent\": \"coder\",\n  \"reason\": \"The correct calculation should be "
    "`students_with_desktop = total_students / (3 / 4)`.\",\n  \"suggested_fix\": \"Change the calculation to "
    "`students_with_desktop = total_students / (3 / 4)`.\"\n}")
QWEN_1_5B_REWRITTEN = (
    "```python\n# Given data\ntotal_students = 100  # Total number of students\n\n# Calculate the number of students "
    "with a desktop computer\nstudents_with_desktop = total_students / (3 / 4)\n\n# Calculate the number of students at "
    "the grade level\nstudents_at_grade_level = total_students - students_with_desktop\n\n# Print the result\n"
    "print(f\"Answer: {students_at_grade_level}\")\n```")


def _real_ag2_run(name: str) -> tuple[Task, Trajectory]:
    from pathlib import Path

    data = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / f"{name}.json").read_text())
    task = Task.model_validate(data["task"])
    steps = [Step.model_validate({**s, "call_ids": [f"c{s['index']}"] if s["kind"] == "agent" else []}) for s in data["steps"]]
    verdict = verify(task, data["final_answer"])
    return task, Trajectory(framework="ag2", benchmark=task.benchmark, task_id=task.task_id, question=task.prompt,
                            ground_truth=task.ground_truth, steps=steps, final_answer=data["final_answer"],
                            verdict=verdict, recording=Recording(gateway_run_id="real-run", task=task))


def test_a_described_fix_is_written_into_the_step_in_plain_text_and_replayed():
    task, run = _real_ag2_run("ag2_gsm8k_test-474")
    modes: list[Any] = []
    prompts: list[str] = []

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        modes.append(params.get("response_format"))
        if "You are editing one message" in prompts[-1]:
            return QWEN_1_5B_REWRITTEN
        return QWEN_1_5B_RANKED_DESCRIBED if len(prompts) == 1 else json.dumps({"fix_needed": False, "reason": "fine"})

    register_script("qwen-describes", analyzer)
    chat = Chat("scripted/qwen-describes", extra={"response_format": {"type": "json_object"}})
    replay = replayer(run, task, lambda prefix, i: [("executor", "tool", "exitcode: 0 (execution succeeded)\nCode output: Answer: -33.33"),
                                                    ("critic", "agent", "TERMINATE"), ("coder", "agent", "Answer: -33.33")])
    result = find_decisive_step(run, analyzer=chat, replay=replay, budget=Budget(max_replays=5, max_candidates=1),
                                verify=verify, early_controls=False)  # the replayed calls in order are the subject

    # the rewrite prompt shows the step and the described change, never the reference answer, in plain text
    rewrite = next(p for p in prompts if "You are editing one message" in p)
    assert run.steps[1].content in rewrite and "Change the calculation to" in rewrite and "80" not in rewrite
    assert modes[prompts.index(rewrite)] is None and modes[0] == {"type": "json_object"}
    assert chat.extra == {"response_format": {"type": "json_object"}}  # JSON mode given back
    # the coder's step 1 first states the wrong 25.0: its answer replaced by the task's 80 is tried first (failed here)
    assert replay.calls[0].step == 1 and result.attempts[0].diagnosis.source == "grounded"
    # then what was replayed is the message the analyzer wrote, and the evidence says how it came about
    assert replay.calls[1].step == 1 and replay.calls[1].new_content == QWEN_1_5B_REWRITTEN
    attempt = result.attempts[1]
    assert attempt.diagnosis.instruction.startswith("Change the calculation to") and attempt.replay.success_after is False
    assert any("written from the analyzer's description" in note for note in result.annotation.evidence.notes)
    # the scan: the critic's step 3 and the coder's step 4 repeat the 25.0 that step 1's program printed; step 1 was
    # tried, so each gets the task's 80 in its place with no analyzer call (each fails here)
    assert [(c.step, "80" in c.new_content) for c in replay.calls[2:4]] == [(3, True), (4, True)]
    # the questions after them (the programs of steps 6 and 7) show what the last replay ended with
    later = prompts[prompts.index(rewrite) + 1:]
    assert later and all('still failed (final answer: "Answer: -33.33"; verifier: {' in p for p in later)


def test_a_rewrite_that_is_still_a_description_or_unchanged_is_refused():
    from rootstep.annotation._propose import rewrite_step

    _, run = _real_ag2_run("ag2_gsm8k_test-474")
    step = run.steps[1]
    for bad in ("The coder should have divided by 3/4.", step.content):
        chat, _ = scripted(f"rewrite-bad-{len(bad)}", [bad, bad])
        log: list[Asked] = []
        text, why = rewrite_step(chat, step, "Change the calculation", "", run.question,
                                 Meter(Budget(max_write_reasks=1)), log)
        assert text is None and ("describes a change" in why or "unchanged" in why) and len(log) == 2
        chat, prompts = scripted(f"rewrite-bad-once-{len(bad)}", [bad, bad])
        text, why = rewrite_step(chat, step, "Change the calculation", "", run.question, Meter(Budget()), [])
        assert text is None and "after 0 re-ask(s)" in why and len(prompts) == 1  # by default not asked again
    chat, _ = scripted("rewrite-preface", ["Here is the corrected message:\n" + QWEN_1_5B_REWRITTEN])
    text, why = rewrite_step(chat, step, "Change the calculation", "", run.question, Meter(Budget()), [])
    assert (text, why) == (QWEN_1_5B_REWRITTEN, None)


def test_a_described_fix_is_first_sought_by_retaking_the_step_in_the_agents_seat():
    """AG2 on GSM8K test-120 (the main job on a fresh machine): the 1.5B analyzer found the coder's step 1 wrong
    but only described a (wrong) change; in the coder's seat, asked the coder's own recorded request, it wrote the
    working (2 pads x 30 sheets x 4 weeks = 240) and the replay with it succeeded: the label coder@1 (the first
    agent step, so nothing earlier to clear). The reference answer is in no retake request."""
    from pathlib import Path

    data = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / "ag2_gsm8k_test-120.json").read_text())
    task, run = _real_ag2_run("ag2_gsm8k_test-120")
    ranked, retaken = data["analyzer_replies"]
    sent: list[list[dict[str, Any]]] = []

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        sent.append(messages)
        if "You are the analyzer" in messages[-1]["content"]:
            return ranked if len(sent) == 1 else json.dumps({"fix_needed": False, "reason": "fine"})
        return retaken

    register_script("qwen-retakes", analyzer)
    chat = Chat("scripted/qwen-retakes", extra={"response_format": {"type": "json_object"}})
    # the live team succeeds from the retaken working; the coder's own wrong working with its box given the task's
    # 240 (tried first, the grounded phase) still loses the critic
    replay = replayer(run, task, lambda prefix, i: [
        ("executor", "tool", "exitcode: 0 (execution succeeded)\nCode output: "),
        ("critic", "agent", "The answer 240 is correct. TERMINATE")] if i.new_content.strip() == retaken.strip() else [
        ("executor", "tool", "exitcode: 0 (execution succeeded)\nCode output: 30.0"), ("critic", "agent", "TERMINATE")])
    result = find_decisive_step(run, analyzer=chat, replay=replay, budget=Budget(max_candidates=1), verify=verify,
                                step_request=lambda step: data["requests"].get(str(step.index)))

    assert sent[1] == data["requests"]["1"]  # the coder's own request, as recorded: no reference answer in it
    assert "240" not in json.dumps(sent[1])
    # its prompt asks for a code block: the prose retake was asked once more for it and, still prose, the first taken
    assert sent[2][:len(sent[1])] == sent[1] and "ask for a Python code block" in sent[2][-1]["content"]
    fixes = [c for c in replay.calls if c.kind == "fix"]
    grounded = run.steps[1].content.replace("\\boxed{30}", "\\boxed{240}")
    assert [(c.step, c.new_content) for c in fixes] == [(1, grounded), (1, retaken.strip())]
    a = result.annotation
    assert (a.status, a.verified, a.agent, a.step) == ("labelled", True, "coder", 1)
    assert [x.diagnosis.written for x in result.attempts] == ["answer", "retake"]
    assert any("retaken by the analyzer's model in the agent's seat" in n for n in a.evidence.notes)
    # the flip has its control: the one replayed beside the grounded fix, in another thread
    assert sorted(r.intervention.kind for r in result.replays) == ["control", "fix", "fix"]


def test_a_step_is_retaken_once_per_search():
    """The main job on a fresh machine (GSM8K test-474): the 1.5B analyzer described a change at the coder's step
    1 twice; each time the step was retaken from the coder's recorded request, and the 1.5B looped to its room
    both times (89 s, 139 s: the same answer). The retake is asked once per search; the second description of
    the step goes straight to the rewrite of the step, whose replay is the one new try."""
    from pathlib import Path

    data = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / "ag2_gsm8k_test-120.json").read_text())
    task, run = _real_ag2_run("ag2_gsm8k_test-120")
    ranked, retaken = data["analyzer_replies"]
    sent: list[str] = []

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        last = messages[-1]["content"]
        if "You are the analyzer" in last:
            sent.append("analyzer")
            return ranked  # the same described change at step 1, each time
        if "You are editing one message" in last:
            sent.append("rewrite")
            return QWEN_1_5B_REWRITTEN
        sent.append("retake")
        return retaken

    register_script("qwen-retakes-once", analyzer)
    chat = Chat("scripted/qwen-retakes-once", extra={"response_format": {"type": "json_object"}})
    replay = replayer(run, task, lambda prefix, i: [  # no fix flips this run
        ("executor", "tool", "exitcode: 0 (execution succeeded)\nCode output: 30.0"), ("critic", "agent", "TERMINATE")])
    result = find_decisive_step(run, analyzer=chat, replay=replay, budget=Budget(max_candidates=2, max_reasks=1),
                                verify=verify, step_request=lambda step: data["requests"].get(str(step.index)))

    assert sent.count("retake") == 2, sent  # once, and once more for the code block its prompt asks for
    fixes = [c.new_content for c in replay.calls if c.kind == "fix"]
    assert fixes.count(retaken.strip()) == 1  # the retake replayed once, never asked for again
    assert result.annotation.status == "unresolved"


# The main job on a fresh machine (2026-11-28, GSM8K test-474), recorded from the gateway: the AG2 coder's request
# at step 1 (its system prompt asks for a Python code block), the 1.5B's retake in that seat (the right 80, in
# prose: the executor found no code, the critic wrote code printing 20 and the replay failed), and its fix of
# steps 3 and 4 given as an object {"code": ...} (refused twice as "not text").
CODER_474_REQUEST = [{"content": "You are the coder of a small team. Solve the math problem step by step. Write a short Python code block (```python ... ```) that computes the answer and prints it. End your message with a line `Answer: <number>`: the number alone, no units and no words.\nWhen the critic reports a problem, answer with a corrected complete version. Never write TERMINATE yourself.\n", "role": "system"}, {"content": "At a certain grade level, three-fourths of students have a desktop computer at home. If 20 students do not have desktop computers, how many students are there at that grade level?", "name": "executor", "role": "user"}]
RETAKE_474_PROSE = "To determine the total number of students at the grade level, we start by defining the total number of students as \\( x \\). According to the problem, three-fourths of the students have a desktop computer at home. Therefore, the number of students who have a desktop computer is \\( \\frac{3}{4}x \\).\n\nWe are also given that 20 students do not have desktop computers. This means that the number of students who have a desktop computer is the total number of students minus the number of students who do not have a desktop computer. We can express this relationship with the following equation:\n\\[\n\\frac{3}{4}x = x - 20\n\\]\n\nNext, we need to solve this equation for \\( x \\). First, we eliminate the fraction by subtracting \\( \\frac{3}{4}x \\) from both sides of the equation:\n\\[\nx - \\frac{3}{4}x = -20\n\\]\n\nThis simplifies to:\n\\[\n\\frac{1}{4}x = -20\n\\]\n\nTo isolate \\( x \\), we multiply both sides of the equation by 4:\n\\[\nx = -20 \\times 4\n\\]\n\nThis gives us:\n\\[\nx = -80\n\\]\n\nHowever, this result is not possible because the number of students cannot be negative. Let's re-evaluate the problem. The correct interpretation should be that the number of students who have a desktop computer is the total number of students minus the number of students who do not have a desktop computer, which is:\n\\[\n\\frac{3}{4}x = x - 20\n\\]\n\nRearranging the equation correctly, we get:\n\\[\n\\frac{3}{4}x - x = -20\n\\]\n\nThis simplifies to:\n\\[\n-\\frac{1}{4}x = -20\n\\]\n\nMultiplying both sides by 4, we get:\n\\[\nx = 80\n\\]\n\nTherefore, the total number of students at the grade level is \\(\\boxed{80}\\)."
FIX_474_CODE_OBJECT = "{\n  \"mistake_step\": 4,\n  \"mistake_agent\": \"coder\",\n  \"reason\": \"The code output 'Answer: 25.0' is the expected output, but it is not the actual output of the code. The actual output is the result of the code execution, which is 25.0.\",\n  \"suggested_fix\": {\n    \"code\": \"total_students = 80\\n# Calculate the number of students who have a desktop computer\\ndesktop_computers = (3/4) * total_students\\n# Calculate the number of students who do not have a desktop computer\\nnon_desktop_computers = total_students - desktop_computers\\n# Print the result\\nprint(non_desktop_computers)\"\n  }\n}"
ECHOED_COMPLAINT = ("Your instructions ask for a Python code block (```python ... ```) and the answer has none. Please "
                    "provide the correct answer so that I can assist you with a code block.")  # the 1.5B, test-1101
# the 1.5B asked for the code block in the coder's seat (GSM8K test-1101, the same day): the retake replayed and labelled
RETAKE_1101_CODE = "Sure! Here's a simple Python code block to solve the problem:\n\n```python\n# Given values\ntotal_distance = 52\namber_distance = 8\nmicah_distance = 3.5 * amber_distance\n\n# Calculate Ahito's distance\nahito_distance = total_distance - (amber_distance + micah_distance)\nprint(\"Ahito ran\", ahito_distance, \"miles.\")\n```\n\nWhen you run this code, it will output: \"Ahito ran 16 miles.\""


def test_a_retake_keeps_the_code_block_the_agents_instructions_ask_for():
    from rootstep.annotation._propose import asks_for_code, retake_step

    task, run = _real_ag2_run("ag2_gsm8k_test-474")
    assert asks_for_code(CODER_474_REQUEST)
    assert not asks_for_code([{"role": "system", "content": "You are the critic of a small team."}])
    chat, prompts = scripted("retake-code-form", [RETAKE_474_PROSE, RETAKE_1101_CODE])
    log: list[Asked] = []
    text, why = retake_step(chat, CODER_474_REQUEST, run.steps[1], Meter(Budget(max_reasks=1)), log)
    assert (text, why) == (RETAKE_1101_CODE, None)
    assert "ask for a Python code block" in prompts[1] and "has none" in prompts[1]
    # asked once more and still without code, the first prose answer is taken: the team may work from it
    # (test-120 flipped so); not the second, which the 1.5B once made an echo of the complaint (GSM8K test-1101)
    chat, prompts = scripted("retake-prose-twice", [RETAKE_474_PROSE, ECHOED_COMPLAINT])
    text, why = retake_step(chat, CODER_474_REQUEST, run.steps[1], Meter(Budget(max_reasks=1)), [])
    assert text == RETAKE_474_PROSE.strip() and why is None and len(prompts) == 2
    # a critic's seat asks for no code: its prose stands
    chat, _ = scripted("retake-prose", [RETAKE_474_PROSE])
    critic = [{"role": "system", "content": "You are the critic of a small team."}, CODER_474_REQUEST[1]]
    text, why = retake_step(chat, critic, run.steps[1], Meter(Budget(max_reasks=1)), [])
    assert text == RETAKE_474_PROSE.strip() and why is None


def test_a_fix_given_as_a_code_object_is_that_code():
    from rootstep.annotation._propose import validate_diagnosis

    task, run = _real_ag2_run("ag2_gsm8k_test-474")
    diagnosis, problem = validate_diagnosis(run, FIX_474_CODE_OBJECT, expect_step=4)
    assert problem is None and diagnosis.fix.startswith("```python\ntotal_students = 80\n")
    assert diagnosis.fix.endswith("print(non_desktop_computers)\n```")
    for bad in ({"code": ""}, {"code": "x", "why": "y"}, {"steps": ["a"]}):
        answer = json.dumps({"mistake_step": 4, "mistake_agent": run.steps[4].agent, "suggested_fix": bad})
        diagnosis, problem = validate_diagnosis(run, answer, expect_step=4)
        assert diagnosis is None and "non-empty corrected text" in problem


def test_what_a_failed_replay_ended_with_keeps_its_lines():
    """AG2 on MATH-500 number_theory/255 (slice of 2026-11-28, seed 4): the analyzer read a failed replay's final
    answer with its code flattened onto one line ('```python # Step 1: ... from decimal import Decimal fraction =
    ...') and copied it into its next fixes of steps 3, 4, 6 and 10: programs that were one comment and printed
    nothing. The answer's lines and indentation are kept (escaped, as the fix beside it is)."""
    from rootstep.annotation._trial import replay_said

    final = ("```python\n# Step 1: Convert the fraction to a decimal\nfrom decimal import Decimal\n\n"
             "for d in str(Decimal(137) / Decimal(500)):\n    if d != '0':\n        last = d\nprint(last)\n```")
    run = Trajectory(framework="ag2", benchmark="math500", task_id="255", question="q", ground_truth="4",
                     steps=[Step(index=0, agent="executor", kind="human", content="q")], final_answer=final)
    said = replay_said(run, Verdict(success=False, score=0.0, details={"expected": "4", "extracted": "7"}))
    shown = json.loads(said.split("final answer: ", 1)[1].split("; verifier: ")[0])
    assert shown == final.replace("\n\n", "\n")  # every line, the loop's indentation too; blank lines dropped
    assert '"extracted": "7"' in said


def test_a_step_stating_an_answer_the_verifier_rejects_is_not_judged_correct():
    """AgentPrune on MATH-500 number_theory/634 (slice of 2026-11-28, seed 4): every agent wrote `Answer: 997`
    (997^-1 mod 1000 is 333); the 1.5B's ranked answers named the task (step 0) twice, then it judged all nine
    agent steps correct, and the search ended with nothing replayed. A step whose stated answer the verifier
    rejects is not judged correct: the first to state it is corrected with the task's answer in place of its own
    (`from_answer`), with no analyzer call, and the replay of that correction flips the run."""
    [task] = [t for t in load_tasks("math500") if t.task_id == "test/number_theory/634.json"]
    agents = ["math_solver", "programmer", "analyst", "inspector"] * 2 + ["decision"]
    run = run_of(task, [("user", "human", f"The task is:\n\n{task.prompt}\n")] + [(a, "agent", "Answer: 997") for a in agents])
    assert run.success is False
    fix = "997 = -3 (mod 1000) and -3 x 333 = -999 = 1 (mod 1000), so the inverse is 333.\nAnswer: 333"

    def answers(prompt: str, n: int) -> str:
        if "Examine step" in prompt:  # "is it correct?": the real 1.5B said yes to every step
            return json.dumps({"fix_needed": False, "reason": "The step gives the answer 997, which is correct."})
        if "Write a corrected version of step" in prompt:
            step = int(prompt.split("Write a corrected version of step ", 1)[1].split(" ", 1)[0])
            return json.dumps({"mistake_step": step, "mistake_agent": run.steps[step].agent,
                               "reason": "997 is not the inverse of 997 modulo 1000.", "suggested_fix": fix})
        return json.dumps({"mistake_step": 0, "mistake_agent": "user", "reason": "wrong", "suggested_fix": "x"})

    chat, prompts = scripted("wrong-answer-steps", answers)
    replay = replayer(run, task, lambda prefix, i: [(a, "agent", "Answer: 333" if "333" in i.new_content else "Answer: 997")
                                                    for a in agents[i.step:]])
    result = find_decisive_step(run, analyzer=chat, replay=replay, budget=Budget(), verify=verify)

    a = result.annotation
    assert (a.status, a.verified, a.agent, a.step) == ("labelled", True, "math_solver", 1)
    assert not any("Examine step 1 " in p for p in prompts)  # never asked whether step 1 is correct
    assert any("step 1 (math_solver) first states the wrong answer '997', which the verifier rejects" in n
               for n in a.evidence.notes)
    assert [(c.step, c.new_content) for c in replay.calls if c.kind == "fix"] == [(1, "Answer: 333")]


def test_a_step_with_no_stated_answer_may_still_be_judged_correct():
    """The check reads only an answer the step states where the prompts ask for one: a plan or a delegation
    states none, and the analyzer's "correct" stands for it (a coding task's steps are not verified at all)."""
    [task] = [t for t in load_tasks("math500") if t.task_id == "test/number_theory/634.json"]
    run = run_of(task, [("user", "human", task.prompt), ("planner", "agent", "Find x with 997 x = 1 (mod 1000)."),
                        ("solver", "agent", "Answer: 997")])

    def answers(prompt: str, n: int) -> str:
        if "Examine step" in prompt:
            return json.dumps({"fix_needed": False, "reason": "A correct plan."})
        if "Write a corrected version of step 2" in prompt:
            return json.dumps({"mistake_step": 2, "mistake_agent": "solver", "reason": "wrong inverse",
                               "suggested_fix": "-3 x 333 = -999 = 1 (mod 1000).\nAnswer: 333"})
        return json.dumps({"mistake_step": 0, "mistake_agent": "user", "reason": "wrong", "suggested_fix": "x"})

    chat, prompts = scripted("planner-correct", answers)
    replay = replayer(run, task, lambda prefix, i: [])
    result = find_decisive_step(run, analyzer=chat, replay=replay, budget=Budget(), verify=verify)
    a = result.annotation
    assert (a.status, a.agent, a.step) == ("labelled", "solver", 2)
    assert any("Examine step 1 " in p for p in prompts)  # the plan was asked about, and judged correct
    assert "step 1 (planner): judged correct by the analyzer" in a.evidence.notes


def test_a_fix_that_states_a_wrong_answer_is_not_a_correction():
    """AgentPrune on MATH-500 number_theory/255 (slice of 2026-11-28, seed 4): the math solver's first step was
    right (0.274, last nonzero digit \\boxed{4}); the 1.5B's retake of it ended `\\boxed{7}`, the replay flipped
    anyway (its decision agent answered 4 by chance) and math_solver@1 was labelled. A fix whose stated answer
    the verifier rejects is refused, whatever its replay would do."""
    [task] = [t for t in load_tasks("math500") if t.task_id == "test/number_theory/255.json"]
    assert task.ground_truth == "4"
    solver = "137/500 = 0.274, so the last nonzero digit is 4.\n\nTherefore the answer is \\(\\boxed{4}\\)."
    run = run_of(task, [("user", "human", task.prompt), ("math_solver", "agent", solver), ("programmer", "agent", "Answer: 7"),
                        ("decision", "agent", "Answer: 7")])
    wrong_fix = ("```python\nprint(int(str(137 / 500).split('.')[1].rstrip('0')))\n```\n```output\n7\n```\n"
                 "The last nonzero digit is \\(\\boxed{7}\\).")

    def answers(prompt: str, n: int) -> str:
        return json.dumps({"mistake_step": 1, "mistake_agent": "math_solver", "reason": "0.274 is not the decimal "
                           "expansion of 137/500", "suggested_fix": wrong_fix, "fix_needed": True})

    chat, prompts = scripted("wrong-fix", answers)
    replay = replayer(run, task, lambda prefix, i: [("programmer", "agent", "Answer: 7"), ("decision", "agent", "Answer: 4")])
    result = find_decisive_step(run, analyzer=chat, replay=replay, budget=Budget(max_candidates=1), verify=verify)
    assert not any("boxed{7}" in c.new_content for c in replay.calls)  # never replayed
    assert result.annotation.step != 1 or not result.annotation.verified
    # the step it "fixes" already states the right 4 (`right_already`, checked first; the fix's own wrong 7 is
    # `wrong_answer`, refused the same way at a step without a right answer: the next test's MetaGPT retake)
    assert any("right_already: step 1 (math_solver) already states the answer '4'" in p for p in prompts[1:])
    assert result.annotation.answer_leaks == 0  # a wrong answer is not a leak


def test_a_fix_is_judged_by_what_its_program_prints_not_by_its_prose():
    """MetaGPT on MATH-500 number_theory/255 (slice of 2026-11-28, seed 4): the retaken coder step printed the
    right `Answer: 4` from its program and then claimed `Answer: 7` in prose; its replay flipped (the team ran
    the program). The program's output is the fix's answer, as the same-answer guard reads it: not refused."""
    [task] = [t for t in load_tasks("math500") if t.task_id == "test/number_theory/255.json"]
    run = run_of(task, [("user", "human", task.prompt), ("coder", "agent", "```python\nprint(137 // 500 % 10)\n```\nAnswer: 0"),
                        ("runner", "tool", "0")], final="```python\nprint(137 // 500 % 10)\n```\nAnswer: 0")
    fix = ("```python\ndecimal_expansion = str(137 / 500)\nlast = decimal_expansion.split('.')[1][-1]\n"
           "print(f\"Answer: {last}\")\n```\n\nAnswer: 7")

    def run_program(code: str) -> str:  # what the sandbox printed for these two programs
        return "Answer: 4\n" if "decimal_expansion" in code else "0\n"

    chat, prompts = scripted("program-judged", lambda prompt, n: json.dumps(
        {"mistake_step": 1, "mistake_agent": "coder", "reason": "137 // 500 is not the decimal expansion",
         "suggested_fix": fix}))
    replay = replayer(run, task, lambda prefix, i: [("runner", "tool", "Answer: 4" if "decimal_expansion" in i.new_content else "0")])
    find_decisive_step(run, analyzer=chat, replay=replay, budget=Budget(max_candidates=1), verify=verify,
                       run_program=run_program)
    assert [c.new_content for c in replay.calls if c.kind == "fix"] == [fix]  # replayed, not refused
    assert not any("which the task's verifier rejects" in p for p in prompts)
