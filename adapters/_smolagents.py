"""smolagents (`smolagents==1.26.0`) adapter: a manager CodeAgent with a managed coder CodeAgent.

| agent | smolagents class | steps | LLM calls |
|---|---|---|---|
| `user` | - | step 0, `human`: the task | none |
| `manager` | CodeAgent with `managed_agents=[coder]` | `agent`: thought + code; the observation is its execution log | one per step |
| `coder` | CodeAgent (managed) | `agent`: thought + code, run by its local Python executor in the container | one per step |

Steps come from `step_callbacks` on both agents, ordered by start time (a step's index is fixed when
its model call starts). Code runs in smolagents' local Python executor, inside the sandbox container.
When an agent reaches `max_steps`, smolagents makes one more call for a final answer; that call
produces an `agent` step as well. The final answer is the manager's.

On a tool-use task (BFCL multi-turn, `tool_use`) both are `ToolCallingAgent`s: the manager delegates each user turn
to the managed `caller`, whose tools are the offered functions; every call they ran is a `tool` step (`tools`).
"""

from __future__ import annotations

from typing import Any

from rootstep.adapters._images import SMOLAGENTS_IMAGE
from rootstep.adapters.base import Adapter
from rootstep.benchmarks import reads_calls
from rootstep.prompts import render
from rootstep.model import Task

# smolagents' executor refuses imports outside its base list (collections, itertools, math, re, random, ...)
# and these: the standard-library modules the coding benchmarks' own prompts and reference solutions import
# (HumanEval's `from typing import List`, MBPP's heapq, bisect, ...) and exact arithmetic for math tasks.
# The executor runs inside the sandbox container.
AUTHORIZED_IMPORTS = ("array", "bisect", "cmath", "collections", "colorsys", "copy", "datetime", "decimal", "fractions",
                      "functools", "hashlib", "heapq", "itertools", "math", "operator", "re", "statistics", "string",
                      "typing", "numpy", "sympy")


class SmolagentsAdapter(Adapter):
    name = "smolagents"
    package = "smolagents"
    version = "1.26.0"
    agents = ("user", "manager", "coder", "caller", "tools")
    answer_agents = ("manager",)
    step_kinds = {"user": ("human",), "manager": ("agent",), "coder": ("agent",), "caller": ("agent",),
                  "tools": ("tool",)}
    task_kinds = ("coding", "math")
    tool_use = True
    driver = "smolagents_driver.py"
    image = SMOLAGENTS_IMAGE

    def episode_config(self, task: Task) -> dict[str, Any]:
        if reads_calls(task):  # BFCL: a ToolCallingAgent manager over a ToolCallingAgent caller with the functions
            return {"tools": "bfcl", "manager_max_steps": 4, "caller_max_steps": 6, "temperature": 0,
                    "prompts": {"manager": render("smolagents_bfcl_manager.j2"), "caller": render("smolagents_bfcl_caller.j2"),
                                "caller_description": render("smolagents_bfcl_caller_description.j2")}}
        return {
            "prompts": {
                "manager": render("smolagents_manager.j2"),
                "coder": render("smolagents_coder.j2", kind=task.kind, answer=self.answer_contract(task)),
                "coder_description": render("smolagents_coder_description.j2"),
            },
            "manager_max_steps": 4,
            "coder_max_steps": 4,
            "temperature": 0,
            "authorized_imports": list(AUTHORIZED_IMPORTS),
            # the manager's code waits for its managed coder (LLM calls): only the episode's own timeout
            # bounds it; the coder's code is bounded per execution
            "manager_code_timeout_s": None,
            "coder_code_timeout_s": 30,
        }
