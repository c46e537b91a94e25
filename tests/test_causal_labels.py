"""Causal labels (issue 23) in the pure annotation core: controls, proven-identical controls, the earliest
step established, answer leaks, several causes, confidence from repeats.

The replayed "teams" are small simulations with a known truth (as in test_annotation_core.py): a flaky
team whose unchanged replay succeeds too, a team whose later calls are deterministic, and an ensemble of
solvers whose aggregator follows the majority. The analyzer is a scripted model through `gateway.Chat`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

import pytest

from rootstep.gateway import register_script
from rootstep.benchmarks import verify
from rootstep.benchmarks._suspect import answer_leak, gives_answer, planted_answer, same_answer
from rootstep.annotation import Budget, ReplayOutcome, find_decisive_step, inject_fault
from rootstep.annotation._trial import edit_size, edit_summary, proven_identical, unfounded_description
from rootstep.annotation import band, effect, probability_greater, wilson
from rootstep.gateway import Chat
from rootstep.model import Intervention, LLMCall, Recording, Step, Task, Trajectory, Usage, Verdict

FIXTURES = Path(__file__).resolve().parent / "fixtures"
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


JUDGED_FINE = json.dumps({"fix_needed": False, "reason": "fine"})


def ranks_aggregator(then: Callable[[int], str] = lambda step: JUDGED_FINE) -> Callable[[str, int], str]:
    """An analyzer that ranks the aggregator's answer (step 4, the symptom) first and answers the question about
    each earlier step with `then(step)` (default: the step is fine)."""
    return lambda prompt, n: fix_json(4, "aggregator", RIGHT) if (step := at_step(prompt)) is None else then(step)


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
    analyzer, prompts = scripted("causal-flaky", ranks_aggregator())
    result = find_decisive_step(run, analyzer=analyzer, replay=team.replay, verify=verify,
                                budget=Budget(max_candidates=1))
    a = result.annotation
    assert (a.status, a.verified) == ("not_causal", False)
    assert "control replays (the step unchanged) flipped" in a.evidence.reason
    # first, before the analyzer is asked: solver_a's step 1 first states the wrong 120, so its answer is replaced by
    # the reference answer (`from_answer`, the grounded phase): the majority keeps 120, it fails; then the ranked fix
    kinds = [(r.intervention.step, r.intervention.kind) for r in result.replays]
    assert sorted(kinds[:2]) == [(1, "control"), (1, "fix")] and sorted(kinds[2:4]) == [(4, "control"), (4, "fix")]
    # then the scan: solver_b and solver_c state 120 again after step 1 was tried, so each gets the reference
    # answer too (each fails: the majority stays 120), and their joint fix with step 1's flips, but step 1's
    # control, already replayed, flipped as well: no label
    assert kinds[4:] == [(2, "fix"), (3, "fix"), (1, "fix")], kinds
    assert sorted(x.step for x in result.replays[-1].intervention.also) == [2, 3]
    step_1 = next(r for r in result.replays if r.intervention.step == 1 and r.intervention.kind == "fix")
    assert step_1.intervention.new_content.endswith("Answer: 2") and step_1.success_after is False
    assert a.evidence.replay_ids == [r.id for r in result.replays]  # stored with its replays
    assert result.attempts[1].not_causal and not result.attempts[1].success


def test_a_deterministic_control_is_proven_identical_without_a_replay():
    team = Ensemble()
    run = team.run()

    # each solver states "Answer: 120", which the verifier rejects: it is asked for a correction, not judged
    analyzer, _ = scripted("causal-det", ranks_aggregator(lambda step: fix_json(step, run.steps[step].agent, RIGHT)))
    why = "the recorded calls after the step were answered deterministically"
    result = find_decisive_step(run, analyzer=analyzer, replay=team.replay, verify=verify,
                                budget=Budget(max_candidates=1), deterministic=lambda step: why)
    a = result.annotation
    # the aggregator's fix flips; each solver's alone does not (the majority stays 120); their joint fix does
    assert (a.status, a.verified, a.step, a.steps) == ("labelled", True, 1, [1, 2, 3])
    assert {r.intervention.kind for r in result.replays} == {"fix"}  # no control replayed
    check = a.flip_check.model_dump()
    assert check["controls_replayed"] == [] and check["controls_proven_identical"] == 1
    assert check["proven_identical_because"] == why
    # the control side is known exactly: the flip cannot be a re-roll (confidence 1); the interval on the
    # difference is the fix side's Wilson interval
    assert a.confidence == 1.0
    assert check["interval"][0] == pytest.approx(wilson(1, 1)[0], abs=1e-4)


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
    # the last LLM call of a run (only tools after it, e.g. AG2's executor): any model, nothing is live
    last = [call(0, "local", 0), call(1, "local", 0)]
    assert proven_identical(last, step) == (
        "no LLM call came after step 1 in the recording: the control replays the recording")


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
    assert result.annotation.answer_leaks == 1
    assert any(n.startswith("answer_leak rejected") for n in result.annotation.evidence.notes)


def test_an_ensemble_repeating_one_error_gets_a_multi_step_label_not_the_aggregator():
    team = Ensemble()
    run = team.run()

    analyzer, _ = scripted("causal-joint", ranks_aggregator(lambda step: fix_json(step, Ensemble.AGENTS[step - 1], RIGHT)))
    result = find_decisive_step(run, analyzer=analyzer, replay=team.replay, verify=verify,
                                budget=Budget(max_candidates=1))
    a = result.annotation
    # fixes at 1, 2 and 3 alone keep the majority's 120; their joint fix flips, and its control fails
    assert [x.steps for x in result.attempts] == [[1], [4], [2], [3], [1, 2, 3]]  # step 1's answer first (grounded)
    assert (a.status, a.verified, a.step, a.agent) == ("labelled", True, 1, "solver_a")
    assert a.multi_step is True and a.steps == [1, 2, 3]
    assert a.metadata["agents"] == ["solver_a", "solver_b", "solver_c"]
    joint = next(r for r in result.replays if r.intervention.also)
    assert [x.step for x in joint.intervention.also] == [2, 3] and joint.success_after is True
    assert "[step 2, solver_b]" in a.evidence.fix


def test_repeats_give_flip_counts_on_both_sides_and_a_confidence():
    team = Ensemble()
    run = team.run()
    analyzer, _ = scripted("causal-repeats", ranks_aggregator())
    result = find_decisive_step(run, analyzer=analyzer, replay=team.replay, verify=verify,
                                budget=Budget(max_candidates=1), repeats=3, controls=1)
    a = result.annotation
    check = a.flip_check.model_dump()
    assert (check["flips"], check["trials"], check["control_flips"], check["control_trials"]) == (3, 3, 0, 3)
    assert len(check["repeat_replays"]) == 2 and len(check["controls_replayed"]) == 3
    assert a.confidence == effect(3, 3, 0, 3).confidence > 0.98
    # step 1's answer replaced by the reference answer (failed) and its control, 3 flips, 3 controls, then the scan
    # gives steps 2 and 3, which state 120 again, the reference answer too (each fails: the majority stays 120)
    assert a.cost.replays == 10 and a.step == 4


def test_wilson_and_the_newcombe_difference():
    low, high = wilson(1, 1)
    assert low == pytest.approx(0.2065, abs=1e-3) and high == 1.0
    assert wilson(0, 3)[1] == pytest.approx(0.5615, abs=1e-3)
    one = effect(1, 1, 0, 1)
    # one fix and one control (the default): the interval on the difference cannot exclude 0, but the
    # probability that the fix raised the flip rate is 5/6
    assert one.low < 0 and one.confidence == pytest.approx(5 / 6, abs=1e-4) and band(one.confidence) == "medium"
    five = effect(5, 5, 0, 5)
    assert five.low == pytest.approx(0.3857, abs=1e-3) and five.confidence > 0.998 and band(five.confidence) == "high"
    assert effect(2, 2, 0, 2).confidence == pytest.approx(0.95, abs=1e-4)
    exact = effect(5, 5, 0, 5, controls_exact=True)
    assert exact.low == pytest.approx(wilson(5, 5)[0], abs=1e-4) and exact.confidence == 1.0
    # no evidence either way: a control that flipped too, or a fix that never flipped
    assert effect(1, 1, 1, 1).confidence == 0.5 and band(0.5) == "low"
    assert effect(0, 1, 0, 1).confidence == 0.0 and effect(0, 1, 0, 1, controls_exact=True).confidence == 0.0
    assert band(0.96) == "high" and band(None) is None


def test_probability_greater_is_exact():
    """Against the integral by simulation: P(p > q) for p ~ Beta(3, 2), q ~ Beta(1, 3)."""
    import random

    rng = random.Random(7)
    n = 200_000
    hits = sum(rng.betavariate(3, 2) > rng.betavariate(1, 3) for _ in range(n))
    assert probability_greater(2, 3, 0, 2) == pytest.approx(hits / n, abs=0.005)
    assert probability_greater(0, 0, 0, 0) == pytest.approx(0.5)  # no data: either side as likely
    with pytest.raises(ValueError, match="control_flips 3 must be between 0 and its trials"):
        probability_greater(1, 1, 3, 2)


def test_edit_size_and_the_injection_mirror():
    size = edit_size("value = 10\nok", "value = 12\nok")
    assert size.chars_changed == 1 and size.lines_changed == 1 and size.share == pytest.approx(0.077, abs=1e-3)
    assert edit_size("abc", "abc").chars_changed == 0
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
    assert a is not None and (a.step, a.verified) == (4, True) and a.answer_leaks == 1
    assert [r.intervention.kind for r in result.replays] == ["corruption", "control"]

    def flaky(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:  # the control fails as well
        result = right.run({1: RIGHT, 2: RIGHT, 3: RIGHT, 4: "Answer: 3"})
        return result, result.verdict, ReplayOutcome(cost=Usage(llm_calls=1))

    perturber2, _ = scripted("causal-inject-flaky", lambda p, n: honest)
    again = inject_fault(plan_run, perturber2, flaky, Budget(max_candidates=1, max_replays=1), programmatic=False,
                         mode="one_shot", verify=verify)
    assert again.annotation is None and again.attempts[0].not_causal
    assert "flipped" in again.attempts[0].not_causal


def test_a_perturbers_description_is_checked_against_its_edit():
    """The main job's injection on GSM8K test-1101 (stop 27): the 1.5B perturber cut the coder's program down
    to one bare line of it (no fence, no print: nothing ran) and said "it should subtract ... not add them".
    The coder's program is the real AG2 reply from tests/fixtures/golden_real/ag2-gsm8k-right.json."""
    golden = json.loads((FIXTURES / "golden_real" / "ag2-gsm8k-right.json").read_text())
    coder = next(r["content"] for r in golden["replies"] if "ahito_distance" in str(r.get("content")))
    cut = "ahito_distance = total_distance - total_distance_run"
    assert cut in coder
    said = ("The distance Ahito ran is calculated incorrectly: it should subtract the distances of Amber and Micah "
            "from the total distance, not add them.")
    assert unfounded_description(said, coder, cut) == "it speaks of subtract, but the edit wrote no operator and no number"
    assert edit_summary(coder, cut).startswith("- ```python; - # Given data; - total_distance = 52")
    # accounts of what changed: a number, an identifier, an operator by its word where one was written
    assert unfounded_description("used 3 weeks instead of 4", "x = 2 * 30 * 4", "x = 2 * 30 * 3") is None
    assert unfounded_description("turned the addition into a subtraction", "y = a + b", "y = a - b") is None
    assert unfounded_description("dropped the print(ahito_distance) call", coder,
                                 coder.replace("print(ahito_distance)", "")) is None
    assert unfounded_description("a subtle slip", "y = a + b", "y = a - b") == "it names nothing the edit changed"
    assert edit_summary("The total is 24 miles.", "The total is 42 miles.") == (
        "replaced '24' with '42' in the line 'The total is 42 miles.'")
    # whole words and operators (the slice's flip_operator on AG2 MBPP 760 read "replaced '=' with '!'")
    assert edit_summary("    return len(unique_numbers) == 1", "    return len(unique_numbers) != 1") == (
        "replaced '==' with '!=' in the line 'return len(unique_numbers) != 1'")
    assert edit_summary("museum_tour_time = cooking_time / 2", "museum_tour_time = yoga_time / 2").startswith(
        "replaced 'cooking_time' with 'yoga_time'")

    right = Ensemble()
    solved = right.run({1: RIGHT, 2: RIGHT, 3: RIGHT})
    original = solved.steps[4].content

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        forced = {1: RIGHT, 2: RIGHT, 3: RIGHT, **({} if i.kind == "control" else {i.step: i.new_content})}
        result = right.run(forced)
        return result, result.verdict, ReplayOutcome(cost=Usage(llm_calls=1))

    corrupted = "The solvers agree.\nAnswer: 3"
    for description, founded in (("The aggregator misread the vote.", False), ("changed the answer to 3", True)):
        reply = json.dumps({"step": 4, "corrupted_content": corrupted, "description": description})
        perturber, _ = scripted(f"causal-describe-{founded}", lambda p, n: reply)
        a = inject_fault(solved, perturber, replay, Budget(max_candidates=1), programmatic=False, mode="one_shot",
                         verify=verify).annotation
        assert a is not None and a.metadata["description"] == description
        assert (a.metadata["description_unfounded"] is None) is founded
        if founded:
            assert a.evidence.reason == description
        else:
            assert a.evidence.reason.startswith(edit_summary(original, corrupted))
            assert "it names nothing the edit changed" in a.evidence.reason
            assert a.edit.summary == edit_summary(original, corrupted)


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
    from rootstep.model import Annotation, Edit, Evidence, Usage
    from rootstep.warehouse import Warehouse

    run = Ensemble().run().model_copy(update={"source": "rootstep"})
    other = Ensemble().run({2: RIGHT}).model_copy(update={"source": "rootstep", "task_id": "t-2"})
    wh = Warehouse(str(tmp_path))
    wh.write_trajectories([run, other])

    def ann(run_id: str, **kw: Any) -> Annotation:
        return Annotation(run_id=run_id, framework="sim", benchmark="gsm8k", method="counterfactual",
                          annotator="scripted/a", cost=Usage(llm_calls=4, replays=2), **kw)

    label = ann(run.id, agent="solver_a", step=1, verified=True, evidence=Evidence(reason="joint"),
                steps=[1, 2, 3], confidence=0.8333, answer_leaks=1,
                edit=Edit(chars_changed=3, lines_changed=1, share=0.1, growth=1.0, summary="- 5 + 6"))
    unproven = ann(other.id, agent="aggregator", step=4, status="unproven_earliest", evidence=Evidence(reason="u"),
                   steps=[4], confidence=0.0)
    again = ann(run.id, agent="aggregator", step=4, verified=False, evidence=Evidence(reason="re-check"),
                recheck_of=label.id, recheck_agrees=False, steps=[4], confidence=0.99)
    wh.write_annotations([label, unproven, again])

    [row] = wh.rows("SELECT id, confidence FROM labels")
    assert row == {"id": label.id, "confidence": 0.8333}  # the re-check is never a label
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


