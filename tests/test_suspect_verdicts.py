"""Suspect verdicts and presentation-only fixes (issue 13, parts 2 and 3), on texts real models wrote."""

from __future__ import annotations

from rootstep.benchmarks import is_suspect, mark_suspect, same_answer, suspect_reason, verify
from rootstep.model import Step, Task, Verdict


def _math(truth: str) -> Task:
    return Task(benchmark="math500", task_id="t", prompt="q", ground_truth=truth, verifier="math", kind="math")


def _steps(*contents: tuple[str, str]) -> list[Step]:
    return [Step(index=i, agent=agent, kind="agent" if agent != "executor" else "tool", content=c)
            for i, (agent, c) in enumerate(contents)]


def test_a_right_answer_the_verifier_could_not_read_is_suspect() -> None:
    task = _math("1")
    # the verdict an older verifier gave the AG2 coder's `Answer: 1` (it knew no `Answer:` line)
    old = Verdict(success=False, details={"expected": "1", "method": "none", "reason": "no answer found"})
    reason = suspect_reason(task, "...\nAnswer: 1", _steps(("coder", "...\nAnswer: 1")), old, verify)
    assert reason is not None and "no answer" in reason


def test_reference_in_a_final_answer_position_but_another_span_taken() -> None:
    task = _math("2")
    final = "Here is the final answer from your managed agent 'coder':\nThe limit is 2.\nexact: S = 2"
    taken = Verdict(success=False, details={"expected": "2", "extracted": "from your managed agent 'coder':",
                                            "method": "answer_phrase"})
    reason = suspect_reason(task, final, _steps(("manager", "final_answer(report)")), taken, verify)
    assert reason is not None and "S = 2" in reason and "final answer" in reason


def test_a_real_wrong_answer_is_not_suspect() -> None:
    task = _math("1")
    text = "The domain starts at 2.\nAnswer: 2"
    verdict = verify(task, text)
    assert not verdict.success
    assert suspect_reason(task, text, _steps(("coder", text), ("critic", "Looks right. TERMINATE")), verdict, verify) is None
    # a critic that was talked into the wrong answer after the coder said the right one: a real failure
    steps = _steps(("coder", "Answer: 1"), ("critic", "No, x=1 gives 0/(-1); use 2."), ("coder", text),
                   ("critic", "Agreed. TERMINATE"))
    assert suspect_reason(task, text, steps, verdict, verify) is None


def test_mark_suspect_keeps_successes_and_records_the_reason() -> None:
    task = _math("1")
    ok = verify(task, "Answer: 1")
    assert mark_suspect(task, "Answer: 1", [], ok, verify) is ok
    bad = Verdict(success=False, details={"method": "none", "reason": "no answer found"})
    # no answer, and none the verifier accepts anywhere in the run: a plain failure, searched, not suspect
    marked = mark_suspect(task, "It is one.", [], bad, verify)
    assert is_suspect(marked) is None and "no answer" in marked.details["failure"]
    # no answer read, but the text's last number is the reference answer: suspect, with that evidence
    marked = mark_suspect(task, "x - 1 >= 0, so the smallest is x=1", [], bad, verify)
    assert is_suspect(marked) and "found no answer, but the final answer states the reference answer" in is_suspect(marked)
    assert is_suspect(verify(task, "Answer: 3")) is None


def test_no_code_or_code_that_does_not_compile_is_a_plain_failure() -> None:
    """The hand-model slice: a manager that returned a number, a critic's message as the final answer, and
    code that does not compile were all marked "no code" suspect and left out of the search."""
    task = Task(benchmark="mbpp", task_id="1", prompt="add", verifier="code_tests", kind="coding",
                metadata={"entry_point": "add", "harness": "asserts", "tests": ["assert add(1, 2) == 3"]})
    failed = Verdict(success=False, details={"reason": "the program exited without a test result"})
    for final, why in [("42", "no code"), ("Looks right. TERMINATE", "no code"),
                       ("```python\ndef add(a, b)\n    return a + b\n```", "does not compile")]:
        marked = mark_suspect(task, final, _steps(("coder", final)), failed, verify)
        assert is_suspect(marked) is None and why in marked.details["failure"], final


def test_a_fix_that_only_reformats_is_recognised() -> None:
    task = _math("1")
    original = "print(min(c))  # prints 1\nThe smallest integer is 1.\nAnswer: 1"
    assert same_answer(task, original, original.replace("Answer: 1", "$\\boxed{1}$"), verify)
    assert same_answer(task, "so the result is 1", "The answer is \\boxed{1}", verify)  # last number of the step
    assert same_answer(task, "Answer: 2", "Answer: 1", verify) is None  # the answer changed: a real fix
    assert same_answer(task, "Let me set up the domain first.", "Answer: 1", verify) is None  # nothing to compare


def test_code_fix_that_changes_only_layout_or_test_prints() -> None:
    task = Task(benchmark="mbpp", task_id="1", prompt="add", verifier="code_tests", kind="coding",
                metadata={"entry_point": "add", "harness": "asserts", "tests": ["assert add(1, 2) == 3"]})
    original = "```python\ndef add(a, b):\n    return a + b\n\nprint(add(1, 2))\n```"
    reformatted = "Here it is:\n```python\ndef add(a, b):\n    # sum\n    return (a + b)\n```"
    assert same_answer(task, original, reformatted, verify)
    assert same_answer(task, original, original.replace("a + b", "a - b"), verify) is None


def test_a_real_fix_of_a_marked_answer_is_not_mistaken_for_a_reformat() -> None:
    """Regression from the hand-model slice: the coder answered `Answer: $\\frac{1 + \\sqrt{5}}{2}$`, the
    analyzer's fix `Answer: $2$`; the `2` ending the original's fraction was taken for its answer and the
    real fix rejected as presentation-only."""
    import json
    from pathlib import Path

    case = json.loads((Path(__file__).parent / "fixtures/hand_model/ag2_math500_ellipse.json").read_text())
    task = Task.model_validate(case["task"])
    fix = json.loads(case["analyzer_reply"])["suggested_fix"]
    assert verify(task, fix).success and not verify(task, case["original_step"]).success
    assert same_answer(task, case["original_step"], fix, verify) is None
    # an unmarked step still compares by its last number
    assert same_answer(task, "so k works out to 2", fix, verify)
