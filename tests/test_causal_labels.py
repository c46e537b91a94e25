"""Causal labels (issue 23) in the pure annotation core: controls, proven-identical controls, the earliest
step established, answer leaks, several causes, confidence from repeats.

The replayed "teams" are small simulations with a known truth (as in test_annotation_core.py): a flaky
team whose unchanged replay succeeds too, a team whose later calls are deterministic, and an ensemble of
solvers whose aggregator follows the majority. The analyzer is a scripted model through `tracers.Chat`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import pytest

from rootstep.gateway import register_script
from rootstep.benchmarks import verify
from rootstep.benchmarks._suspect import answer_leak, gives_answer, planted_answer
from rootstep.annotation import Budget, ReplayOutcome, find_decisive_step, inject_fault
from rootstep.annotation._attempt import edit_size, proven_identical
from rootstep.annotation import band, effect, wilson
from rootstep.tracers._llm import Chat
from rootstep.warehouse import Intervention, LLMCall, Recording, Step, Task, Trajectory, Usage, Verdict

GSM = Task(benchmark="gsm8k", task_id="t-994", verifier="numeric", kind="math", ground_truth="2",
           prompt="A video lasts 120 seconds. How many minutes is that?")


def scripted(name: str, answer: Callable[[str, int], str]) -> tuple[Chat, list[str]]:
    prompts: list[str] = []

    def fn(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        return answer(prompts[-1], len(prompts) - 1)

    register_script(name, fn)
    return Chat(f"scripted/{name}"), prompts


def at_step(prompt: str) -> int | None:
    m = re.search(r"STEP UNDER EXAMINATION: step (\d+)", prompt)
    return int(m.group(1)) if m else None


def fix_json(step: int, agent: str, fix: str) -> str:
    return json.dumps({"mistake_step": step, "mistake_agent": agent, "reason": "wrong unit", "suggested_fix": fix,
                       "fix_needed": True})


class Ensemble:
    """Three solvers answer independently, an aggregator states the majority. Every solver says 120 (the
    seconds, not the minutes): fixing one solver leaves the majority wrong; only the joint fix flips it.
    A forced step's text is taken as is; the solvers after it answer live (120 unless forced)."""

    AGENTS = ["solver_a", "solver_b", "solver_c", "aggregator"]

    def __init__(self, flaky: bool = False):
        self.flaky = flaky  # an unchanged replay succeeds too (a re-roll)
        self.calls: list[Intervention] = []

    @staticmethod
    def number(text: str) -> str:
        return re.findall(r"\d+", text)[-1]

    def run(self, forced: dict[int, str] | None = None) -> Trajectory:
        forced = forced or {}
        steps = [Step(index=0, agent="user", kind="human", content=GSM.prompt)]
        answers = []
        for i, agent in enumerate(self.AGENTS[:3], start=1):
            text = forced.get(i, "The video lasts 120 seconds, so the answer is 120.\nAnswer: 120")
            answers.append(self.number(text))
            steps.append(Step(index=i, agent=agent, content=text, call_ids=[f"c{i}"]))
        majority = max(set(answers), key=answers.count)
        final = forced.get(4, f"The solvers agree.\nAnswer: {majority}")
        steps.append(Step(index=4, agent="aggregator", content=final, call_ids=["c4"]))
        v = verify(GSM, final)
        return Trajectory(framework="sim", benchmark="gsm8k", task_id=GSM.task_id, question=GSM.prompt,
                          ground_truth="2", steps=steps, final_answer=final, verdict=v,
                          recording=Recording(gateway_run_id="ledger-run", task=GSM))

    def replay(self, i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        self.calls.append(i)
        forced = {x.step: x.new_content for x in [i, *i.also] if x.kind != "control"}
        result = self.run(forced)
        if self.flaky and i.kind == "control":  # the unchanged run re-rolled into a success
            result = self.run({4: "Converting: 120 seconds is 2 minutes.\nAnswer: 2"})
        return result, result.verdict, ReplayOutcome(cost=Usage(llm_calls=4 - i.step))


RIGHT = "120 seconds are 120 / 60 = 2 minutes.\nAnswer: 2"


def test_a_flip_whose_control_flips_too_is_not_causal_and_never_a_label():
    team = Ensemble(flaky=True)
    run = team.run()
    assert run.success is False
    analyzer, prompts = scripted("causal-flaky", lambda p, n: fix_json(4, "aggregator", RIGHT) if at_step(p) is None
                                 else json.dumps({"fix_needed": False, "reason": "the solver's step is fine"}))
    result = find_decisive_step(run, analyzer=analyzer, replay=team.replay, verify=verify,
                                budget=Budget(max_candidates=1))
    a = result.annotation
    assert (a.status, a.verified) == ("not_causal", False)
    assert "control replays (the step unchanged) flipped" in a.evidence.reason
    assert [r.intervention.kind for r in result.replays] == ["fix", "control"]
    assert a.evidence.replay_ids == [r.id for r in result.replays]  # stored with its replays
    assert result.attempts[0].not_causal and not result.attempts[0].success


def test_a_deterministic_control_is_proven_identical_without_a_replay():
    team = Ensemble()
    run = team.run()
    analyzer, _ = scripted("causal-det", lambda p, n: fix_json(4, "aggregator", RIGHT) if at_step(p) is None
                           else json.dumps({"fix_needed": False, "reason": "fine"}))
    why = "the 0 recorded call(s) after step 4 were answered deterministically"
    result = find_decisive_step(run, analyzer=analyzer, replay=team.replay, verify=verify,
                                budget=Budget(max_candidates=1), deterministic=lambda step: why)
    a = result.annotation
    assert (a.status, a.verified, a.step) == ("labelled", True, 4)
    assert [r.intervention.kind for r in result.replays] == ["fix"]  # no control replayed
    check = a.metadata["flip_check"]
    assert check["controls_replayed"] == [] and check["controls_proven_identical"] == 1
    assert check["proven_identical_because"] == why
    # the control side is known exactly: the confidence is the fix side's Wilson lower bound
    assert a.metadata["confidence"] == pytest.approx(wilson(1, 1)[0], abs=1e-4)


def test_proven_identical_reads_the_recorded_calls_after_the_step():
    def call(i: int, provider: str, temperature: float | None, mode: str = "live") -> LLMCall:
        request = {"messages": [{"role": "user", "content": str(i)}]}
        if temperature is not None:
            request["temperature"] = temperature
        return LLMCall(run_id="r", framework="sim", benchmark="b", agent="a", request_hash=f"h{i}", counter=0,
                       model=f"{provider}/m", provider=provider, mode=mode, step_index=i, request=request)

    step = Step(index=1, agent="a", content="x")
    scripted = [call(0, "scripted", 0), call(1, "scripted", 0), call(2, "scripted", 0.0), call(3, "scripted", 0)]
    assert "2 recorded call(s) after step 1" in proven_identical(scripted, step)
    assert proven_identical([*scripted, call(4, "openai", 0)], step) is None  # a remote provider may sample
    assert proven_identical([*scripted, call(4, "scripted", 0.7)], step) is None
    # llama.cpp at temperature 0 is not deterministic across runs (prompt cache, batched decoding): replayed
    assert proven_identical([*scripted, call(4, "local", 0)], step) is None
    assert proven_identical([*scripted, call(4, "openai", 0.7, mode="cached")], step) is not None
    assert proven_identical(scripted, Step(index=9, agent="a", content="x")) is None  # no call of the step


def test_a_fix_that_hands_over_the_answer_at_a_step_that_gave_none_is_rejected_and_reasked():
    team = Ensemble()
    run = team.run()
    plan = "Plan: read the question, then convert the duration into the unit asked for."
    leaked = "Plan: convert 120 seconds to minutes. The answer is 2."
    run.steps[1] = run.steps[1].model_copy(update={"content": plan})
    assert not gives_answer(GSM, plan) and answer_leak(GSM, plan, leaked, verify) is not None
    assert answer_leak(GSM, run.steps[2].content, RIGHT, verify) is None  # correcting a wrong answer is fine
    answers = iter([fix_json(1, "solver_a", leaked), fix_json(2, "solver_b", RIGHT)])
    analyzer, prompts = scripted("causal-leak", lambda p, n: next(answers) if at_step(p) is None
                                 else json.dumps({"fix_needed": False, "reason": "fine"}))
    result = find_decisive_step(run, analyzer=analyzer, replay=team.replay, verify=verify,
                                budget=Budget(max_candidates=1))
    assert "answer_leak" in prompts[1] and "hand over the answer" in prompts[1]  # re-asked with the reason
    assert all(i.new_content != leaked for i in team.calls)  # never replayed
    assert result.annotation.metadata["answer_leaks"] == 1
    assert any(n.startswith("answer_leak rejected") for n in result.annotation.evidence.notes)


def test_an_ensemble_repeating_one_error_gets_a_multi_step_label_not_the_aggregator():
    team = Ensemble()
    run = team.run()

    def answer(prompt: str, n: int) -> str:
        step = at_step(prompt)
        if step is None:
            return fix_json(4, "aggregator", RIGHT)  # the symptom: the aggregator's answer
        return fix_json(step, Ensemble.AGENTS[step - 1], RIGHT)

    analyzer, _ = scripted("causal-joint", answer)
    result = find_decisive_step(run, analyzer=analyzer, replay=team.replay, verify=verify,
                                budget=Budget(max_candidates=1))
    a = result.annotation
    # fixes at 1, 2 and 3 alone keep the majority's 120; their joint fix flips, and its control fails
    assert [x.steps for x in result.attempts] == [[4], [1], [2], [3], [1, 2, 3]]
    assert (a.status, a.verified, a.step, a.agent) == ("labelled", True, 1, "solver_a")
    assert a.metadata["multi_step"] is True and a.metadata["steps"] == [1, 2, 3]
    assert a.metadata["agents"] == ["solver_a", "solver_b", "solver_c"]
    joint = next(r for r in result.replays if r.intervention.also)
    assert [x.step for x in joint.intervention.also] == [2, 3] and joint.success_after is True
    assert "[step 2, solver_b]" in a.evidence.fix


def test_repeats_give_flip_counts_on_both_sides_and_a_confidence():
    team = Ensemble()
    run = team.run()
    analyzer, _ = scripted("causal-repeats", lambda p, n: fix_json(4, "aggregator", RIGHT) if at_step(p) is None
                           else json.dumps({"fix_needed": False, "reason": "fine"}))
    result = find_decisive_step(run, analyzer=analyzer, replay=team.replay, verify=verify,
                                budget=Budget(max_candidates=1), repeats=3, controls=1)
    a = result.annotation
    check = a.metadata["flip_check"]
    assert (check["flips"], check["trials"], check["control_flips"], check["control_trials"]) == (3, 3, 0, 3)
    assert len(check["repeat_replays"]) == 2 and len(check["controls_replayed"]) == 3
    assert a.metadata["confidence"] == effect(3, 3, 0, 3).confidence > 0.2
    assert a.cost.replays == 6


def test_wilson_and_the_newcombe_difference():
    low, high = wilson(1, 1)
    assert low == pytest.approx(0.2065, abs=1e-3) and high == 1.0
    assert wilson(0, 3)[1] == pytest.approx(0.5615, abs=1e-3)
    one = effect(1, 1, 0, 1)
    assert one.low < 0 and one.confidence == 0.0  # one fix and one control: not enough to be sure
    five = effect(5, 5, 0, 5)
    assert five.confidence == pytest.approx(0.3857, abs=1e-3) and band(five.confidence) == "medium"
    assert effect(5, 5, 0, 5, controls_exact=True).confidence == pytest.approx(wilson(5, 5)[0], abs=1e-4)
    assert band(0.6) == "high" and band(0.05) == "low" and band(None) is None


def test_edit_size_and_the_injection_mirror():
    size = edit_size("value = 10\nok", "value = 12\nok")
    assert size["chars_changed"] == 1 and size["lines_changed"] == 1 and size["share"] == pytest.approx(0.077, abs=1e-3)
    assert edit_size("abc", "abc")["chars_changed"] == 0
    plan = "Plan: convert the duration into minutes."
    assert planted_answer(GSM, plan, "Plan: convert it. Answer: 7", verify) is not None
    assert planted_answer(GSM, "Answer: 2", "Answer: 7", verify) is None  # corrupting an answer is the work
    assert planted_answer(GSM, plan, "Plan: convert the duration into hours.", verify) is None


def test_injection_needs_its_control_to_succeed_and_never_plants_an_answer():
    right = Ensemble()
    solved = right.run({1: RIGHT, 2: RIGHT, 3: RIGHT})
    assert solved.success is True
    plan_run = solved.model_copy(update={"steps": [solved.steps[0], solved.steps[1].model_copy(
        update={"content": "Plan: convert the duration into the unit asked for."}), *solved.steps[2:]]})
    planted = json.dumps({"step": 1, "corrupted_content": "Plan: convert it.\nAnswer: 7", "description": "planted"})
    honest = json.dumps({"step": 4, "corrupted_content": "The solvers agree.\nAnswer: 3", "description": "misread vote"})
    perturber, prompts = scripted("causal-inject", lambda p, n: planted if n == 0 else honest)

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        forced = {1: RIGHT, 2: RIGHT, 3: RIGHT, **({} if i.kind == "control" else {i.step: i.new_content})}
        result = right.run(forced)
        return result, result.verdict, ReplayOutcome(cost=Usage(llm_calls=1))

    result = inject_fault(plan_run, perturber, replay, Budget(max_candidates=1), programmatic=False, mode="one_shot",
                          verify=verify)
    a = result.annotation
    assert "answer_leak" in prompts[1] and "writes a final answer" in prompts[1]
    assert a is not None and (a.step, a.verified) == (4, True) and a.metadata["answer_leaks"] == 1
    assert [r.intervention.kind for r in result.replays] == ["corruption", "control"]

    def flaky(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:  # the control fails as well
        result = right.run({1: RIGHT, 2: RIGHT, 3: RIGHT, 4: "Answer: 3"})
        return result, result.verdict, ReplayOutcome(cost=Usage(llm_calls=1))

    perturber2, _ = scripted("causal-inject-flaky", lambda p, n: honest)
    again = inject_fault(plan_run, perturber2, flaky, Budget(max_candidates=1, max_replays=1), programmatic=False,
                         mode="one_shot", verify=verify)
    assert again.annotation is None and again.attempts[0].not_causal
    assert "flipped" in again.attempts[0].not_causal


def test_a_code_writing_teams_answer_is_what_its_program_prints():
    """MetaGPT on GSM8K (the issue's slice): the final answer is the coder's code; the numeric verifier
    took `60` from `... / 60` although the runner's output read `Answer:  3.0`."""
    from rootstep.benchmarks._answer import program_answer

    task = GSM.model_copy(update={"ground_truth": "3"})
    code = "```python\nseconds = 180\nanswer = seconds / 60\nprint('Answer: ', answer)\n```"
    steps = [Step(index=0, agent="user", kind="human", content=task.prompt), Step(index=1, agent="coder", content=code),
             Step(index=2, agent="runner", kind="tool", content="exit code 0\nAnswer:  3.0")]
    lifted = verify(task, code)
    assert lifted.success is False and lifted.details["reason"] == "no number in the answer"  # never 60
    answer = program_answer(task, code, steps)
    assert answer.endswith("Program output:\nAnswer:  3.0") and verify(task, answer).success
    stated = code + "\nAnswer: 3"
    assert program_answer(task, stated, [*steps[:1], steps[1].model_copy(update={"content": stated}), steps[2]]) == stated
    assert program_answer(task.model_copy(update={"kind": "coding"}), code, steps) == code
    # no program output to read: the answer is code and holds none, a plain failure (searched, not suspect)
    silent = [*steps[:2], steps[2].model_copy(update={"content": "exit code 0"})]
    assert program_answer(task, code, silent) == code


def test_views_show_confidence_every_step_of_a_label_the_flips_that_are_not_labels_and_agreement(tmp_path):
    from rootstep.warehouse import Annotation, Evidence, Usage, Warehouse

    run = Ensemble().run().model_copy(update={"source": "rootstep"})
    other = Ensemble().run({2: RIGHT}).model_copy(update={"source": "rootstep", "task_id": "t-2"})
    wh = Warehouse(str(tmp_path))
    wh.write_trajectories([run, other])

    def ann(run_id: str, **kw: Any) -> Annotation:
        return Annotation(run_id=run_id, framework="sim", benchmark="gsm8k", method="counterfactual",
                          annotator="scripted/a", cost=Usage(llm_calls=4, replays=2), **kw)

    label = ann(run.id, agent="solver_a", step=1, verified=True, evidence=Evidence(reason="joint"),
                metadata={"steps": [1, 2, 3], "multi_step": True, "confidence": 0.25, "answer_leaks": 1,
                          "edit": {"share": 0.1}})
    unproven = ann(other.id, agent="aggregator", step=4, status="unproven_earliest", evidence=Evidence(reason="u"),
                   metadata={"steps": [4], "confidence": 0.0})
    again = ann(run.id, agent="aggregator", step=4, verified=False, evidence=Evidence(reason="re-check"),
                metadata={"recheck_of": label.id, "recheck_agrees": False, "steps": [4], "confidence": 0.6})
    wh.write_annotations([label, unproven, again])

    [row] = wh.rows("SELECT id, confidence FROM labels")
    assert row == {"id": label.id, "confidence": 0.25}  # the re-check is never a label
    steps = wh.rows("SELECT step, agent, is_primary, multi_step FROM label_steps ORDER BY step")
    assert steps == [{"step": 1, "agent": "solver_a", "is_primary": True, "multi_step": True},
                     {"step": 2, "agent": "solver_b", "is_primary": False, "multi_step": True},
                     {"step": 3, "agent": "solver_c", "is_primary": False, "multi_step": True}]
    assert [r["run_id"] for r in wh.rows("SELECT run_id FROM unproven_earliest")] == [other.id]
    [agreement] = wh.rows("SELECT label_step, recheck_step, agrees FROM agreement")
    assert agreement == {"label_step": 1, "recheck_step": 4, "agrees": False}  # a re-check that landed elsewhere
    [q] = wh.rows("SELECT * FROM quality")
    assert (q["counterfactual_labels"], q["unproven_earliest"], q["multi_step_labels"], q["answer_leaks"]) == (1, 1, 1, 1)
    assert (q["confidence_medium"], q["confidence_high"], q["rechecks"], q["agreement"]) == (1, 0, 1, 0.0)
    assert q["median_edit_share"] == 0.1


def test_the_step_that_gave_the_runs_answer_may_be_corrected_into_one():
    """A coder whose final message held prose instead of code gave a (wrong) answer: correcting it with the
    program is legitimate, not a leak, although the step held no code."""
    team = Ensemble()
    run = team.run({4: "The solvers could not agree on a value."})
    assert run.success is False and run.final_answer == run.steps[4].content
    analyzer, prompts = scripted("causal-answer-step", lambda p, n: fix_json(4, "aggregator", RIGHT) if at_step(p) is None
                                 else json.dumps({"fix_needed": False, "reason": "fine"}))
    result = find_decisive_step(run, analyzer=analyzer, replay=team.replay, verify=verify, budget=Budget(max_candidates=1))
    assert result.annotation.metadata["answer_leaks"] == 0 and result.attempts[0].diagnosis.step == 4


def test_correcting_a_result_worked_out_in_prose_is_not_a_leak():
    # the OpenAI Agents SDK example's solver (tests/fixtures/systems/openai_agents_handoffs): it states its
    # result in its own words, with no answer line; the fix keeps the text and corrects the numbers
    from pathlib import Path

    from rootstep.warehouse import Task

    folder = Path(__file__).parent / "fixtures" / "systems" / "openai_agents_handoffs"
    wrong, right = (next(r for r in json.loads((folder / f"{name}.json").read_text())["replies"]["solver"])
                    for name in ("wrong", "right"))
    wrong, right = (r["content"] if isinstance(r, dict) else r for r in (wrong, right))
    task = Task(benchmark="gsm8k", task_id="t", kind="math", verifier="numeric", ground_truth="18", prompt="eggs?")
    assert "Answer:" not in wrong and answer_leak(task, wrong, right, verify) is None
    plan = "I will hand the egg problem to the solver, who computes what Janet sells; then the reviewer checks it."
    assert answer_leak(task, plan, "Janet sells 9 eggs a day at $2: she makes $18.", verify) is not None