def test_a_warehouse_written_before_the_typed_label_columns_reads_the_same(tmp_path):
    """Annotation rows of an older rootstep kept confidence, steps, re-check, edit and search statistics in
    `metadata` (and had no such columns): the views read them from there, and `annotation_from_row` gives
    the typed fields with those keys out of `metadata`."""
    import json as _json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from rootstep.model import Annotation, Evidence, SearchStats, Usage
    from rootstep.warehouse import Warehouse
    from rootstep.warehouse._schemas import LABEL_COLUMNS

    run = Ensemble().run().model_copy(update={"source": "rootstep"})
    wh = Warehouse(str(tmp_path))
    wh.write_trajectories([run])
    common = dict(framework="sim", benchmark="gsm8k", method="counterfactual", annotator="scripted/a",
                  cost=Usage(llm_calls=4, replays=2))
    label = Annotation(run_id=run.id, agent="solver_a", step=1, verified=True, evidence=Evidence(reason="joint"),
                       **common)
    again = Annotation(run_id=run.id, agent="aggregator", step=4, evidence=Evidence(reason="re-check"), **common)
    old_metadata = {label.id: {"steps": [1, 2, 3], "multi_step": True, "confidence": 0.8333, "answer_leaks": 1,
                               "edit": {"chars_changed": 3, "lines_changed": 1, "share": 0.1, "growth": 1.0,
                                        "summary": "- 5 + 6"}, "earliest": "established", "attempted_steps": [1],
                               "search_stats": {"replays": 2, "analyzer_calls": 5, "seconds": 9.5, "cut_by": "tokens",
                                                "cut_reason": "token budget spent"}},
                    again.id: {"recheck_of": label.id, "recheck_agrees": False, "steps": [4], "confidence": 0.99}}
    wh.write_annotations([label, again])
    files = list((tmp_path / "annotations").rglob("*.parquet"))
    assert files
    for path in files:  # what an older rootstep wrote: no typed columns, the facts in `metadata`
        table = pq.read_table(path)
        metadata = [_json.dumps(old_metadata[i]) for i in table.column("id").to_pylist()]
        table = table.drop_columns([name for name, _ in LABEL_COLUMNS]).set_column(
            table.schema.get_field_index("metadata") - len(LABEL_COLUMNS), "metadata", pa.array(metadata))
        pq.write_table(table, path)

    wh = Warehouse(str(tmp_path))
    assert wh.rows("SELECT id, confidence, steps FROM labels") == [{"id": label.id, "confidence": 0.8333,
                                                                    "steps": [1, 2, 3]}]
    assert len(wh.rows("SELECT * FROM label_steps")) == 3
    [agreement] = wh.rows("SELECT label_step, recheck_step, agrees FROM agreement")
    assert agreement == {"label_step": 1, "recheck_step": 4, "agrees": False}
    [q] = wh.rows("SELECT * FROM quality")
    assert (q["multi_step_labels"], q["answer_leaks"], q["median_edit_share"], q["rechecks"]) == (1, 1, 0.1, 1)
    [cut] = wh.rows("SELECT cut_by, mean_replays FROM search_cuts")
    assert cut == {"cut_by": "tokens", "mean_replays": 2.0}
    [read] = [a for a in wh.annotations(run.id) if a.id == label.id]
    assert (read.steps, read.confidence, read.earliest, read.answer_leaks, read.edit.share) == (
        [1, 2, 3], 0.8333, "established", 1, 0.1)
    assert read.search_stats == SearchStats(replays=2, analyzer_calls=5, seconds=9.5, cut_by="tokens",
                                            cut_reason="token budget spent")
    assert read.metadata == {"attempted_steps": [1]}  # the typed keys are no longer in metadata


