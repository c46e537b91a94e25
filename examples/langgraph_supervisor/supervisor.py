"""A LangGraph supervisor with two workers (solver, checker) for GSM8K-style word problems.

Run by rootstep's command adapter (see system.toml): the task comes from $ROOTSTEP_TASK_FILE, each
agent talks to its own gateway URL ($ROOTSTEP_AGENT_URL_SUPERVISOR / _SOLVER / _CHECKER), and the final
answer is written to $ROOTSTEP_ANSWER_FILE.

Determinism: temperature 0, no retries, no streaming, no tracing, no ids or clocks in any prompt; the
order and content of the requests are a pure function of the task and the models' replies.
"""

from __future__ import annotations

import os

# Tracing off before langchain is imported: nothing may leave the container but gateway calls.
os.environ["LANGCHAIN_TRACING_V2"] = "false"
os.environ["LANGSMITH_TRACING"] = "false"
os.environ.pop("LANGCHAIN_API_KEY", None)
os.environ.pop("LANGSMITH_API_KEY", None)

import ast
import json
import operator
import re
import sys
from typing import Literal, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph

MAX_SUPERVISOR_TURNS = 6
"""Hard cap: after this many supervisor decisions the graph finishes whatever the model says."""
MAX_TOOL_ROUNDS = 4
"""Hard cap on the checker's calculator round trips."""

Route = Literal["solver", "checker", "FINISH"]


