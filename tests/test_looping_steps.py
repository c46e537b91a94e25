"""A step that loops to its end: shown once to the analyzer, never judged correct, and an analyzer answer that
loops is re-asked, not given more room.

The loop is real (tests/fixtures/loops/ag2_coder_math500_geometry_229.txt): AG2's coder on MATH-500
geometry/229, the agents on the 0.5B, cut by the gateway's loop guard after a 199-character paragraph came back
again and again. On the seed-41 slice of 2026-12-02 such a coder step (AG2, MATH-500 algebra/1553) was judged
correct by the 1.5B analyzer and the search ended with no replay: the analyzer, shown the loop whole, copied it
into its own answers until the guard cut them, and each cut answer was asked again with twice the room, where
greedy decoding wrote the same loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rootstep.annotation import Budget, Meter
from rootstep.annotation._propose import FixProposer, TaskContext, ask_valid
from rootstep.benchmarks import load_tasks, verify
from rootstep.gateway import Chat, register_script
from rootstep.model import Asked, Step, Trajectory, collapse_loop, loop_period, looping_tail
from rootstep.prompts import render_steps

LOOP = (Path(__file__).parent / "fixtures" / "loops" / "ag2_coder_math500_geometry_229.txt").read_text()


@pytest.fixture(scope="module")
def run() -> Trajectory:
    task = next(t for t in load_tasks("math500") if t.task_id == "test/geometry/229.json")
    steps = [Step(index=0, agent="user", kind="human", content=task.prompt),
             Step(index=1, agent="coder", content=LOOP, call_ids=["c1"]),
             Step(index=2, agent="critic", content="The coder did not finish. TERMINATE", call_ids=["c2"])]
    final = steps[2].content
    verdict = verify(task, final)
    assert not verdict.success
    return Trajectory(framework="ag2", benchmark="math500", task_id=task.task_id, question=task.prompt,
                      ground_truth=task.ground_truth, steps=steps, final_answer=final, verdict=verdict,
                      recording={"gateway_run_id": "real", "task": task})


def test_the_real_loop_is_traced_back_to_its_first_copy_and_shown_once():
    tail = looping_tail(LOOP)
    assert tail is not None and tail.period == 199 == loop_period(LOOP)
    block = LOOP[tail.start:tail.start + tail.period]
    assert LOOP[tail.start:] == (block * 20)[:len(LOOP) - tail.start]  # periodic from `start` to the end
    assert LOOP[tail.start - 1] != LOOP[tail.start - 1 + tail.period]  # and not one character before it
    assert tail.copies(len(LOOP)) == 4  # the guard cut it at its fourth copy
    shown = collapse_loop(LOOP)
    assert shown.startswith(LOOP[:tail.start + tail.period]) and len(shown) < len(LOOP) - 2 * tail.period
    assert f"the same {tail.period}-character block again, {tail.copies(len(LOOP)) - 1:.0f} more times" in shown
    assert looping_tail(shown) is None  # what the analyzer reads no longer loops


def test_text_that_does_not_loop_is_shown_as_it_is():
    counting = "".join(f"step {i}: add one to the total and go on\n" for i in range(20))
    for text in ["", "The answer is 5.", counting, "print()\n" * 6]:
        assert looping_tail(text) is None and collapse_loop(text) == text


def test_the_compact_rendering_collapses_the_loop_and_keeps_the_step_numbers(run: Trajectory):
    steps, cut = render_steps(run, compact=True)
    assert [s["index"] for s in steps] == [0, 1, 2] and not cut
    assert steps[1]["content"] == steps[1]["full"] == collapse_loop(LOOP)
    assert steps[2]["content"] == run.steps[2].content
    whole, _ = render_steps(run)
    assert whole[1]["content"] == LOOP  # the run itself is kept as the model wrote it


def test_a_looping_step_is_asked_for_its_correction_not_whether_it_is_correct(run: Trajectory):
    """The analyzer that judges the looping step correct is told that is not an answer; its fix is taken."""
    prompts: list[str] = []
    fix = ("The first area gives (d - c)^2 = 18(b - a) and the second (c + d)^2 = 72(b - a), so c + d = 2(d - c), "
           "that is d = 3c; then 4c^2 = 18(b - a).")

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        if len(prompts) == 1:
            return json.dumps({"fix_needed": False, "reason": "the coder sets up the areas correctly"})
        return json.dumps({"fix_needed": True, "mistake_step": 1, "mistake_agent": "coder",
                           "reason": "it never solves the system", "suggested_fix": fix})

    register_script("looping-step", analyzer)
    notes: list[str] = []
    p = FixProposer(run, run.verdict, TaskContext.of(run), Chat("scripted/looping-step"), Meter(Budget(max_reasks=1)),
                    [], notes, 24_000, lambda t, a: verify(t, a), None, None)
    diagnosis, why = p.ask_at(run.steps[1], [], set(), require_fix=False, source="sequential")
    assert why is None and diagnosis is not None and not diagnosis.declined
    assert (diagnosis.step, diagnosis.agent, diagnosis.fix) == (1, "coder", fix)
    assert any("step 1 (coder) repeats a 199-character block back to back to its end" in n for n in notes)
    assert LOOP not in prompts[0] and collapse_loop(LOOP) in prompts[0]  # shown once, not to be copied
    assert len(prompts) == 2


def test_the_step_after_the_loop_may_still_be_judged_correct(run: Trajectory):
    register_script("after-the-loop", lambda m, p: json.dumps({"fix_needed": False, "reason": "it says so"}))
    notes: list[str] = []
    p = FixProposer(run, run.verdict, TaskContext.of(run), Chat("scripted/after-the-loop"), Meter(Budget()),
                    [], notes, 24_000, lambda t, a: verify(t, a), None, None)
    diagnosis, why = p.ask_at(run.steps[2], [], set(), require_fix=False, source="sequential")
    assert diagnosis is not None and diagnosis.declined and notes == []


def test_an_answer_cut_in_a_loop_is_asked_again_sampled_not_with_more_room():
    """Greedy decoding given twice the room writes the same loop again: the cut answer is a problem, re-asked at
    the re-ask temperature with the room it had, and the loop shown once in the re-ask."""
    seen: list[dict[str, Any]] = []

    def model(messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
        seen.append({"params": params, "prompt": messages[-1]["content"]})
        return {"content": LOOP, "finish_reason": "length"} if len(seen) == 1 else '{"ok": true}'

    register_script("looping-answer", model)
    chat = Chat("scripted/looping-answer", max_tokens=1024)
    log: list[Asked] = []
    value, why = ask_valid(chat, lambda previous, problem: f"answer; before: {previous}; problem: {problem}",
                           lambda answer: (json.loads(answer), None), Meter(Budget(max_reasks=1)), log, "p.j2")
    assert (value, why) == ({"ok": True}, None)
    assert [s["params"].get("max_tokens") for s in seen] == [1024, 1024]
    assert [s["params"].get("temperature") for s in seen] == [0.0, 0.7]
    assert log[0].problem.startswith("the answer repeats the same 199-character block back to back")
    assert collapse_loop(LOOP) in seen[1]["prompt"] and LOOP not in seen[1]["prompt"]
    assert chat.temperature == 0.0  # given back


def test_a_looping_answer_counts_against_the_re_asks():
    register_script("always-looping", lambda m, p: {"content": LOOP, "finish_reason": "length"})
    log: list[Asked] = []
    value, why = ask_valid(Chat("scripted/always-looping", max_tokens=1024), lambda previous, problem: "answer",
                           lambda answer: (answer, None), Meter(Budget(max_reasks=1)), log, "p.j2")
    assert value is None and "no valid answer after 1 re-ask(s)" in why and "repeats the same 199-character" in why
    assert len(log) == 2