def test_the_step_that_gave_the_runs_answer_may_be_corrected_into_one():
    """A coder whose final message held prose instead of code gave a (wrong) answer: correcting it with the
    program is legitimate, not a leak, although the step held no code."""
    team = Ensemble()
    run = team.run({4: "The solvers could not agree on a value."})
    assert run.success is False and run.final_answer == run.steps[4].content
    analyzer, prompts = scripted("causal-answer-step", ranks_aggregator())
    result = find_decisive_step(run, analyzer=analyzer, replay=team.replay, verify=verify, budget=Budget(max_candidates=1))
    ranked = next(x.diagnosis for x in result.attempts if x.diagnosis.source == "ranked")
    assert result.annotation.answer_leaks == 0 and ranked.step == 4


def test_correcting_a_result_worked_out_in_prose_is_not_a_leak():
    # the OpenAI Agents SDK example's solver (tests/fixtures/systems/openai_agents_handoffs): it states its
    # result in its own words, with no answer line; the fix keeps the text and corrects the numbers
    from pathlib import Path

    from rootstep.model import Task

    folder = Path(__file__).parent / "fixtures" / "systems" / "openai_agents_handoffs"
    wrong, right = (next(r for r in json.loads((folder / f"{name}.json").read_text())["replies"]["solver"])
                    for name in ("wrong", "right"))
    wrong, right = (r["content"] if isinstance(r, dict) else r for r in (wrong, right))
    task = Task(benchmark="gsm8k", task_id="t", kind="math", verifier="numeric", ground_truth="18", prompt="eggs?")
    assert "Answer:" not in wrong and answer_leak(task, wrong, right, verify) is None
    plan = "I will hand the egg problem to the solver, who computes what Janet sells; then the reviewer checks it."
    assert answer_leak(task, plan, "Janet sells 9 eggs a day at $2: she makes $18.", verify) is not None


