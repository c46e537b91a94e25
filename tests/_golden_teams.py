"""Scripted teams that work like a correct team, in each framework's own protocol, for the golden-path
matrix (tests/test_golden_path.py).

A team is given its `Work`: the task, the adapter's answer contract and the value it hands in (the
reference answer or the canonical program for the right team; a wrong answer or a broken program for
the wrong team). Every agent that states an answer writes it as the framework's prompts ask:
`contract.format(value)` (`Answer: <value>` for math and QA, a ```python block for code), or for AFlow,
whose operators ask for XML fields, the value alone in `<answer>`. Agents that run code run code that
computes or prints what they then state; checkers approve when the framework's own check passed and ask
for a fix otherwise (the coder then hands in the same work again: it can do no better).

`TEAMS[framework](work)` is `{agent: fn(messages, params) -> reply}` for the scripted provider.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any, Callable

from rootstep.benchmarks import visible_tests
from rootstep.benchmarks import AnswerContract
from rootstep.model import Task

from ._adapter_support import last_message_text

Reply = Callable[[list[dict[str, Any]], dict[str, Any]], Any]


@dataclass(frozen=True)
class Work:
    task: Task
    contract: AnswerContract
    value: str
    """The answer (math, QA) or the program (code) the team hands in."""

    @property
    def coding(self) -> bool:
        return self.contract.form == "code"

    @property
    def stated(self) -> str:
        """The value written as the prompts' contract asks (an `Answer:` line, a ```python block)."""
        return self.contract.format(self.value)

    def examples_run(self) -> str:
        """Code that runs the value: for code, the program and a print of each example call the task
        shows; otherwise a program that prints the answer."""
        if not self.coding:
            return f"answer = {self.value!r}\nprint(answer)"
        return self.value.rstrip() + "\n\n" + "\n".join(example_prints(self.task))

    def visible_asserts(self) -> str:
        return "\n".join(visible_tests(self.task))


def example_prints(task: Task) -> list[str]:
    """`print(<call>)` for each example the task's prompt shows (its visible tests): the outermost call
    of the entry point in each assert, with the example's set-up lines kept."""
    entry = task.metadata.get("entry_point")
    lines: list[str] = []
    for test in visible_tests(task):
        for node in ast.parse(test).body:
            if not isinstance(node, ast.Assert):
                lines.append(ast.unparse(node))
                continue
            call = next((sub for sub in ast.walk(node.test) if isinstance(sub, ast.Call)
                         and isinstance(sub.func, ast.Name) and sub.func.id == entry), None)
            if call is not None:
                lines.append(f"print({ast.unparse(call)})")
    return list(dict.fromkeys(lines))


def _approves_when(passed: Callable[[str], bool], approve: str, fix: str) -> Reply:
    return lambda messages, params: approve if passed(last_message_text(messages)) else fix


# ------------------------------------------------------------------------------------------- AG2


def ag2(work: Work) -> dict[str, Reply]:
    """coder: a ```python block that runs the work, then (math) the `Answer:` line / (code) the program;
    critic: approves with TERMINATE when the executor's run succeeded."""
    if work.coding:
        coder = "Here is the solution, with the task's examples printed.\n" + work.contract.format(work.examples_run())
    else:
        coder = ("I compute the answer in Python.\n```python\n" + work.examples_run() + "\n```\n"
                 "The code prints the answer.\n" + work.stated)
    critic = _approves_when(lambda text: "exitcode: 0" in text,
                            "The code ran and its output agrees with the task. TERMINATE",
                            "The execution failed; fix the error and send the complete solution again.")
    return {"coder": lambda m, p: coder, "critic": critic}


# ------------------------------------------------------------------------------------ smolagents


def smolagents(work: Work) -> dict[str, Reply]:
    """manager: delegates the whole task to the coder, prints a note, then returns the coder's answer;
    coder: runs the work in its Python executor and returns the stated answer with final_answer."""
    delegate = ("Thought: I give the complete task to the coder.\n<code>\n"
                f"answer = coder(task={work.task.prompt!r})\nprint(\"The coder finished.\")\n</code>")
    give_back = "Thought: The coder is done; I return its answer.\n<code>\nfinal_answer(answer)\n</code>"
    # smolagents asks a managed agent for a three-part report; a hand-answered model wrote the code block
    # inside part 2 and, asked by our prompt to end with the answer line, ends the report with it
    if work.coding:
        short, detail, end = "The function is written and gives the expected results on the examples.", work.stated, ""
    else:
        short = f"The answer is {work.value}."
        detail, end = "I computed the answer in Python and checked the result against the problem.", "\n\n" + work.stated
    stated = (f"### 1. Task outcome (short version):\n{short}\n\n### 2. Task outcome (extremely detailed version):\n"
              f"{detail}\n\n### 3. Additional context (if relevant):\nNone.{end}")
    coder = (f"Thought: I {'write the function and run it on the examples' if work.coding else 'compute the answer'}, "
             f"then return it.\n<code>\n{work.examples_run()}\nfinal_answer({stated!r})\n</code>")

    def manager(messages, params):
        return give_back if "coder finished" in last_message_text(messages) else delegate

    return {"manager": manager, "coder": lambda m, p: coder}


# ---------------------------------------------------------------------------------------- MetaGPT


