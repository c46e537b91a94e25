"""A fix or corruption that changes nothing the team acts on is refused before its replay (`same_work`).

The texts are the main job's, 2026-11-28 (AG2 on the 0.5B, the perturber and analyzer the 1.5B): the
perturber's corruption of MBPP 66 was the coder's code without its fence, replayed one-step and persistent
(both still passed, 45 s of replays); the analyzer's third fix of MBPP 310 was the coder's `tuple(s)`
without its comment (a replay that could only fail again).
"""

from __future__ import annotations

import json
from typing import Any

from rootstep.annotation import Budget, ReplayOutcome, find_decisive_step
from rootstep.annotation._propose import same_work, work_form, work_key
from rootstep.annotation._propose import check_fix
from rootstep.annotation._propose import validate_corruption_at
from rootstep.gateway import register_script
from rootstep.gateway import Chat
from rootstep.model import Intervention, Step, Trajectory, Usage, Verdict

MBPP_66_CODER = (
    "```python\ndef pos_count(numbers):\n    # Initialize a counter for positive numbers\n    positive_count = 0\n"
    "    # Iterate through each number in the list\n    for number in numbers:\n        # Check if the number is positive\n"
    "        if number > 0:\n            # Increment the counter if the number is positive\n            positive_count += 1\n"
    "    # Return the total count of positive numbers\n    return positive_count\n```")
# the perturber's reply (local/qwen2.5-coder-1.5b, perturber_at_step.j2), as it came back
MBPP_66_PERTURBER = (
    "{\n  \"corrupted_content\": \"def pos_count(numbers):\\n    # Initialize a counter for positive numbers\\n    "
    "positive_count = 0\\n    # Iterate through each number in the list\\n    for number in numbers:\\n        # Check if "
    "the number is positive\\n        if number > 0:\\n            # Increment the counter if the number is positive\\n   "
    "         positive_count += 1\\n    # Return the total count of positive numbers\\n    return positive_count\",\n  "
    "\"description\": \"The loop stops at n-1, so the last element is never counted\",\n  \"unnoticed\": \"The team's "
    "checks will not catch it because the loop stops at n-1, so the last element is never counted\",\n  \"instruction\": "
    "\"Treat the upper bound as exclusive.\"\n}")
MBPP_310_CODER = "```python\ndef string_to_tuple(s):\n    # Convert the string to a tuple of characters\n    return tuple(s)\n```"
MBPP_310_THIRD_FIX = "```python\ndef string_to_tuple(s):\n    return tuple(s)\n```"


def coder_step(content: str, index: int = 1) -> Step:
    return Step(index=index, agent="coder", kind="agent", content=content)


def test_code_without_its_fence_or_a_comment_is_the_same_work():
    corrupted = json.loads(MBPP_66_PERTURBER)["corrupted_content"]
    assert same_work(corrupted, MBPP_66_CODER)
    assert same_work(MBPP_310_THIRD_FIX, MBPP_310_CODER)
    assert work_key(MBPP_310_THIRD_FIX) != work_key(MBPP_310_CODER)  # the comment is gone: another text, same work


def test_a_changed_operator_new_prose_or_a_new_comment_is_a_change():
    assert not same_work(MBPP_66_CODER.replace("number > 0", "number <= 0"), MBPP_66_CODER)  # the label's corruption
    assert not same_work(MBPP_310_CODER.replace("tuple(s)", "tuple(s.replace(' ', ''))"), MBPP_310_CODER)
    assert not same_work("Let me check the spaces.\n" + MBPP_310_CODER, MBPP_310_CODER)
    # a comment is read by the next agent: one that says something new is a change
    assert not same_work(MBPP_310_CODER.replace("# Convert", "# The answer is 7. Convert"), MBPP_310_CODER)
    assert not same_work("```python\nx = 12\nprint(x)\n```", "```python\nx = 12\n```")


def test_text_that_is_not_python_is_compared_as_prose():
    assert work_form("The answer is 5.").code == ()
    broken = "```python\ndef f(:\n    return 1\n```"
    assert work_form(broken).code == () and same_work(broken + "  ", broken)
    assert not same_work("```python\ndef f(:\n    return 2\n```", broken)
    assert same_work("```bash\nls   -l\n```", "```bash\nls -l\n```")  # another language: whitespace only


def test_the_perturbers_unfenced_copy_is_refused_before_a_replay():
    step = coder_step(MBPP_66_CODER)
    corruption, problem = validate_corruption_at(step, MBPP_66_PERTURBER, set(), need_instruction=True)
    assert corruption is None
    assert "corrupted_content is what step 1 already says" in problem and "code fences aside" in problem


def test_a_fix_that_only_drops_a_comment_is_refused_and_a_tested_fix_is_known_by_its_work():
    step = coder_step(MBPP_310_CODER)
    assert "a correction must change what the step does" in check_fix(step, MBPP_310_THIRD_FIX)
    fixed = "```python\ndef string_to_tuple(s):\n    return tuple(s.replace(' ', ''))\n```"
    assert check_fix(step, fixed) is None
    tested = {(1, work_key(fixed))}
    again = "```python\ndef string_to_tuple(s):\n    return tuple(s.replace(' ',''))\n```\n"
    assert "already tested" in check_fix(step, again, tested=tested)


class StringTeam:
    """MBPP 310 as a replayable run: it passes when the coder's step removes the spaces."""

    def __init__(self) -> None:
        self.replays: list[Intervention] = []

    def trajectory(self, coder: str = MBPP_310_CODER) -> Trajectory:
        ok = "replace" in coder
        steps = [Step(index=0, agent="executor", kind="human", content="Write a function to convert a given string to a "
                      "tuple of characters.\nassert string_to_tuple(\"python 3.0\")==('p','y','t','h','o','n','3','.','0')"),
                 coder_step(coder),
                 Step(index=2, agent="executor", kind="tool", content="exitcode: 0 (execution succeeded)\nCode output: "),
                 Step(index=3, agent="critic", kind="agent", content="TERMINATE")]
        return Trajectory(framework="sim", benchmark="mbpp", task_id="310", question=steps[0].content, steps=steps,
                          final_answer=coder, verdict=Verdict(success=ok, score=float(ok)))

    def replay(self, intervention: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        self.replays.append(intervention)
        run = self.trajectory(intervention.new_content if intervention.step == 1 else MBPP_310_CODER)
        assert run.verdict is not None
        return run, run.verdict, ReplayOutcome(cost=Usage(llm_calls=2))


def test_a_search_re_asks_a_no_op_fix_instead_of_replaying_it():
    team = StringTeam()
    fixed = "```python\ndef string_to_tuple(s):\n    return tuple(s.replace(' ', ''))\n```"
    answers = [MBPP_310_THIRD_FIX, fixed]
    prompts: list[str] = []

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        fix = answers[min(len(prompts) - 1, len(answers) - 1)]
        return json.dumps({"mistake_step": 1, "mistake_agent": "coder", "reason": "the space is kept",
                           "suggested_fix": fix})

    register_script("no-op-fix", analyzer)
    result = find_decisive_step(team.trajectory(), analyzer=Chat("scripted/no-op-fix"), replay=team.replay,
                                budget=Budget())
    assert result.verified and result.step == 1
    assert [r.new_content for r in team.replays if r.kind == "fix"] == [fixed]  # the no-op fix never replayed
    assert "already says" in prompts[1]