# ------------------------------------------------------------------ what a step's program prints (math and QA)

TREES = Task(benchmark="gsm8k", task_id="t-240", verifier="numeric", kind="math", ground_truth="240",
             prompt="Each of 2 farms has 30 rows of 4 trees. How many trees are there?")
PLAN = "Plan: count the rows on every farm, then the trees in each row; the coder writes the program."
PRINTS_240 = "Let me compute it.\n```python\ntotal = 2 * 30 * 4\nprint(total)\n```\nThe executor runs it next."


def fake_runner(outputs: dict[str, str | None]) -> tuple[Callable[[str], str | None], list[str]]:
    """A runner that runs nothing: the output of the first key found in the code (None: it crashed)."""
    ran: list[str] = []

    def run(code: str) -> str | None:
        ran.append(code)
        return next((out for key, out in outputs.items() if key in code), None)

    return run, ran


def test_a_fix_whose_program_prints_the_reference_answer_at_a_plan_is_a_leak():
    run, ran = fake_runner({"2 * 30 * 4": "240\n"})
    assert answer_leak(TREES, PLAN, PRINTS_240, verify) is None  # the text alone: its last number is 4
    why = answer_leak(TREES, PLAN, PRINTS_240, verify, run)
    assert why is not None and "its program prints '240'" in why and "last_line: '240'" in why
    assert ran == ["total = 2 * 30 * 4\nprint(total)\n"]  # the fenced block, not the prose; the plan has none
    # several blocks run as one program, in order, as an executor runs them
    split = "```python\nrows = 2 * 30\n```\nthen\n```python\nprint(rows * 4)\n```"
    run2, ran2 = fake_runner({"rows * 4": "trees: 240"})
    assert answer_leak(TREES, PLAN, split, verify, run2) is not None and ran2 == ["rows = 2 * 30\n\nprint(rows * 4)\n"]


