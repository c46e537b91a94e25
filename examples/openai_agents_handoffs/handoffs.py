"""An OpenAI Agents SDK handoff chain for GSM8K-style word problems: triage -> solver -> reviewer.

Run by rootstep's command adapter (see system.toml): the task comes from $ROOTSTEP_TASK_FILE and every
agent shares one client on $OPENAI_BASE_URL, so the gateway tells the agents apart by the first sentence
of their instructions ("You are the triage agent." ...). Handoffs are the SDK's own `transfer_to_<agent>`
tool calls. The final answer is the last non-empty line of stdout.

Determinism: temperature 0, no retries (client or runner), no streaming, tracing disabled, no ids or
clocks in any prompt.
"""

from __future__ import annotations

import os

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

import asyncio
import json
import re
import sys

from agents import (
    Agent,
    AgentsException,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    set_tracing_disabled,
)
from agents.items import MessageOutputItem, ItemHelpers
from openai import AsyncOpenAI

set_tracing_disabled(True)

MAX_TURNS = 8
ANSWER_LINE = re.compile(r"^\W*answer\s*:", re.IGNORECASE)


def load_task() -> dict:
    with open(os.environ["ROOTSTEP_TASK_FILE"], encoding="utf-8") as handle:
        return json.load(handle)


def build_agents(answer_instruction: str) -> Agent:
    client = AsyncOpenAI(
        base_url=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ.get("OPENAI_API_KEY", "rootstep"),
        max_retries=0,
        timeout=240,
    )
    model = OpenAIChatCompletionsModel(model=os.environ.get("ROOTSTEP_MODEL", "rootstep"), openai_client=client)
    settings = ModelSettings(temperature=0)

    reviewer = Agent(
        name="reviewer",
        handoff_description="Reviews a worked solution and gives the final answer.",
        instructions=(
            "You are the reviewer agent. Check the solver's solution above step by step: the reading of the "
            "problem and every calculation. If it is right, confirm it; if it is wrong, correct it. Give the "
            "final answer.\n" + answer_instruction
        ),
        model=model,
        model_settings=settings,
    )
    solver = Agent(
        name="solver",
        handoff_description="Solves a math word problem step by step.",
        instructions=(
            "You are the solver agent. Solve the grade-school math word problem step by step, briefly, "
            "showing each calculation and your result. Then hand off to the reviewer with the "
            "`transfer_to_reviewer` tool so it can check your work."
        ),
        model=model,
        model_settings=settings,
        handoffs=[reviewer],
    )
    triage = Agent(
        name="triage",
        instructions=(
            "You are the triage agent. You receive a task from the user. Do not solve it yourself: hand a "
            "math word problem to the solver with the `transfer_to_solver` tool."
        ),
        model=model,
        model_settings=settings,
        handoffs=[solver],
    )
    return triage


def final_lines(text: str) -> list[str]:
    """`text` as printed: its lines, and the last `Answer:` line again at the end when something follows it."""
    lines = [line.rstrip() for line in (text or "").strip().splitlines()]
    answers = [line for line in lines if ANSWER_LINE.match(line)]
    last = next((line for line in reversed(lines) if line.strip()), "")
    if answers and last != answers[-1]:
        lines.append(answers[-1].strip())
    return lines


def partial_output(exc: AgentsException) -> str:
    """The last assistant text of a run that stopped early (max turns, model misbehaviour)."""
    data = exc.run_data
    if data is None:
        return ""
    for item in reversed(data.new_items):
        if isinstance(item, MessageOutputItem):
            text = ItemHelpers.text_message_output(item)
            if text.strip():
                return text
    return ""


async def main() -> int:
    task = load_task()
    instruction = task.get("answer_instruction") or (
        "End your message with a line `Answer: <number>`: the number alone, no units and no words."
    )
    triage = build_agents(instruction)
    try:
        result = await Runner.run(triage, task["prompt"], max_turns=MAX_TURNS)
        output = result.final_output if isinstance(result.final_output, str) else str(result.final_output)
        print(f"--- last agent: {result.last_agent.name}", flush=True)
    except AgentsException as exc:
        print(f"--- run stopped early: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        output = partial_output(exc)
        if not output:
            return 1
    print("--- final output", flush=True)
    for line in final_lines(output):
        print(line)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
