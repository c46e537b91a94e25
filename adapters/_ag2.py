"""AG2 / AutoGen (`autogen==0.14.1`, the classic GroupChat API) adapter.

The episode (`_drivers/ag2_driver.py`) is a GroupChat of three agents:

| agent | AG2 class | steps | LLM calls |
|---|---|---|---|
| `executor` | UserProxyAgent, runs code blocks in the container | step 0 `human` (states the task), then `tool` (execution output) | none |
| `coder` | AssistantAgent | `agent` | one per step |
| `critic` | AssistantAgent, ends the chat with TERMINATE | `agent` | one per step |

On a tool-use task (BFCL multi-turn, `tool_use`) the team is the executor (states each user turn, runs the calls
as `tool` steps), a `planner` (no tools: which calls, in what order) and a `caller` (the offered functions as
OpenAI tools in its llm_config, AG2's function map on the executor), one group chat over all the turns.

Speaker order is a fixed function (task -> coder -> executor -> critic -> coder -> ...), never an LLM
speaker selection, so there are no calls without a step and a replay follows the recorded path.
`cache_seed=None` (AG2's disk cache would answer calls without reaching the gateway), temperature 0.
The final answer is the coder's last message, read through `team_answer`: small models end the chat with
an echo (prose about the work, or code that never ran), so a math answer without a marked answer is read
from the program the executor ran, and a coding answer without code from the coder's last code.
"""

from __future__ import annotations

from typing import Any

from rootstep.adapters._images import AG2_IMAGE
from rootstep.adapters.base import Adapter
from rootstep.benchmarks import function_summaries, reads_calls
from rootstep.prompts import render
from rootstep.model import Step, Task


class AG2Adapter(Adapter):
    name = "ag2"
    package = "autogen"
    version = "0.14.1"
    agents = ("executor", "coder", "critic", "planner", "caller")
    answer_agents = ("coder",)
    step_kinds = {"executor": ("human", "tool"), "coder": ("agent",), "critic": ("agent",), "planner": ("agent",),
                  "caller": ("agent",)}
    task_kinds = ("coding", "math")
    tool_use = True
    driver = "ag2_driver.py"
    image = AG2_IMAGE

    def final_answer(self, task: Task, steps: list[Step], driver_answer: str | None) -> str | None:
        from rootstep.benchmarks import team_answer

        return team_answer(task, driver_answer, steps, self.answer_agents)

    def episode_config(self, task: Task) -> dict[str, Any]:
        if reads_calls(task):
            return {"tools": "bfcl", "max_round_per_turn": 12, "temperature": 0,
                    "prompts": {"planner": render("ag2_bfcl_planner.j2", functions=function_summaries(task)),
                                "caller": render("ag2_bfcl_caller.j2")}}
        return {
            "prompts": {
                "coder": render("ag2_coder.j2", kind=task.kind, answer=self.answer_contract(task)),
                "critic": render("ag2_critic.j2", kind=task.kind),
                "executor_no_code": render("ag2_executor_no_code.j2"),
            },
            "max_round": 12,
            "temperature": 0,
            "code_timeout_s": 30,
        }