def test_a_step_whose_program_printed_a_wrong_number_gave_an_answer():
    wrong = "```python\nminutes = 30 + 4\nprint(minutes * 2)\n```\nThis counts the trees."
    fix = "I multiply instead.\n" + PRINTS_240
    run, ran = fake_runner({"2 * 30 * 4": "240", "minutes * 2": "68"})
    assert not gives_answer(TREES, wrong) and gives_answer(TREES, wrong, run)
    assert answer_leak(TREES, wrong, fix, verify, run) is None  # correcting its printed answer is legitimate
    # the same step whose program crashes gave nothing: the fix then hands over the answer
    crashed, _ = fake_runner({"2 * 30 * 4": "240"})
    assert answer_leak(TREES, wrong, fix, verify, crashed) is not None


def test_a_fix_program_that_crashes_or_prints_nothing_states_nothing():
    for outputs in ({}, {"2 * 30 * 4": ""}, {"2 * 30 * 4": "   \n"}):
        run, ran = fake_runner(outputs)
        assert answer_leak(TREES, PLAN, PRINTS_240, verify, run) is None and len(ran) == 1
    wrong, _ = fake_runner({"2 * 30 * 4": "64"})  # prints a wrong number: no reference answer stated
    assert answer_leak(TREES, PLAN, PRINTS_240, verify, wrong) is None

    def raises(code: str) -> str | None:
        raise RuntimeError("sandbox down")

    assert answer_leak(TREES, PLAN, PRINTS_240, verify, raises) is None and not gives_answer(TREES, PRINTS_240, raises)
    # no Python fence, or code that does not compile: nothing runs
    run, ran = fake_runner({"": "240"})
    for text in ("```bash\necho $((2 * 30 * 4))\n```", "```python\n>>> 2 * 30 * 4\n```", "total = 2 * 30 * 4\nprint(total)"):
        assert answer_leak(TREES, PLAN, text, verify, run) is None
    assert ran == []
    # code tasks are judged by their tests, not by what a program prints
    coding = TREES.model_copy(update={"verifier": "code_tests", "kind": "coding"})
    run, ran = fake_runner({"": "240"})
    assert gives_answer(coding, "```python\nprint(240)\n```", run) and ran == []


