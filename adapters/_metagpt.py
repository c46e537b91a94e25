"""MetaGPT (`metagpt==0.8.2`, its `lancedb==0.4.0` pin overridden) adapter: a Team of MetaGPT Roles.

| agent | MetaGPT role (profile) / action | steps | LLM calls |
|---|---|---|---|
| `user` | the Team's idea (UserRequirement) | step 0, `human` | none |
| `coder` | Engineer / WriteCode, watches UserRequirement and ReviewCode | `agent` | one per step |
| `tester` | QaEngineer / WriteTests, watches WriteCode | `agent` | one per step |
| `runner` | Executor / RunTests (no LLM): code + asserts run in the container | `tool` | none |
| `reviewer` | Reviewer / ReviewCode, watches RunTests; APPROVED ends the project | `agent` | one per step |

Steps are the messages published to the Team's Environment (`publish_message` is hooked). Each role
has its own LLM (`LLMConfig(base_url=<gateway>/run/<id>/agent/<role>/v1)`), non-streaming, usage taken
from the response (no tiktoken download), temperature 0. The final answer is the coder's last message.
The roles are custom (MetaGPT's own multi-agent tutorial pattern) rather than the software-company
ProductManager/Architect/Engineer/QaEngineer: those produce a whole repository through structured
ActionNode outputs, which a benchmark function-level task does not need.

On a tool-use task (BFCL multi-turn, `tool_use`) the Team is `planner` (PlanCalls: which calls), `caller`
(CallFunctions: MetaGPT's function-calling completion with the offered functions as tools) and `executor`
(RunCalls, no LLM: the calls run on the sandbox's tool server, one `tool` step each); each user turn is the Team's
idea, the roles keep their memory, and the caller's text answer without calls ends the turn.
"""

from __future__ import annotations

from typing import Any

from rootstep.adapters._images import METAGPT_IMAGE, WheelhouseBuilt
from rootstep.adapters.base import Adapter
from rootstep.benchmarks import function_summaries, reads_calls
from rootstep.prompts import render
from rootstep.model import Step, Task


class MetaGPTAdapter(WheelhouseBuilt, Adapter):
    name = "metagpt"
    package = "metagpt"
    version = "0.8.2"
    agents = ("user", "coder", "tester", "runner", "reviewer", "planner", "caller", "executor")
    answer_agents = ("coder",)
    step_kinds = {"user": ("human",), "coder": ("agent",), "tester": ("agent",), "runner": ("tool",),
                  "reviewer": ("agent",), "planner": ("agent",), "caller": ("agent",), "executor": ("tool",)}
    task_kinds = ("coding", "math")
    tool_use = True
    driver = "metagpt_driver.py"
    image = METAGPT_IMAGE

    def final_answer(self, task: Task, steps: list[Step], driver_answer: str | None) -> str | None:
        """The coder's last message; on a math task its program's output, which the runner prints after the
        tester's turn (it runs the code with the tests: `program_answer(runs_with=("tester",))`)."""
        from rootstep.benchmarks import program_answer

        return program_answer(task, driver_answer, steps, runs_with=("tester",))

    def episode_config(self, task: Task) -> dict[str, Any]:
        if reads_calls(task):  # BFCL: planner, caller (function calling), executor on the tool server
            return {"tools": "bfcl", "n_round_per_turn": 12, "temperature": 0,
                    "prompts": {"planner": render("metagpt_bfcl_planner.j2", functions=function_summaries(task)),
                                "caller": render("metagpt_bfcl_caller.j2"), "plan": render("metagpt_bfcl_plan.j2")}}
        # the templates keep {task}/{code}/{review}/{result} for the driver to fill in
        raw = {"task": "{task}", "code": "{code}", "review": "{review}", "result": "{result}"}
        return {
            "prompts": {
                "coder": render("metagpt_coder.j2", kind=task.kind, answer=self.answer_contract(task), **raw),
                "tester": render("metagpt_tester.j2", **raw),
                "reviewer": render("metagpt_reviewer.j2", **raw),
            },
            "n_round": 12,
            "temperature": 0,
            "code_timeout_s": 30,
        }