# --------------------------------------------------------------------------------------- the tool

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 10**6):
            raise ValueError("exponent too large")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported syntax: {ast.dump(node)[:60]}")


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression safely (numbers, + - * / // % ** and parentheses)."""
    text = expression.replace(",", "").replace("×", "*").replace("÷", "/").replace("^", "**").replace("$", "")
    try:
        value = _evaluate(ast.parse(text.strip(), mode="eval"))
    except ZeroDivisionError:
        return "error: division by zero"
    except (SyntaxError, ValueError, TypeError, OverflowError) as exc:
        return f"error: {exc}"
    if isinstance(value, float):
        value = round(value, 10)
        if value.is_integer():
            value = int(value)
    return str(value)


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as `(16 - 3 - 4) * 2` and return the result."""
    return calculate(expression)


# --------------------------------------------------------------------------------------- the task

def load_task() -> dict:
    with open(os.environ["ROOTSTEP_TASK_FILE"], encoding="utf-8") as handle:
        return json.load(handle)


TASK = load_task()
ANSWER_INSTRUCTION = TASK.get("answer_instruction") or (
    "End your message with a line `Answer: <number>`: the number alone, no units and no words."
)
ANSWER_LINE = re.compile(r"^\W*answer\s*:", re.IGNORECASE | re.MULTILINE)


def model_for(agent: str) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=os.environ[f"ROOTSTEP_AGENT_URL_{agent.upper()}"],
        api_key=os.environ.get("OPENAI_API_KEY", "rootstep"),
        model=os.environ.get("ROOTSTEP_MODEL", "rootstep"),
        temperature=0,
        max_retries=0,
        timeout=240,
    )


SUPERVISOR_LLM = model_for("supervisor")
SOLVER_LLM = model_for("solver")
CHECKER_LLM = model_for("checker").bind_tools([calculator])


# --------------------------------------------------------------------------------------- prompts

SUPERVISOR_SYSTEM = (
    "You are the supervisor of a small math team. You do not solve problems yourself; you decide who "
    "works next.\n"
    "- solver: solves the word problem step by step and states a final answer.\n"
    "- checker: re-checks the solver's arithmetic with a calculator and corrects it if needed.\n"
    "Usual order: solver first, then checker; send work back to the solver only if the checker found a "
    "problem it could not fix. Finish once a checked final answer exists.\n"
    "Reply with exactly one line: `NEXT: solver`, `NEXT: checker` or `FINISH`."
)

SOLVER_SYSTEM = (
    "You are the solver of a math team. Solve the grade-school math word problem step by step, briefly, "
    "showing each calculation. If the checker reported a mistake, fix it.\n" + ANSWER_INSTRUCTION
)

CHECKER_SYSTEM = (
    "You are the checker of a math team. Re-check the solver's reasoning and every calculation. Use the "
    "`calculator` tool to verify arithmetic. If the solution is right, confirm it; if it is wrong, give "
    "the corrected solution.\n" + ANSWER_INSTRUCTION
)


class State(TypedDict):
    work: list[tuple[str, str]]
    """(worker, text) of every worker turn, in order."""
    next: str
    turns: int


def transcript(work: list[tuple[str, str]]) -> str:
    if not work:
        return "(no work yet)"
    return "\n\n".join(f"[{who}]\n{text.strip()}" for who, text in work)


def has_answer(text: str) -> bool:
    return bool(ANSWER_LINE.search(text or ""))


def text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return content or ""


# --------------------------------------------------------------------------------------- routing

_NEXT = re.compile(r"NEXT\s*[:\-]?\s*\**\s*(solver|checker)\b", re.IGNORECASE)
_FINISH = re.compile(r"\bFINISH\b", re.IGNORECASE)


def default_route(work: list[tuple[str, str]]) -> Route:
    """What happens when the supervisor says nothing usable: solve, then check, then finish."""
    workers = [who for who, _ in work]
    if "solver" not in workers:
        return "solver"
    if "checker" not in workers or workers[-1] == "solver":
        return "checker"
    return "FINISH"


def parse_route(reply: str, work: list[tuple[str, str]]) -> Route:
    match = _NEXT.search(reply or "")
    if match:
        return match.group(1).lower()  # type: ignore[return-value]
    if _FINISH.search(reply or ""):
        # Finishing without any answer is never sane: fall back to the default order.
        return "FINISH" if any(has_answer(text) for _, text in work) else default_route(work)
    return default_route(work)


# --------------------------------------------------------------------------------------- nodes

def supervisor(state: State) -> dict:
    turns = state["turns"] + 1
    if turns > MAX_SUPERVISOR_TURNS:
        return {"next": "FINISH", "turns": turns}
    messages = [
        SystemMessage(SUPERVISOR_SYSTEM),
        HumanMessage(f"Problem:\n{TASK['prompt']}\n\nWork so far:\n{transcript(state['work'])}\n\nWho works next?"),
    ]
    reply = text_of(SUPERVISOR_LLM.invoke(messages))
    return {"next": parse_route(reply, state["work"]), "turns": turns}


def solver(state: State) -> dict:
    prompt = f"Problem:\n{TASK['prompt']}"
    if state["work"]:
        prompt += f"\n\nWork so far:\n{transcript(state['work'])}"
    reply = text_of(SOLVER_LLM.invoke([SystemMessage(SOLVER_SYSTEM), HumanMessage(prompt)]))
    return {"work": [*state["work"], ("solver", reply)]}


def checker(state: State) -> dict:
    messages: list[BaseMessage] = [
        SystemMessage(CHECKER_SYSTEM),
        HumanMessage(f"Problem:\n{TASK['prompt']}\n\nWork so far:\n{transcript(state['work'])}\n\nCheck the solver's work."),
    ]
    reply: AIMessage = CHECKER_LLM.invoke(messages)
    rounds = 0
    while reply.tool_calls and rounds < MAX_TOOL_ROUNDS:
        rounds += 1
        messages.append(reply)
        for call in reply.tool_calls:
            if call["name"] == "calculator":
                result = calculate(str((call.get("args") or {}).get("expression", "")))
            else:
                result = f"error: unknown tool {call['name']!r}; the only tool is `calculator`"
            messages.append(ToolMessage(content=result, tool_call_id=call["id"], name=call["name"]))
        reply = CHECKER_LLM.invoke(messages)
    return {"work": [*state["work"], ("checker", text_of(reply))]}


def route(state: State) -> str:
    return END if state["next"] == "FINISH" else state["next"]


def build_graph():
    graph = StateGraph(State)
    graph.add_node("supervisor", supervisor)
    graph.add_node("solver", solver)
    graph.add_node("checker", checker)
    graph.add_edge(START, "supervisor")
    graph.add_conditional_edges("supervisor", route, {"solver": "solver", "checker": "checker", END: END})
    graph.add_edge("solver", "supervisor")
    graph.add_edge("checker", "supervisor")
    return graph.compile()


def final_answer(work: list[tuple[str, str]]) -> str:
    """The last worker message with an `Answer:` line (the checker's when it came last), else the last one."""
    for _, text in reversed(work):
        if has_answer(text):
            return text.strip()
    return work[-1][1].strip() if work else ""


def main() -> int:
    state = build_graph().invoke(
        {"work": [], "next": "", "turns": 0},
        config={"recursion_limit": 4 * MAX_SUPERVISOR_TURNS + 4},
    )
    answer = final_answer(state["work"])
    for who, text in state["work"]:
        print(f"--- {who}\n{text.strip()}")
    answer_file = os.environ.get("ROOTSTEP_ANSWER_FILE")
    if answer_file:
        with open(answer_file, "w", encoding="utf-8") as handle:
            handle.write(answer + "\n")
    print(f"--- final\n{answer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