def test_a_corruption_whose_program_prints_a_wrong_answer_into_a_plan_plants_it():
    corrupt = "```python\nprint(2 * 30 + 4)\n```\nThis counts the trees."
    run, _ = fake_runner({"2 * 30 + 4": "64"})
    assert planted_answer(TREES, PLAN, corrupt, verify) is None  # the text alone states no answer
    assert planted_answer(TREES, PLAN, corrupt, verify, run) is not None
    assert planted_answer(TREES, "```python\nprint(2 * 30)\n```\nRun it.", corrupt, verify,
                          fake_runner({"2 * 30 + 4": "64", "2 * 30)": "60"})[0]) is None  # it printed one already


def test_sandbox_runner_caches_by_code_and_reads_only_clean_runs():
    from rootstep.benchmarks import sandbox_runner
    from rootstep.sandboxes import ExecResult, LocalSandbox, NotIsolatedWarning, SandboxLimits, SandboxNetwork

    class Box:
        def __init__(self, exit_code: int = 0, timed_out: bool = False):
            self.calls: list[tuple[str, float]] = []
            self.exit_code, self.timed_out = exit_code, timed_out

        def run(self, *, code: str, timeout: float) -> ExecResult:
            self.calls.append((code, timeout))
            return ExecResult(exit_code=self.exit_code, stdout="240\n", stderr="", duration_s=0.1,
                              timed_out=self.timed_out)

    box = Box()
    made: list[int] = []
    run = sandbox_runner(lambda: made.append(1) or box)
    assert made == []  # made on first use
    assert run("print(240)") == "240\n" and run("print(240)") == "240\n" and box.calls == [("print(240)", 5.0)]
    assert made == [1]
    assert sandbox_runner(Box(exit_code=1))("print(240)") is None  # printed, then crashed
    assert sandbox_runner(Box(timed_out=True))("print(240)") is None

    def unavailable() -> Box:
        made.append(2)
        raise RuntimeError("no Docker")

    broken = sandbox_runner(unavailable)
    assert broken("print(1)") is None and broken("print(2)") is None and made == [1, 2]  # not asked again
    # never on the host, never with a network
    with pytest.warns(NotIsolatedWarning):
        local = LocalSandbox(allow=True)
    assert sandbox_runner(local)("print(240)") is None
    networked = Box()
    networked.limits = SandboxLimits(network=SandboxNetwork.gateway_only(8000))  # type: ignore[attr-defined]
    assert sandbox_runner(networked)("print(240)") is None and networked.calls == []


