"""Answer contracts under real model output, from runs recorded on the local model (issue 23's slice).

Each fixture in tests/fixtures/real_runs is a collected run's task, steps and the driver's final answer,
copied from the warehouse of `rootstep collect -m local/qwen2.5-coder-0.5b`."""

from __future__ import annotations

import json
from pathlib import Path

from rootstep.adapters import get_adapter
from rootstep.benchmarks import program_answer, verify
from rootstep.model import Step, Task

REAL = Path(__file__).parent / "fixtures" / "real_runs"


def _recorded(name: str) -> tuple[Task, list[Step], str]:
    data = json.loads((REAL / f"{name}.json").read_text())
    return Task.model_validate(data["task"]), [Step.model_validate(s) for s in data["steps"]], data["final_answer"]


def test_metagpts_answer_on_a_math_task_is_what_the_runner_printed_after_the_testers_turn():
    """MetaGPT on GSM8K test-1101 (Ahito ran 16 miles): the coder's code printed `Answer:  16.0` in the runner's
    step, which comes after the tester's (the runner runs the code with the tests, here a wrong `assert ... == 24`),
    and the reviewer's last message quotes the same code. The verdict read `no number in the answer`: the
    search for the program's output took the reviewer's quote as the step that gave the answer, and stopped
    at the tester's step."""
    task, steps, final = _recorded("metagpt_gsm8k_test-1101")
    assert verify(task, final).details["reason"] == "no number in the answer"  # the code's text alone
    answer = get_adapter("metagpt").final_answer(task, steps, final)
    assert answer.startswith(final) and "Program output:\nAnswer:  16.0" in answer
    verdict = verify(task, answer)
    assert verdict.success and verdict.details["method"] == "answer_line"


def test_a_wrong_program_is_a_wrong_number_not_no_answer():
    """MetaGPT on GSM8K test-120 (240 sheets a month): the code printed 60 (a week's sheets)."""
    task, steps, final = _recorded("metagpt_gsm8k_test-120")
    verdict = verify(task, get_adapter("metagpt").final_answer(task, steps, final))
    assert verdict.success is False and verdict.details["extracted_value"] == "60"


def test_without_runs_with_an_agent_between_the_code_and_its_run_ends_the_search():
    """Another framework's agent speaking between the code and the run may have changed the program that
    ran (AG2's executor runs the last message's code): its output is not the answer's."""
    task, steps, final = _recorded("metagpt_gsm8k_test-1101")
    assert program_answer(task, final, steps) == final
    # the step that gave the answer is the coder's own (its whole text), not the reviewer's quote of it
    quoted_last = steps[:16] + [steps[16].model_copy(update={"content": "Looks fine:\n" + final})]
    answer = program_answer(task, final, quoted_last, runs_with=("tester",))
    assert "Program output:\nAnswer:  16.0\n" in answer and verify(task, answer).success


def test_ag2s_prose_ending_is_read_with_the_output_of_the_teams_last_program():
    """AG2 on GSM8K test-7 (0.5B agents): the critic never says TERMINATE and the coder's last message echoes its
    prose ("... is indeed 560 minutes."); the number the team computed is what the executor printed (step 8,
    exit code 0), not a number lifted from the prose (the former reading: `last_number` of the sentence)."""
    task, steps, final = _recorded("ag2_gsm8k_test-7")
    assert verify(task, final).details["method"] == "last_number"
    answer = get_adapter("ag2").final_answer(task, steps, final)
    assert answer.startswith(final) and answer.endswith("Program output:\nAnswer: 560 minutes")
    assert verify(task, answer).details["method"] != "last_number"


def test_ag2s_answer_skips_failed_runs_and_the_no_code_reply():
    """AG2 on GSM8K test-780: after the prose answer the executor replied "No code block was found" (step 11),
    the run at step 2 failed (exit code 1): the output read is step 8's, the last run that succeeded."""
    task, steps, final = _recorded("ag2_gsm8k_test-780")
    answer = get_adapter("ag2").final_answer(task, steps, final)
    assert answer == f"{final}\n\nProgram output:\n110"
    # a prose answer that states its answer keeps it; a code answer is read by `program_answer` as before
    stated = "The team's answer.\nAnswer: 25"
    assert get_adapter("ag2").final_answer(task, steps, stated) == stated
    assert get_adapter("ag2").final_answer(task, steps, steps[7].content).endswith("Program output:\n110")


def test_ag2s_prose_ending_on_a_coding_task_is_judged_on_the_coders_last_code():
    """AG2 on MBPP 453 (0.5B agents): the coder's last message is the critic's prose echoed ("The code output is
    26, ..."), with no code: the verifier found no program to run and the failure looked like a misread
    verdict. The team's code is the coder's last code block (step 7), which the prose is about."""
    task, steps, final = _recorded("ag2_mbpp_453")
    assert "```" not in final
    answer = get_adapter("ag2").final_answer(task, steps, final)
    code = steps[7].content.strip()
    assert answer == f"{final}\n\nCode (step 7):\n{code}"


def test_a_point_that_ag2_printed_is_read_without_the_executors_label():
    """Slice of 2026-11-27, AG2 on MATH-500 precalculus/43 (the local 0.5B): the coder's sympy program printed the
    right point; the executor reported it as `Code output: (15, -29)`, and with that label in the team's answer
    the MATH verifier read `Code output: (15, -29)` as the answer and failed a right run."""
    from rootstep.benchmarks._answer import printed_output

    code = ("```python\nfrom sympy import symbols\n\nt = symbols('t')\nx = t**3 + 7\ny = -3*t**2 - 6*t - 5\n"
            "point = (x.subs(t, 2), y.subs(t, 2))\nprint(point)\n```")
    task = Task(benchmark="math500", task_id="test/precalculus/43.json", verifier="math", kind="math",
                ground_truth="(15,-29)", prompt="Find the point the curve passes through at $t = 2.$")
    steps = [Step(index=0, agent="executor", kind="human", content=task.prompt),
             Step(index=1, agent="coder", content=code),
             Step(index=2, agent="executor", kind="tool",
                  content="exitcode: 0 (execution succeeded)\nCode output: (15, -29)\n")]
    answer = get_adapter("ag2").final_answer(task, steps, code)
    assert answer.endswith("Program output:\n(15, -29)")
    assert verify(task, answer).success
    assert printed_output("exitcode: 0 (execution succeeded)\nCode output: 240\n") == "240"
    assert printed_output("exit code 0\nCode output:\n(1, 2)") == "(1, 2)"
