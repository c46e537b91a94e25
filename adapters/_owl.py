"""OWL-Workforce (`camel-ai==0.2.90`) adapter: camel's `Workforce` society, run for real in its own image.

| agent | camel component | steps (all `agent` but the task) | LLM calls |
|---|---|---|---|
| `user` | the main `Task` (id pinned to `task`) | step 0, `human` | none |
| `planner` | the task agent: decomposition, quality checks, failure analysis | one per call | one per step |
| `coordinator` | the coordinator agent: assigns subtasks (and dependencies) | one per call | one per step |
| `coder` | `SingleAgentWorker` with `execute_code` (camel's subprocess interpreter) | one per call | one per step |
| `reviewer` | `SingleAgentWorker`, no tools | one per call | one per step |
| `helper` | workers camel creates itself when assignments stay invalid | one per call | one per step |

On a tool-use task (BFCL multi-turn, `tool_use`) the team is OWL's role-playing pair: `instructor` (OWL's user
role, an LLM) gives one instruction at a time for each user turn and says TASK_DONE when the turn is done;
`assistant` carries each out with the offered functions as camel `FunctionTool`s in camel's tool loop; every call
it asked for is a `tool` step (`tools`) after the step that asked, executed by the sandbox's tool server or refused.

A worker call that asks for tools carries them in `tool_calls`; the tools' results (code run inside the
container) become that step's observation. Every answered LLM call is one step, indexed in call order
(a call that fails leaves no step and is kept in `unlinked_calls` with its error). Calls are serialised:
workers take turns in the order the workforce posted their tasks, and only while the workforce waits,
so replays take the same path. Workforce callbacks add the lifecycle events (task created, assigned,
completed, failed ...) to the metadata of the latest step when they fire. The final answer is the main
task's result as camel composes it (each subtask's result, in order). Recovery strategies are `retry`
and `replan` (camel's quality check still runs after every subtask); automatic summarisation is off.

The image: camel-ai 0.2.90 requires `mcp>=1.3.0`, but mcp 2.3.0 has no `mcp.server.FastMCP`, which camel
imports when its toolkits load, so mcp is pinned to 1.30.0; `google-search-results` (a required, pure
Python dependency) exists only as a source distribution, so the image is a `WheelhouseImageSpec` (the
closure installed with `--no-deps`, that one package built into a wheel on the host).
"""

from __future__ import annotations

from typing import Any

from rootstep.adapters._images import WheelhouseBuilt, WheelhouseImageSpec
from rootstep.sandboxes import AGENT_COMPUTE
from rootstep.adapters.base import Adapter
from rootstep.benchmarks import function_summaries, reads_calls
from rootstep.prompts import render
from rootstep.model import Task

OWL_IMAGE = WheelhouseImageSpec(
    name="fw-owl",
    # `pip install camel-ai==0.2.90 "mcp<2"` for Python 3.11, no extras: the complete closure, every pin
    requirements=(
        "camel-ai==0.2.90",
        "annotated-types==0.8.0", "anyio==4.16.0", "astor==0.8.1", "attrs==26.1.0", "certifi==2026.10.18",
        "cffi==2.1.1", "charset-normalizer==3.5.2", "click==8.5.1", "colorama==0.4.6", "cryptography==50.0.2",
        "docstring_parser==0.17.0", "google_search_results==2.4.2", "h11==0.16.0", "httpcore==1.0.9",
        "httpcore2==2.16.2", "httpx==0.28.1", "httpx-sse==0.4.3", "httpx2==2.16.2", "idna==3.20",
        "jiter==0.19.0", "jsonschema==4.26.0", "jsonschema-specifications==2025.9.1", "mcp==1.30.0",
        "openai==3.54.0", "pillow==13.0.0", "psutil==5.9.8", "pycparser==3.12", "pydantic==2.12.0",
        "pydantic-settings==2.16.3", "pydantic_core==2.41.1", "PyJWT==2.15.1", "python-dotenv==1.2.4",
        "python-multipart==0.0.34", "PyYAML==6.0.3", "referencing==0.37.0", "regex==2026.11.15",
        "requests==2.34.2", "rpds-py==2026.9.1", "sniffio==1.3.1", "sse-starlette==3.7.0", "starlette==1.10.0",
        "tiktoken==0.12.0", "truststore==0.10.5", "typing-inspection==0.4.5", "typing_extensions==4.16.0",
        "urllib3==2.8.0", "uvicorn==0.54.0", "websockets==15.0.1",
        *AGENT_COMPUTE,  # what the agents' code imports
    ),
    from_source=("google_search_results==2.4.2",),
)


class OWLAdapter(WheelhouseBuilt, Adapter):
    name = "owl"
    package = "camel-ai"
    version = "0.2.90"
    agents = ("user", "planner", "coordinator", "coder", "reviewer", "helper", "instructor", "assistant", "tools")
    step_kinds = {"user": ("human",), "planner": ("agent",), "coordinator": ("agent",), "coder": ("agent",),
                  "reviewer": ("agent",), "helper": ("agent",), "instructor": ("agent",), "assistant": ("agent",),
                  "tools": ("tool",)}
    task_kinds = ("coding", "math")
    tool_use = True
    driver = "owl_driver.py"
    image = OWL_IMAGE

    def episode_config(self, task: Task) -> dict[str, Any]:
        if reads_calls(task):  # BFCL: OWL's role-playing pair, the assistant with the functions as FunctionTools
            return {"tools": "bfcl", "rounds_per_turn": 3, "assistant_max_iterations": 6, "temperature": 0,
                    "token_limit": 1_000_000,
                    "prompts": {"instructor": render("owl_bfcl_instructor.j2", functions=function_summaries(task)),
                                "assistant": render("owl_bfcl_assistant.j2"),
                                "turns": [render("owl_bfcl_turn.j2", request=text) for text in task.metadata["turns"]]}}
        return {
            "prompts": {
                "workforce": render("owl_workforce.j2", kind=task.kind),
                "coder": render("owl_coder.j2", kind=task.kind, answer=self.answer_contract(task)),
                "coder_description": render("owl_coder_description.j2", kind=task.kind),
                "reviewer": render("owl_reviewer.j2", kind=task.kind, answer=self.answer_contract(task)),
                "reviewer_description": render("owl_reviewer_description.j2", kind=task.kind),
            },
            "task_id": "task",
            "temperature": 0,
            "recovery_strategies": ["retry", "replan"],
            "max_retries": 3,
            "worker_max_iterations": 6,
            "token_limit": 1_000_000,
            "code_timeout_s": 30,
            "task_timeout_s": 300,
        }

