"""AFlow (Zhang et al., "AFlow: Automating Agentic Workflow Generation", ICLR 2025) adapter.

AFlow is not on PyPI (it lives in MetaGPT's repository, not in the 0.8.2 release), so its operators and
the shape of its published workflows are reimplemented here: an operator is an LLM call with a fixed
prompt and a parsed, structured answer (XML fields or a code block), and a workflow is a fixed graph of
operators per task kind. The episode (`_drivers/aflow_driver.py`) needs only the standard library and
the `openai` client.

| agent | operator | steps | LLM calls |
|---|---|---|---|
| `user` | the task | step 0, `human` | none |
| `custom` | Custom (CustomCodeGenerate): one candidate program per call | `agent` | one per step |
| `answer_generate` | AnswerGenerate: `<thought>` + `<answer>` per call | `agent` | one per step |
| `programmer` | Programmer: writes `solve()` (`agent`), runs it in the container (`tool`), retries with the error | `agent`, `tool` | one per `agent` step |
| `sc_ensemble` | ScEnsemble: picks the most consistent candidate by letter | `agent` | one |
| `test` | Test: runs the task's visible tests in the container (`tool`), asks for a fix on failure (`agent`) | `tool`, `agent` | one per `agent` step |
| `caller` | tool-use tasks: calls the offered functions following the chosen plan (`agent`), each call run on the tool server (`tool`) | `agent`, `tool` | one per `agent` step |

Workflows (fixed graph, fixed candidate count, temperature 0; calls are made one at a time):
- coding: custom x N -> sc_ensemble -> test (run visible tests; on failure reflect and fix; up to
  `test_loops` fixes, then a last run). The answer is the tested solution, in a ```python fence.
- math: answer_generate x N -> programmer (code + execution, up to `programmer_attempts`) ->
  sc_ensemble over the N answers and the program's result. The answer is the chosen `<answer>`.
- qa: answer_generate x N -> sc_ensemble. The problem shows the task's context paragraphs when it has
  them (as AFlow's HotpotQA set-up does). The answer is the chosen `<answer>`.
- tool_use (BFCL multi-turn, `tool_use`), per user turn (a `human` step): custom x N candidate plans of calls
  (`TOOL_CANDIDATES` unless `candidates` is set) -> sc_ensemble -> `caller`, a function-calling operator with the
  offered functions as OpenAI tools: each call it asks for is a `tool` step of `caller` after its step, run on the
  sandbox's tool server, until it answers in text (`max_calls_per_turn` of its calls at most).

Visible tests are only what the task's prompt itself shows: its `assert` lines (MBPP, MBPP+) and its
doctest examples (HumanEval), never the benchmark's hidden tests.
"""

from __future__ import annotations

from typing import Any

from rootstep.adapters._images import OPENAI2_CLOSURE, OPENAI2_VERSION
from rootstep.benchmarks import function_summaries, reads_calls, visible_tests
from rootstep.adapters.base import Adapter
from rootstep.prompts import render
from rootstep.sandboxes import AGENT_COMPUTE, ImageSpec
from rootstep.model import Task

OPENAI_VERSION = OPENAI2_VERSION

AFLOW_IMAGE = ImageSpec(name="fw-aflow", requirements=(*OPENAI2_CLOSURE, *AGENT_COMPUTE))

DEFAULTS: dict[str, Any] = {
    "candidates": 3,            # generations per workflow (custom / answer_generate), each with its own approach
    "test_loops": 3,            # Test: fixes asked for at most; the tests run once more after the last fix
    "programmer_attempts": 3,   # Programmer: code generations at most (each retry sees the previous error)
    "temperature": 0,
    "code_timeout_s": 30,       # one execution of the Programmer's code or of the visible tests
    "per_test_timeout_s": 10,
    "llm_timeout_s": 600,
}
TOOL_CANDIDATES = 2
"""Candidate plans per user turn on a tool-use task unless the `candidates` option says otherwise: a BFCL run has
1-8 turns, each its own candidates, and the local models take a minute or more per call there."""


class AFlowAdapter(Adapter):
    name = "aflow"
    package = "rootstep-aflow (AFlow operators, reimplemented) on openai"
    version = OPENAI_VERSION
    agents = ("user", "custom", "answer_generate", "programmer", "sc_ensemble", "test", "caller")
    answer_agents = ("sc_ensemble", "test")
    independent_agents = ("custom", "answer_generate")
    step_kinds = {
        "user": ("human",),
        "custom": ("agent",),
        "answer_generate": ("agent",),
        "programmer": ("agent", "tool"),
        "sc_ensemble": ("agent",),
        "test": ("tool", "agent"),
        "caller": ("agent", "tool"),
    }
    task_kinds = ("coding", "math", "qa")
    tool_use = True
    driver = "aflow_driver.py"
    image = AFLOW_IMAGE

    def episode_config(self, task: Task) -> dict[str, Any]:
        options = {**DEFAULTS, **self.options}
        if reads_calls(task) and "candidates" not in self.options:
            options["candidates"] = TOOL_CANDIDATES
        n = int(options["candidates"])
        if n < 1:
            raise ValueError(f"aflow option candidates={n}: at least one candidate is needed")
        kind = task.kind
        if reads_calls(task):  # BFCL: plans x n -> sc_ensemble -> caller with the offered functions as tools
            functions = function_summaries(task)
            return {**options, "workflow": "tool_use", "tools": "bfcl",
                    "max_calls_per_turn": int(options.get("max_calls_per_turn", 6)), "problem": "",
                    "prompts": {"sc_ensemble": render("aflow_sc_ensemble.j2", kind=kind),
                                "problem": render("aflow_bfcl_problem.j2"), "caller": render("aflow_bfcl_caller.j2"),
                                "custom": [render("aflow_bfcl_custom.j2", functions=functions, candidate=i, candidates=n)
                                           for i in range(n)]}}
        paragraphs = task.metadata.get("paragraphs") if kind == "qa" else None
        problem = render("aflow_problem.j2", kind=kind, question=task.prompt, paragraphs=paragraphs or []).rstrip()
        prompts: dict[str, Any] = {"sc_ensemble": render("aflow_sc_ensemble.j2", kind=kind)}
        config: dict[str, Any] = {"workflow": kind, "problem": problem}
        if kind == "coding":
            prompts["custom"] = [render("aflow_custom.j2", candidate=i, candidates=n) for i in range(n)]
            prompts["test"] = render("aflow_test.j2")
            config |= {
                "entry_point": task.metadata.get("entry_point"),
                "prefix": task.metadata.get("prefix"),
                "test_setup": task.metadata.get("test_setup") or "",
                "visible_tests": visible_tests(task),
            }
        else:
            prompts["answer_generate"] = [
                render("aflow_answer_generate.j2", kind=kind, candidate=i, candidates=n, answer=self.answer_contract(task)) for i in range(n)
            ]
            if kind == "math":
                prompts["programmer"] = render("aflow_programmer.j2")
                prompts["programmer_feedback"] = render("aflow_programmer_feedback.j2")
        return {**options, **config, "prompts": prompts}
