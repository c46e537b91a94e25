"""Scripted agents, analyzer and perturber for the flow tests, where the decisive step is known.

Four MBPP-style `add` tasks, told apart by a marker in their prompt, each a scenario:

* `[s1]` fails; correcting step 3 fixes it, the analyzer declines the earlier agent steps -> label 3
  (smolagents). AG2's coder writes the failing function itself at step 1: code that fails the task's tests
  cannot be declined, the analyzer is asked for its correction, and that earlier fix is the label (1).
* `[s2]` fails; correcting a LATER step (AG2: 6, smolagents: 5) fixes it and the analyzer ranks it
  first, but correcting step 3 fixes it too -> the earliest, 3, is the label. (AG2: the coder's failing
  step 1 is corrected first, as in s1, but its critic still asks for a docstring at step 3 and the coder
  writes the failing code again at step 4: that fix fails, and step 3 is the earliest that works.)
* `[s3]` fails whatever the analyzer proposes (a stubborn agent) -> stored unresolved.
* `[s4]` succeeds; the perturber's corruption of one step flips it -> labelled by construction.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rootstep.model import Task

from ._adapter_support import register_scripts

TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(10, 5) == 15"]


def scenario_task(marker: str) -> Task:
    return Task(
        benchmark="mbpp", task_id=f"flows-{marker}", kind="coding", verifier="code_tests",
        prompt=f"[{marker}] Write a function add(a, b) that returns the sum of a and b.\n"
               "Your code should pass these tests:\n\n" + "\n".join(TESTS),
        metadata={"harness": "asserts", "tests": TESTS, "entry_point": "add"},
    )


def scenario_tasks() -> list[Task]:
    return [scenario_task(m) for m in ("s1", "s2", "s3", "s4")]


def _text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content")) for m in messages)


def _marker(text: str) -> str:
    found = re.search(r"\[(s\d)\]", text)
    return found.group(1) if found else "?"


# --------------------------------------------------------------------------------------- AG2
# steps: 0 executor (task, human), 1 coder, 2 executor (runs the code, tool), 3 critic, 4 coder, 5 executor, 6 critic

AG2_RIGHT = "Here is the solution.\n```python\ndef add(a, b):\n    return a + b\n\nprint(add(1, 2))\n```"
AG2_WRONG = "Here is the solution.\n```python\ndef add(a, b):\n    return a - b\n\nprint(add(1, 2))\n```"
AG2_FIX = "The executor printed -1 for add(1, 2), expected 3: add must return a + b. Fix it."
AG2_DOCSTRING = "Please add a docstring to the function."


def ag2_coder(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    text = _text(messages)
    if _marker(text) == "s4":
        return AG2_RIGHT
    if _marker(text) == "s3":
        return AG2_WRONG  # stubborn: ignores every correction
    return AG2_RIGHT if "Fix it" in text else AG2_WRONG


def ag2_critic(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    text = _text(messages)
    if _marker(text) == "s2" and AG2_DOCSTRING not in text and "Fix it" not in text:
        return AG2_DOCSTRING  # step 3 of s2: asks for a docstring instead of catching the bug
    return "The code ran without errors. TERMINATE"


# --------------------------------------------------------------------------------------- smolagents
# steps: 0 user (human), 1 manager (delegates), 2 coder, 3 manager, (4 coder, 5 manager in s2)

SMOL_DELEGATE = ('Thought: I give the task to the coder.\n<code>\n'
                 'answer = coder(task="[{marker}] Write a Python function add(a, b) that returns a + b. Tests: assert add(1, 2) == 3")\n'
                 'print("delegation" + " done")\n</code>')
SMOL_AGAIN = ('Thought: I ask the coder once more to be sure.\n<code>\n'
              'answer = coder(task="[{marker}] Check your function add(a, b) once more and return it.")\n'
              'print("delegation" + " done")\n</code>')
SMOL_RETURN = "Thought: The coder is done; I return its answer.\n<code>\nfinal_answer(answer)\n</code>"
SMOL_TESTED = ('Thought: I write add and check it on the examples.\n<code>\n'
               'def add(a, b):\n    return a + b\n\nassert add(1, 2) == 3 and add(-1, 1) == 0\nprint("tests pass")\n'
               'final_answer("```python\\ndef add(a, b):\\n    return a + b\\n```")\n</code>')
SMOL_CARELESS = ('Thought: This is simple, no need to test.\n<code>\n'
                 'final_answer("```python\\ndef add(a, b):\\n    return a - b\\n```")\n</code>')
SMOL_FIX = ('Thought: The coder\'s function subtracts; add must return a + b. I return the corrected function.\n<code>\n'
            'final_answer("```python\\ndef add(a, b):\\n    return a + b\\n```")\n</code>')
SMOL_STILL_WRONG = ('Thought: I ask the coder to double-check its work.\n<code>\n'
                    'answer = coder(task="Write add(a, b) and test it before answering.")\nfinal_answer(answer)\n</code>')


def smol_manager(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    text = _text(messages)
    rounds = text.count("delegation done")
    marker = _marker(text)  # passed on to the coder, which sees only the manager's request
    if rounds == 0:
        return SMOL_DELEGATE.format(marker=marker)
    if marker == "s2" and rounds == 1:
        return SMOL_AGAIN.format(marker=marker)
    return SMOL_RETURN


def smol_coder(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    return SMOL_TESTED if _marker(_text(messages)) == "s4" else SMOL_CARELESS


# --------------------------------------------------------------------------------------- analyzer, perturber

def _diagnosis(step: int, agent: str, fix: str, reason: str = "this step let the wrong code through") -> str:
    return json.dumps({"mistake_step": step, "mistake_agent": agent, "reason": reason, "suggested_fix": fix})


def _is_ag2(prompt: str) -> bool:
    return "[step 0] executor" in prompt


def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """Ranked: s1 -> step 3; s2 -> the later step; s3 -> a correction that does not help.
    Asked about one step ("Examine step N"): fixes step 3 of s2, declines everything else."""
    prompt = _text(messages)
    ag2 = _is_ag2(prompt)
    scenario = _marker(prompt)
    asked_fix = re.search(r"Write a corrected version of step (\d+) \(taken by (\w+)\)", prompt)
    if asked_fix and asked_fix.group(2) == "coder" and ag2:  # its code fails the tests: a correction is required
        fix = AG2_RIGHT if scenario != "s3" else AG2_WRONG.replace("a - b", "b - a")  # s3: no right fix is found
        return _diagnosis(int(asked_fix.group(1)), "coder", fix, "add subtracts instead of adding")
    examined = re.search(r"Examine step (\d+) \(taken by (\w+)\)", prompt)
    if examined:
        step = int(examined.group(1))
        if scenario == "s2" and step == 3:
            return json.dumps({"fix_needed": True, "mistake_step": 3, "mistake_agent": examined.group(2),
                               "reason": "the bug should be caught here", "suggested_fix": AG2_FIX if ag2 else SMOL_FIX})
        return json.dumps({"fix_needed": False, "reason": "this step is fine given what came before"})
    if scenario == "s1":
        return _diagnosis(3, "critic", AG2_FIX) if ag2 else _diagnosis(3, "manager", SMOL_FIX)
    if scenario == "s2":
        return _diagnosis(6, "critic", AG2_FIX) if ag2 else _diagnosis(5, "manager", SMOL_FIX)
    return _diagnosis(3, "critic", AG2_FIX) if ag2 else _diagnosis(1, "manager", SMOL_STILL_WRONG)


def perturber(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """Corrupts the coder's step: AG2 step 1 (the code), smolagents step 2 (the coder's answer). Asked
    about one step (team-aware, `perturber_at_step.j2`), it corrupts a coder step and declines the others."""
    prompt = _text(messages)
    ag2 = _is_ag2(prompt)
    wrong, description = (AG2_WRONG, "flipped + to - in add") if ag2 else (SMOL_CARELESS, "returns a - b and skips the tests")
    at = re.search(r"STEP TO CORRUPT: step (\d+) by (\w+)", prompt)
    if at is not None:
        if at.group(2) != "coder":
            return json.dumps({"possible": False, "reason": "only the coder's code can carry the bug"})
        return json.dumps({"corrupted_content": wrong, "description": description,
                           "unnoticed": "the critic only checks that the code runs",
                           "instruction": "Subtraction is what this task calls adding."})
    return json.dumps({"step": 1 if ag2 else 2, "corrupted_content": wrong, "description": description})


def register_all() -> None:
    register_scripts({"flows-ag2-coder": ag2_coder, "flows-ag2-critic": ag2_critic, "flows-smol-manager": smol_manager,
                      "flows-smol-coder": smol_coder, "flows-analyzer": analyzer, "flows-perturber": perturber})


MODELS = {
    "ag2": ("scripted/flows-ag2-coder", {"critic": "scripted/flows-ag2-critic"}),
    "smolagents": ("scripted/flows-smol-manager", {"coder": "scripted/flows-smol-coder"}),
}
LATER_STEP = {"ag2": 6, "smolagents": 5}
LABEL = {"ag2": (1, "coder"), "smolagents": (3, "manager")}
"""Where s1 is labelled: the earliest step whose correction makes the run succeed."""
TRIED_S2 = {"ag2": {6: True, 1: False, 3: True}, "smolagents": {5: True, 3: True}}
"""s2's counterfactual replays (step: whether the run then succeeded); its label is step 3."""
INJECTED_STEP = {"ag2": ("coder", 1), "smolagents": ("coder", 2)}
