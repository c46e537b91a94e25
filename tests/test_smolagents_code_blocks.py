"""smolagents' code blocks are code: a CodeAgent (smolagents 1.26) writes `<code>...</code>`, stops generating at
`</code>` and adds the tag back to the step it records (`output_text += code_block_tags[1]`, agents.py).

Read as prose before, its steps held no code: the verifier's code extraction took the whole text, the leak guard saw
a step that stated no answer (so any fix carrying working code was refused as a leak), `from_reference` replaced the
whole step (its `Thought:` and all) with a markdown fence, and a math step's program (`final_answer(total_cost)`)
printed nothing. The replies are real (tests/fixtures/golden_real/smolagents-*.json: the 0.5B as the smolagents
manager on MBPP+ 282 and GSM8K test-387), with the closing tag smolagents records after them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from rootstep.annotation import Budget, Meter, TaskContext
from rootstep.annotation._perturbations import _code_spans, change_constant, flip_operator
from rootstep.annotation._propose import FixProposer, code_form_asked
from rootstep.benchmarks import answer_leak, build_program, code_blocks, extract_code, load_tasks, program_output
from rootstep.benchmarks import python_program
from rootstep.benchmarks import sandbox_runner, verify
from rootstep.model import Recording, Step, Trajectory
from rootstep.sandboxes import get_sandbox

GOLDEN = Path(__file__).parent / "fixtures" / "golden_real"


def recorded(name: str, reply: int = 0) -> str:
    """The step smolagents records of a real reply: the reply with `</code>` added when it does not end with it."""
    text = json.loads((GOLDEN / f"{name}.json").read_text())["replies"][reply]["content"]
    return text if not text or text.strip().endswith("</code>") else text + "</code>"


MBPP_282 = recorded("smolagents-mbppplus-wrong")
"""`Thought: ...` then `<code>` defining `sub_list` and calling `final_answer(sub_list([1, 2, 3],[4,5,6]))`."""
GSM8K_387 = recorded("smolagents-gsm8k-right")
"""`<code>\\ntotal_cost = 6 * 2 + 8 * 3\\nfinal_answer(total_cost)\\n</code>` (the answer is 36)."""


SYSTEM_LINE = ("Then in the Code sequence you should write the code in simple Python. The code sequence must be opened "
               "with '<code>', and closed with '</code>'.")
"""The line of smolagents 1.26.0's CodeAgent system prompt that names its code block, as the library renders it
(`CodeAgent(tools=[], model=None).system_prompt` in the fw-smolagents image)."""


def task(benchmark: str, task_id: str):
    return next(t for t in load_tasks(benchmark) if t.task_id == task_id)


def test_a_code_tag_block_is_a_python_block_and_the_prose_around_it_is_not():
    [block] = code_blocks(MBPP_282)
    assert block.python and block.tagged
    assert MBPP_282[:block.start].startswith("Thought: I will write a function")
    assert block.end == len(MBPP_282)
    assert block.code.startswith("def sub_list(list1, list2):\n") and "final_answer(" in block.code
    assert "</code>" not in block.code and "<code>" not in block.code


@pytest.mark.parametrize("text", [
    "Thought: sum them.\n<code>\nprint(1 + 2)\n</code>",
    "Thought: sum them.\n<code>\n```python\nprint(1 + 2)\n```\n</code>",
    "Sum them:\n```python\nprint(1 + 2)\n```\nDone.",
    "Thought: sum them.\n<code>\nprint(1 + 2)\n",  # as generated: smolagents stops at `</code>`
])
def test_a_blocks_code_sits_where_it_says(text):
    """`code_at` is where the code is written in the text, what a perturbation edits in place."""
    [block] = code_blocks(text)
    start, end = block.code_at
    assert text[start:end].strip("\n") == block.code.strip("\n") == "print(1 + 2)"
    assert block.start <= start <= end <= block.end


def test_the_reply_as_generated_without_its_closing_tag_runs_to_the_end():
    raw = json.loads((GOLDEN / "smolagents-mbppplus-wrong.json").read_text())["replies"][0]["content"]
    assert [b.code for b in code_blocks(raw)] == [b.code for b in code_blocks(MBPP_282)]


def test_a_fence_written_inside_a_code_tag_is_the_code():
    [block] = code_blocks("Thought: sum them.\n<code>\n```python\nprint(1 + 2)\n```\n</code>")
    assert block.code == "print(1 + 2)\n" and block.tagged and block.python


def test_a_markdown_reply_with_the_added_closing_tag_keeps_its_fence():
    text = recorded("smolagents-mbppplus-right")  # ```python ... ``` and smolagents' </code> after it
    [block] = code_blocks(text)
    assert not block.tagged and block.language == "python" and block.code.startswith("def maximum(")


def test_a_retake_in_a_smolagents_seat_is_asked_for_its_code_tag_block():
    system = {"role": "system", "content": f"You are an expert assistant.\n{SYSTEM_LINE}\n"}
    assert code_form_asked([system, {"role": "user", "content": "New task: ..."}]) == "<code> ... </code>"
    ag2 = {"role": "system", "content": "Write a short Python code block (```python ... ```) that computes the answer"}
    assert code_form_asked([ag2]) == "```python ... ```"
    assert code_form_asked([{"role": "user", "content": SYSTEM_LINE}]) is None  # the agent's instructions only


def test_the_verifier_reads_the_function_from_the_code_block():
    code, how = extract_code(MBPP_282, "sub_list")
    assert how == "last fenced block defining the entry point"
    assert code.startswith("def sub_list(") and "Thought" not in code


def test_the_verifiers_program_has_the_final_answer_tool_the_block_calls():
    """The block ends `final_answer(sub_list([1, 2, 3],[4,5,6]))`: run by the task's tests without smolagents' tool it
    was a NameError at import, and the right `sub_list` failed every test (score 0)."""
    program, _how = build_program(MBPP_282, task("mbppplus", "Mbpp/282"))
    assert program.startswith("def final_answer(answer):\n    print(answer)\n")
    assert program.rstrip().endswith("final_answer(sub_list([1, 2, 3],[4,5,6]))")
    plain, _how = build_program("```python\ndef sub_list(a, b):\n    return a\n```", task("mbppplus", "Mbpp/282"))
    assert "final_answer" not in plain


def test_written_keeps_the_blocks_form():
    [tagged] = code_blocks(MBPP_282)
    assert tagged.written("x = 1\n") == "<code>\nx = 1\n</code>"
    [fenced] = code_blocks("```py\nx = 2\n```")
    assert fenced.written("x = 1") == "```python\nx = 1\n```"


def test_a_step_that_calls_final_answer_states_what_it_passes():
    program = python_program(GSM8K_387)
    assert program is not None and program.startswith("def final_answer(answer):")
    ran = {}

    def run(code: str) -> str:  # the program's text only: what it would print is not computed here
        ran["code"] = code
        return "36\n"

    assert program_output(GSM8K_387, run) == "36"
    assert "total_cost = 6 * 2 + 8 * 3" in ran["code"]


def test_a_program_that_defines_final_answer_is_left_as_written():
    text = "<code>\ndef final_answer(x):\n    return x\nprint(final_answer(3))\n</code>"
    assert python_program(text) == "def final_answer(x):\n    return x\nprint(final_answer(3))\n"
    assert python_program("```python\nprint(2)\n```") == "print(2)\n"


def test_a_fenced_fix_of_a_step_that_wrote_code_is_no_leak():
    """The step wrote `sub_list` (it gave an answer): correcting it with working code in a markdown fence, as the 1.5B
    writes fixes, corrects its own work. Read as prose, the step stated nothing and the fix was a leak."""
    mbpp = task("mbppplus", "Mbpp/282")
    local = get_sandbox("local", allow_local=True)
    check = lambda t, a: verify(t, a, sandbox=local)  # noqa: E731
    fix = f"Thought: subtract element-wise.\n```python\n{mbpp.metadata['reference_solution'].strip()}\n```"
    assert answer_leak(mbpp, MBPP_282, fix, check) is None
    plan = "Thought: I will ask the coder to write the function."  # a step with no code: the same fix is a leak
    assert answer_leak(mbpp, plan, fix, check) is not None


def test_injection_corrupts_the_function_not_the_example_call():
    """The work of the block is `sub_list`'s body; the `final_answer(sub_list([1, 2, 3],[4,5,6]))` call around it
    checks it. Read as prose, every number of the text was a constant to corrupt (`4` to `3` in the call)."""
    step = Step(index=1, agent="manager", kind="agent", content=MBPP_282)
    [(start, end)] = _code_spans(MBPP_282)
    assert MBPP_282[start:end].strip().startswith("def sub_list(")
    for seed in range(5):
        assert change_constant(step, random.Random(seed)) is None
        flipped = flip_operator(step, random.Random(seed))
        assert flipped is not None and "return [x + y for x, y in zip(list1, list2)]" in flipped.content
        assert flipped.content.endswith("final_answer(sub_list([1, 2, 3],[4,5,6]))\n</code>")


@pytest.mark.docker
def test_the_program_of_a_final_answer_step_runs_in_the_sandbox(docker_sandbox):
    assert program_output(GSM8K_387, sandbox_runner(docker_sandbox)) == "36"


@pytest.mark.docker
def test_the_reference_replaces_the_code_block_and_keeps_the_thought():
    mbpp = task("mbppplus", "Mbpp/282")
    local = get_sandbox("local", allow_local=True)
    steps = [Step(index=0, agent="user", kind="human", content=mbpp.prompt),
             Step(index=1, agent="manager", kind="agent", content=MBPP_282)]
    run = Trajectory(framework="smolagents", benchmark="mbppplus", task_id=mbpp.task_id, question=mbpp.prompt,
                     steps=steps, final_answer="[-3, -3, -3]", recording=Recording(gateway_run_id="real", task=mbpp))
    propose = FixProposer(run, None, TaskContext(question=mbpp.prompt, task=mbpp), lambda *a, **k: "",
                          Meter(Budget()), [], [], 24_000, lambda t, a: verify(t, a, sandbox=local), None, None)
    assert propose.failing_code(MBPP_282) is None  # sub_list is right; the run failed on what final_answer gave
    wrong = MBPP_282.replace("x - y", "x + y")
    assert propose.failing_code(wrong) is not None
    fix = propose.from_reference(steps[1].model_copy(update={"content": wrong}))
    assert fix is not None
    [block] = code_blocks(fix)
    assert fix.startswith("Thought: I will write a function") and block.tagged and fix.endswith("</code>")
    assert block.code.strip() == mbpp.metadata["reference_solution"].strip()


def test_a_computed_value_handed_back_instead_of_the_program_is_the_teams_failure_not_a_misread():
    """The recorded MBPP+ 282 run: the manager's `<code>` defines a right `sub_list` and ends with
    `final_answer(sub_list([1, 2, 3],[4,5,6]))`, so the team's answer is `[-3, -3, -3]`. No program in the final
    answer is a plain failure, searched (the manager's step is where it went wrong); the function object itself
    handed back (`<function sub_list at 0x...>`) is the program, only not as text: suspect, not searched."""
    from rootstep.benchmarks import plain_failure, suspect_reason

    local = get_sandbox("local", allow_local=True)
    check = lambda t, a: verify(t, a, sandbox=local)  # noqa: E731
    mbpp = task("mbppplus", "Mbpp/282")
    steps = [Step(index=0, agent="user", kind="human", content=mbpp.prompt),
             Step(index=1, agent="manager", content=MBPP_282)]
    assert check(mbpp, MBPP_282).success  # the step's program passes
    for answer in ("[-3, -3, -3]", "<function sub_list at 0x7f3a2c1e5d30>"):
        failed = check(mbpp, answer)
        assert not failed.success
        reason = suspect_reason(mbpp, answer, steps, failed, check)
        if answer.startswith("["):
            assert reason is None and plain_failure(mbpp, answer, failed) == "no code in the final answer"
        else:
            assert reason == "step 1 (manager) holds a program that passes the tests, but the final answer holds the function object"