def metagpt(work: Work) -> dict[str, Reply]:
    """coder: the program (code) or a block computing `answer` and the `Answer:` line (math); tester:
    asserts of the task's examples (code) or a check that `answer` was computed (math); reviewer:
    APPROVED when the test run exited 0, else a change request."""
    if work.coding:
        coder = work.stated
        tester = "```python\n" + work.visible_asserts() + "\nprint('all asserts passed')\n```"
    else:
        coder = "```python\n" + work.examples_run() + "\n```\n" + work.stated
        tester = "```python\nassert answer is not None\nprint('answer:', answer)\n```"
    reviewer = _approves_when(lambda text: "exit code 0" in text, "APPROVED",
                              "The test run failed: fix the code so that the asserts pass.")
    return {"coder": lambda m, p: coder, "tester": lambda m, p: tester, "reviewer": reviewer}


# -------------------------------------------------------------------------------- OWL-Workforce


def _json(value: Any) -> str:
    return "```json\n" + json.dumps(value, indent=2) + "\n```"  # as the hand-answered model wrote them


def owl(work: Work) -> dict[str, Reply]:
    """planner: two subtasks (coder solves and runs, reviewer checks and delivers), every result of
    good quality; coordinator: coder then reviewer; coder: runs the work with execute_code, then its
    result with the stated answer; reviewer: confirms and states the same answer (camel's formats: a
    `<tasks>` list, TaskAnalysisResult / TaskAssignResult / TaskResult JSON)."""
    what = "the complete function in a python code block" if work.coding else "the final answer line"
    decomposition = (
        "<tasks>\n"
        f"<task>Solve the task below with Python code, run the code with the execute_code tool, and return {what}.\n"
        f"{work.task.prompt}</task>\n"
        f"<task>Review the coder's result against the task and return {what}.</task>\n"
        "</tasks>"
    )
    quality = _json({"quality_score": 90, "reasoning": "The result answers the subtask.", "issues": [],
                     "recovery_strategy": None, "modified_task_content": None})
    assign = _json({"assignments": [{"task_id": "task.1", "assignee_id": "coder", "dependencies": []},
                                    {"task_id": "task.2", "assignee_id": "reviewer", "dependencies": ["task.1"]}]})

    def planner(messages, params):
        text = last_message_text(messages)
        if "decompose a complex task" in text:
            return decomposition
        if "evaluate its quality" in text:
            return quality
        return AssertionError(f"unexpected planner prompt: {text[:300]}")

    def coder(messages, params):
        if messages[-1].get("role") == "tool":
            ran = "The function ran on the examples." if work.coding else "The code printed the answer."
            return _json({"content": f"{ran}\n{work.stated}", "failed": False})
        return {"content": "I run the code first.",
                "tool_calls": [{"name": "execute_code", "arguments": {"code": work.examples_run(), "code_type": "python"}}]}

    reviewer = _json({"content": f"I checked the coder's result against the task.\n{work.stated}", "failed": False})
    return {"planner": planner, "coordinator": lambda m, p: assign, "coder": coder, "reviewer": lambda m, p: reviewer}


# ------------------------------------------------------------------------------------------ AFlow


def aflow(work: Work) -> dict[str, Reply]:
    """custom / test: the program in a ```python block; answer_generate: `<thought>` and the value alone in
    `<answer>` (the operator's format, with the contract's answer form); programmer: a `solve()` that
    returns it; sc_ensemble: picks candidate A (all candidates agree)."""
    pick = "<thought>The candidates agree; A is one of them.</thought>\n<solution_letter>A</solution_letter>"
    if work.coding:
        program = "Here is the solution.\n" + work.stated
        fixed = "The tests fail because of the examples' edge cases; here is the solution again.\n" + work.stated
        return {"custom": lambda m, p: program, "sc_ensemble": lambda m, p: pick, "test": lambda m, p: fixed}
    answer = f"<thought>I worked it out step by step and checked each result.</thought>\n<answer>{work.value}</answer>"
    solve = f"```python\ndef solve():\n    return {work.value!r}\n```"
    return {"answer_generate": lambda m, p: answer, "programmer": lambda m, p: solve, "sc_ensemble": lambda m, p: pick}


# ------------------------------------------------------------------------------------- AgentPrune


def agentprune(work: Work) -> dict[str, Reply]:
    """Every agent states the team's answer in the contract's form; the programmer's block prints it
    (math) or is the program run against the visible tests (code); the inspector confirms when no
    visible test failed; the decision node gives the final answer."""
    if work.coding:
        entry = work.task.metadata.get("entry_point")
        return {
            "analyst": lambda m, p: f"Plan: implement `{entry}` as the task describes and check it on its examples.",
            "math_solver": lambda m, p: "The task needs no formula beyond what its description states.",
            "programmer": lambda m, p: "Here is the implementation.\n" + work.stated,
            "inspector": _approves_when(lambda text: "FAILED:" not in text,
                                        "The code passes the visible tests and follows the task.",
                                        "The code fails a visible test: fix the failing case."),
            "decision": lambda m, p: "Final code:\n" + work.stated,
        }
    reasoned = "I checked the reasoning and every calculation.\n" + work.stated
    program = "```python\n" + work.examples_run() + "\n```\nThe program prints the answer.\n" + work.stated
    return {
        "analyst": lambda m, p: reasoned,
        "math_solver": lambda m, p: reasoned,
        "programmer": lambda m, p: program,
        "inspector": lambda m, p: reasoned,
        "decision": lambda m, p: "The agents agree.\n" + work.stated,
    }


TEAMS: dict[str, Callable[[Work], dict[str, Reply]]] = {
    "ag2": ag2, "smolagents": smolagents, "metagpt": metagpt, "owl": owl, "aflow": aflow, "agentprune": agentprune,
}