def test_the_search_rejects_a_fix_whose_program_prints_the_answer():
    team = Ensemble()
    run = team.run()
    plan = "Plan: read the question, then convert the duration into the unit asked for."
    run.steps[1] = run.steps[1].model_copy(update={"content": plan})
    leaked = "```python\nminutes = 120 // 60\nprint(minutes)\n```"
    answers = iter([fix_json(1, "solver_a", leaked), fix_json(2, "solver_b", RIGHT)])
    analyzer, prompts = scripted("causal-leak-program", lambda p, n: next(answers) if at_step(p) is None
                                 else json.dumps({"fix_needed": False, "reason": "fine"}))
    runner, ran = fake_runner({"120 // 60": "2"})
    result = find_decisive_step(run, analyzer=analyzer, replay=team.replay, verify=verify,
                                budget=Budget(max_candidates=1), run_program=runner)
    assert "answer_leak" in prompts[1] and "its program prints '2'" in prompts[1]
    assert all(i.new_content != leaked for i in team.calls)  # never replayed
    assert result.annotation.answer_leaks == 1


@pytest.mark.docker
def test_a_fix_program_runs_isolated_in_the_docker_sandbox_and_its_output_is_read(docker_sandbox, tmp_path):
    from rootstep.benchmarks import program_output, sandbox_runner

    marker = tmp_path / "ran-here"
    fix = ("```python\nimport socket\n"
           f"open({str(marker)!r}, 'w').close() if __import__('os').path.isdir({str(tmp_path)!r}) else None\n"
           "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=1)\n    print('network')\n"
           "except OSError:\n    print('no network')\n"
           "total = 2 * 30 * 4\nprint(total)\n```")
    run = sandbox_runner(docker_sandbox)
    assert program_output(fix, run) == "no network\n240"
    assert not marker.exists()  # it ran in the container, not on this host
    why = answer_leak(TREES, PLAN, fix, verify, run)
    assert why is not None and "240" in why
    assert program_output("```python\nraise SystemExit(3)\n```", run) is None


# ------------------------------------------------------------------ the same-answer guard reads what a program prints

# Issue 30, a new GSM8K task: the retaken step's code computes the right 5, but its prose hallucinated what the code
# outputs ("output 12.5", the step's own wrong answer). Read from the prose, the fix was refused as "the same answer
# 12.5" (presentation only); the next retake, same code, hallucinating 11.25, was accepted and flipped.
HALVES = Task(benchmark="gsm8k", task_id="t-5", verifier="numeric", kind="math", ground_truth="5",
              prompt="A 10 m rope is cut in half, and one half is cut in half again. How long is the longer piece?")
STEP_12_5 = "```python\nrope = 10\nprint(rope + rope / 4)\n```\nThe longer piece is 12.5 m.\nAnswer: 12.5"
RETAKE_5_SAYS_12_5 = "```python\nrope = 10\nhalf = rope / 2\nprint(half)\n```\nThis will output 12.5.\nAnswer: 12.5"


def test_the_same_answer_guard_reads_what_the_fix_program_prints_not_its_prose():
    run, ran = fake_runner({"half = rope / 2": "5.0\n", "rope + rope / 4": "12.5\n"})
    assert same_answer(HALVES, STEP_12_5, RETAKE_5_SAYS_12_5, verify) is not None  # the prose alone: "12.5"
    assert same_answer(HALVES, STEP_12_5, RETAKE_5_SAYS_12_5, verify, run) is None  # its program prints 5.0
    assert any("half = rope / 2" in code for code in ran)
    # a fix whose program prints the step's own answer only re-formats it, whatever its prose claims
    same_program = "```python\nrope = 10\nprint(rope + rope / 4)\n```\nSo it is 12 and a half metres."
    why = same_answer(HALVES, STEP_12_5, same_program, verify, run)
    assert why is not None and "the fix's program prints '12.5'" in why
    # a program that fails states nothing: the prose is read as before
    broken, _ = fake_runner({})
    assert same_answer(HALVES, STEP_12_5, RETAKE_5_SAYS_12_5, verify, broken) is not None
    # a point is one answer, read whole (slice of 2026-11-27, MATH-500 precalculus/43): (14, -29) is not (15, -29)
    point = Task(benchmark="math500", task_id="t-pt", verifier="math", kind="math", ground_truth="(15,-29)",
                 prompt="Find the point the curve passes through at t = 2.")
    step = "```python\nprint((2**3 + 6, -29))\n```"
    fix = "```python\nprint((2**3 + 7, -3*4 - 12 - 5))\n```"
    run_point, _ = fake_runner({"2**3 + 6": "(14, -29)\n", "2**3 + 7": "(15, -29)\n"})
    assert same_answer(point, step, fix, verify, run_point) is None
    same_point, _ = fake_runner({"2**3 + 6": "(15, -29)\n", "2**3 + 7": "(15, -29)\n"})
    assert "prints '(15, -29)'" in (same_answer(point, step, fix, verify, same_point) or "")


