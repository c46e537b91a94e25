"""The answer forms real models write are read by the verifiers (issue 13, part 1).

The texts below are copied from runs where a capable model answered the agents through hand-model:
AG2's coder ending with `Answer: 1` and smolagents' manager returning its coder's report were judged
failures although the answers were right.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rootstep.benchmarks import verify
from rootstep.benchmarks._answer import answer_contract, answer_spans, clean_span, final_answer_span
from rootstep.model import Task

AG2_CODER = """The function is defined when $x - 1 \\ge 0$ and $x \\ne 2$, so $x \\ge 1$ with $x \\ne 2$.

```python
candidates = [x for x in range(-10, 10) if x >= 1 and x != 2]
print(min(candidates))
```

The smallest integer in the domain is 1.

Answer: 1"""

SMOLAGENTS_MANAGER = """Here is the final answer from your managed agent 'coder':
The sum telescopes: S = 2 - 1/2^n tends to 2.
Answer (exact): S = 2"""

SMOLAGENTS_MANAGER_PLAIN = """Here is the final answer from your managed agent 'coder':
exact: S = 2"""


def _task(verifier: str, truth: str, kind: str = "math") -> Task:
    return Task(benchmark="t", task_id="1", prompt="q", ground_truth=truth, verifier=verifier, kind=kind)  # type: ignore[arg-type]


@pytest.mark.parametrize("text, span, method", [
    ("Answer: 1", "1", "answer_line"),
    ("**Answer:** 1", "1", "answer_line"),
    ("**Answer**: $\\frac{1}{2}$", "\\frac{1}{2}", "answer_line"),
    ("- Final Answer: \\((3, \\frac{\\pi}{2})\\)", "(3, \\frac{\\pi}{2})", "answer_line"),
    ("The final answer is $\\boxed{12}$.", "12", "boxed"),
    ("The final answer is 12.", "12", "answer_phrase"),
    ("we get \\boxed{3}, then recheck.\nAnswer: 4", "4", "answer_line"),  # written last wins
    ("Answer: 4\nwhich in a box is \\boxed{4.0}", "4.0", "boxed"),
    ("so it works.\n\n$\\frac{3}{4}$", "\\frac{3}{4}", "last_line"),
    ("Here is the final answer from your managed agent 'coder':\nAnswer: 7", "7", "answer_line"),
])
def test_where_the_answer_is(text: str, span: str, method: str) -> None:
    assert final_answer_span(text) == (span, method)


def test_prose_is_not_an_answer() -> None:
    assert final_answer_span("I computed it above.\nThus the result follows")[0] is None
    # the managed-agent header is not an answer phrase ("final answer from", no `is` or `:` after it)
    assert all(span != "from your managed agent 'coder':" for span, _ in answer_spans(SMOLAGENTS_MANAGER))


def test_clean_span_drops_decoration_only() -> None:
    assert clean_span("**$x^2$**.") == "x^2"
    assert clean_span("exact: S = 2") == "S = 2"
    assert clean_span("`[1, 2)`") == "[1, 2)"
    assert clean_span("'a'") == "'a'" and clean_span('"it\'s"') == '"it\'s"'  # balanced quotes are the answer's


def test_a_quote_closed_around_the_answer_line_is_not_part_of_the_answer() -> None:
    """AG2 on MATH-500 number_theory/255 (slice of 2026-11-28, seed 4): the coder's last message ended
    `The correct output should be "Answer: 7".`; the span read was `7"`, sympy could not compare it, and
    the analyzer was told the run failed on "a string '7\"'" (it blamed code that compares strings)."""
    text = ('The code output "Answer: 0" indicates that the execution failed. This means that the code did not '
            'produce the expected output. The correct output should be "Answer: 7".')
    assert final_answer_span(text)[0] == "7"
    verdict = verify(_task("math", "4"), text)
    assert not verdict.success and verdict.details["extracted"] == "7" and "could not compare" not in str(verdict.details)
    assert final_answer_span("He said “the answer is 12”")[0] == "12"


SMOLAGENTS_CODE_TAG = """Since all these numbers are divisible by 1, 2, 4, 8, 16, 32, 64, 128, and 256, the number of \
positive whole-number divisors of 196 is 196.

Therefore, the final answer is:

<code>196</code>"""
"""The end of the 0.5B smolagents manager's last message on MATH-500 number_theory/572 (seed-31 slice, 2026-12-02),
as recorded: judged "no answer found" before a value in a code block after the phrase was read."""


def test_a_bare_value_in_a_code_block_after_the_phrase_is_the_answer() -> None:
    assert final_answer_span(SMOLAGENTS_CODE_TAG) == ("196", "answer_phrase")
    verdict = verify(_task("math", "9"), SMOLAGENTS_CODE_TAG)
    assert not verdict.success and verdict.details["extracted"] == "196"
    assert verify(_task("math", "196"), SMOLAGENTS_CODE_TAG).success
    assert final_answer_span("The answer is:\n```\n\\frac{1}{2}\n```") == ("\\frac{1}{2}", "answer_phrase")
    # a program in the block is still a program, not a value
    assert final_answer_span("The final answer is:\n<code>\nresult = count_divisors(196)\n</code>")[0] is None


def test_an_answer_phrase_inside_a_program_is_not_the_answer() -> None:
    """MetaGPT on MATH-500 algebra/2735 and intermediate_algebra/1508 (slice of 2026-11-29, seed 17): the coder's
    program ends `print("Answer: ", simplified_expression)`; the phrase inside the code was read as the stated
    answer `, simplified_expression)`, so the checks judged the step by a fragment of a print call. The steps are
    copied from the recorded run."""
    run = json.loads((Path(__file__).parent / "fixtures/real_runs/metagpt_math500_algebra_2735.json").read_text())
    steps = {s["index"]: s["content"] for s in run["steps"]}
    coder, reviewer = steps[5], steps[8]
    assert 'print("Answer: ", simplified_expression)' in coder and "The correct code should be" in reviewer
    for text in (coder, reviewer):
        assert all(method != "answer_phrase" for _, method in answer_spans(text)), answer_spans(text)
    # the same program with a stated answer in prose after it: the prose is read
    assert final_answer_span(coder + "\n\nThe answer is $\\frac{9a+11}{20}$.") == ("\\frac{9a+11}{20}", "answer_phrase")
    # outside a fence, the rest of a print call is not an answer either
    assert all(span != ", x)" for span, _ in answer_spans('I will run print("The answer is", x)'))


@pytest.mark.parametrize("answer", [AG2_CODER, SMOLAGENTS_MANAGER, SMOLAGENTS_MANAGER_PLAIN])
def test_reported_false_failures_are_successes(answer: str) -> None:
    truth = "1" if answer is AG2_CODER else "2"
    verdict = verify(_task("math", truth), answer)
    assert verdict.success, verdict.details


def test_numeric_reads_answer_lines_and_bold() -> None:
    assert verify(_task("numeric", "18"), "She sells 9 eggs at $2.\n\n**Answer:** 18").success
    assert verify(_task("numeric", "18"), "Here is the final answer from your managed agent 'coder':\nAnswer: 18").success
    # the last number of the text (a check printed after the answer) does not override the answer line
    assert verify(_task("numeric", "18"), "Answer: 18\nChecked with print(18 - 0) -> 3 items left").success


def test_qa_reads_an_answer_line_but_keeps_plain_spans() -> None:
    assert verify(_task("qa", "Norrström", kind="qa"), "The museum is in Stockholm.\nAnswer: Norrström").success
    assert verify(_task("qa", "Norrström", kind="qa"), "Norrström").success
    assert not verify(_task("qa", "Norrström", kind="qa"), "Answer: Stockholm").success


def test_wrong_answers_still_fail() -> None:
    assert not verify(_task("math", "1"), AG2_CODER.replace("Answer: 1", "Answer: 2")).success
    assert not verify(_task("numeric", "18"), "**Answer:** 17").success


def test_contract_per_verifier() -> None:
    math = answer_contract(_task("math", "1"))
    assert math.form == "expression" and math.line == "Answer: <final answer>" and "tuple" in math.instruction
    assert answer_contract(_task("numeric", "1")).line == "Answer: <number>"
    code = answer_contract(Task(benchmark="t", task_id="1", prompt="q", verifier="code_tests", kind="coding",
                                metadata={"entry_point": "add"}))
    assert code.form == "code" and "`add`" in code.instruction
    assert code.format("def add(a, b):\n    return a + b") == "```python\ndef add(a, b):\n    return a + b\n```"
    assert math.format("(1, 2)") == "Answer: (1, 2)"
    # what the contract asks for is what the verifier reads
    assert verify(_task("math", "(1,2)"), "work...\n" + math.format("(1, 2)")).success