def test_a_module_the_sandbox_lacks_is_shown_to_the_analyzer_as_an_environment_limit():
    from rootstep.annotation._propose import environment_limits

    # AG2's executor step for a coder's `import scipy`: autogen 0.14's LocalCommandLineCodeExecutor run in the
    # fw-ag2 image (its output, verbatim) in the UserProxyAgent's reply format, as stored runs show it
    died = ("exitcode: 1 (execution failed)\nCode output: Traceback (most recent call last):\n  File \"/work/"
            "tmp_code_1e55f4cabbb9fb5222bcf3ede78b095d.py\", line 1, in <module>\n    import scipy\n"
            "ModuleNotFoundError: No module named 'scipy'\n")
    run = Trajectory(framework="ag2", benchmark="math500", task_id="t", question="q", steps=[
        Step(index=0, agent="executor", kind="human", content="q"),
        Step(index=1, agent="coder", content="```python\nimport scipy\nprint(scipy.pi)\n```"),
        Step(index=2, agent="executor", kind="tool", content=died),
        # smolagents 1.26's LocalPythonExecutor in the fw-smolagents image, its error verbatim
        Step(index=3, agent="coder", content="```python\nimport sympy\n```", observation=(
            "Code execution failed at line 'import sympy' due to: InterpreterError: Import of sympy is not allowed. "
            "Authorized imports are: ['unicodedata', 'math', 'datetime', 'stat', 'time', 'statistics', 'itertools', "
            "'random', 're', 'collections', 'queue']")),
        Step(index=4, agent="executor", kind="tool", content=died),
    ], verdict=Verdict(success=False))
    limits = environment_limits(run)
    assert len(limits) == 2 and "module 'scipy' is not installed in the sandbox (step 2, executor" in limits[0]
    assert "module 'sympy' is not allowed by the framework (step 3" in limits[1]
    prompts: list[str] = []
    find_decisive_step(run, analyzer=lambda p: prompts.append(p) or "no", replay=lambda i: None,
                       budget=Budget(max_llm_calls=1))
    assert "ENVIRONMENT LIMITS (what the run's code could not use" in prompts[0] and limits[0] in prompts[0]
    assert environment_limits(Trajectory(framework="f", benchmark="b", task_id="t", steps=[
        Step(index=0, agent="a", content="all fine")])) == []


def test_a_fix_that_restores_an_answer_the_team_had_reached_is_not_a_leak():
    """Slice of 2026-11-27 (AG2, MATH-500 precalculus/43): the coder's program printed the right answer, later agents
    lost it, and the analyzer's fixes of the critic's review, which restored it, were refused as answer leaks
    (the review gave no answer). The team had the answer: carrying it forward hands nothing over. A run that
    never reached it keeps the leak guard."""
    code = "```python\ntotal = 2 * 30 * 4\nprint(total)\n```"
    review = "The program counts one farm only; it should be 2 * 30 = 60 trees."
    fix = "The program is right: it prints 240, every farm and row counted.\nAnswer: 240"

    def run_with(printed: str) -> Trajectory:
        steps = [Step(index=0, agent="executor", kind="human", content=TREES.prompt),
                 Step(index=1, agent="coder", content=code, call_ids=["c1"]),
                 Step(index=2, agent="executor", kind="tool",
                      content=f"exitcode: 0 (execution succeeded)\nCode output: {printed}\n"),
                 Step(index=3, agent="critic", content=review, call_ids=["c3"]),
                 Step(index=4, agent="coder", content="Answer: 60", call_ids=["c4"])]
        return Trajectory(framework="ag2", benchmark="gsm8k", task_id=TREES.task_id, question=TREES.prompt,
                          ground_truth="240", steps=steps, final_answer="Answer: 60", verdict=verify(TREES, "Answer: 60"),
                          recording=Recording(gateway_run_id="r", task=TREES))

    def analyzer(prompt: str) -> str:
        step = at_step(prompt)
        if step is None or step == 3:
            return fix_json(3, "critic", fix)
        return json.dumps({"fix_needed": False, "reason": "fine"})

    def replay(intervention: Intervention):
        good = "240" in intervention.new_content and intervention.kind == "fix"
        run = reached.model_copy(update={"final_answer": "Answer: 240" if good else "Answer: 60"})
        return run, verify(TREES, run.final_answer), ReplayOutcome()

    reached = run_with("240")
    result = find_decisive_step(reached, analyzer=analyzer, replay=replay, verify=verify, budget=Budget(max_candidates=1))
    assert (result.annotation.status, result.step, result.agent) == ("labelled", 3, "critic")
    assert result.annotation.answer_leaks == 0
    lost = run_with("60")  # the program printed a wrong number: the team never had 240
    result = find_decisive_step(lost, analyzer=analyzer, replay=replay, verify=verify, budget=Budget(max_candidates=1))
    assert result.annotation.status != "labelled" and result.annotation.answer_leaks >= 1
