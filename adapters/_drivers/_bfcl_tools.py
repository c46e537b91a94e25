"""The tools of a BFCL multi-turn episode, in the sandbox: BFCL's own API simulators behind the functions the task
offers (copied into the sandbox with the driver for BFCL tasks; standard library + the simulators' modules from
the `bfcl-eval` wheel + mpmath).

`ToolServer` holds the episode's simulator instances, loaded with the task's initial state as BFCL's checker
loads them. It runs only the functions offered so far (a held-back function of miss_func appears at its turn,
`start_turn`), checks the arguments against the function's signature before running it, and records every call
it ran with its turn, the agent step that asked for it, its BFCL call string (`call_string`: built from the
JSON arguments with `repr`, never from model text) and its result as BFCL renders it. A call of an unknown or
not-yet-offered function, or with arguments that do not fit, gets a clear tool error and is not run. The
simulators are deterministic (their random ids come from seeded generators), so a replay that makes the same
calls reaches the same state, and an intervention that changes a call changes the state from there on.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import re
import time
from typing import Any

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
STATELESS = {"MathAPI"}
MODULES = {
    "GorillaFileSystem": "gorilla_file_system", "MathAPI": "math_api", "MessageAPI": "message_api",
    "TwitterAPI": "posting_api", "TicketAPI": "ticket_api", "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking", "VehicleControlAPI": "vehicle_control",
}
"""API class -> its module in `bfcl_eval.eval_checker.multi_turn_eval.func_source_code` (BFCL's
`CLASS_FILE_PATH_MAPPING` for the multi-turn classes)."""
PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"


def call_string(name: str, arguments: dict[str, Any]) -> str:
    """A call as BFCL writes it, `name(key=value, ...)`, each value its Python literal (`repr` of the JSON value).

    Raises ValueError for a name or key that is not an identifier: BFCL's checker runs the string with `eval`."""
    for word in (name, *arguments):
        if not isinstance(word, str) or not _IDENTIFIER.fullmatch(word):
            raise ValueError(f"not a valid function or parameter name: {word!r}")
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"


def rendered(result: Any) -> str:
    """A result as BFCL's checker renders it (`execute_multi_turn_func_call`): a string as is, a dict as JSON
    (`str` when it does not serialise), anything else `str`."""
    if isinstance(result, str):
        return result
    if isinstance(result, dict):
        try:
            return json.dumps(result)
        except (TypeError, ValueError):
            return str(result)
    return str(result)


class ToolServer:
    """The API instances of one episode and the calls made on them."""

    def __init__(self, task: dict[str, Any]):
        meta = task["metadata"]
        self.offered: list[dict[str, Any]] = list(meta["functions"])
        self.held_back: dict[str, list[dict[str, Any]]] = dict(meta.get("held_back") or {})
        long_context = meta.get("variant") == "long_context"
        self.instances: dict[str, Any] = {}
        for name in meta["involved_classes"]:
            instance = getattr(importlib.import_module(f"{PACKAGE}.{MODULES[name]}"), name)()
            if name not in STATELESS:
                instance._load_scenario(copy.deepcopy((meta.get("initial_config") or {}).get(name, {})),
                                        long_context=long_context)
            self.instances[name] = instance
        self.turn = 0
        self.calls: list[dict[str, Any]] = []

    def start_turn(self, turn: int) -> list[dict[str, Any]]:
        """Enter user turn `turn`; the function documents that become available at it (miss_func), if any."""
        self.turn = turn
        new = self.held_back.pop(str(turn), [])
        self.offered += new
        return new

    def _method(self, name: str) -> Any:
        if name not in {doc["name"] for doc in self.offered}:
            return None
        for instance in self.instances.values():
            method = getattr(instance, name, None)
            if method is not None and inspect.ismethod(method) and not name.startswith("_"):
                return method
        return None

    def call(self, name: str, arguments: Any, step: int | None) -> tuple[str, dict[str, Any] | None]:
        """Run `name(**arguments)` if it is offered and the arguments fit: (what the agent is told, the call's
        record, or None when it was refused and not run)."""
        method = self._method(name) if isinstance(name, str) else None
        if method is None:
            available = ", ".join(doc["name"] for doc in self.offered)
            return f"Error: no function named {name!r} is available. Available functions: {available}", None
        if not isinstance(arguments, dict):
            return f"Error: the arguments of {name} must be a JSON object, not {type(arguments).__name__}", None
        try:
            call = call_string(name, arguments)
            inspect.signature(method).bind(**arguments)
        except (TypeError, ValueError) as exc:
            return f"Error: bad arguments for {name}: {exc}; its parameters: {inspect.signature(method)}", None
        try:
            result = rendered(method(**arguments))
        except Exception as exc:  # noqa: BLE001 - what BFCL's checker records for a call that raised
            result = f"Error during execution: {exc}"
        record = {"turn": self.turn, "step": step, "name": name, "arguments": arguments, "call": call,
                  "result": result}
        self.calls.append(record)
        return result, record

    def made(self, limit: int = 12) -> str:
        """The last `limit` calls run, each with what it returned (cut at 300 characters), one per line, for an agent
        told what was done so far."""
        lines = [f"- {r['call']} -> {r['result'][:300]}" for r in self.calls[-limit:]]
        return "\n".join(lines) or "(no function called yet)"


def openai_tools(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL function documents as OpenAI tools, typed as BFCL's own handlers type them (`GORILLA_TO_OPENAPI`:
    dict -> object, float -> number with format float, tuple -> array, any -> string)."""
    mapping = {"integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
               "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object",
               "tuple": "array", "any": "string"}

    def cast(properties: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for key, value in properties.items():
            value = dict(value)
            kind = value.get("type")
            if kind == "float":
                value["format"] = "float"
            value["type"] = mapping.get(kind, "string")
            if value["type"] in ("array", "object"):
                if "properties" in value:
                    value["properties"] = cast(value["properties"])
                elif isinstance(value.get("items"), dict):
                    items = dict(value["items"])
                    items["type"] = mapping.get(items.get("type"), "string")
                    if "properties" in items:
                        items["properties"] = cast(items["properties"])
                    value["items"] = items
            out[key] = value
        return out

    tools = []
    for doc in docs:
        parameters = dict(doc.get("parameters") or {})
        parameters["type"] = "object"
        parameters["properties"] = cast(parameters.get("properties") or {})
        tools.append({"type": "function", "function": {"name": doc["name"], "description": doc.get("description", ""),
                                                       "parameters": parameters}})
    return tools


def turns_to_run(episode: dict[str, Any]) -> list[tuple[int, str]]:
    """The episode's user turns with their index, up to its `until_turn` when it has one (a replay that only needs
    to show whether the turn a run failed at now passes: the later turns are not run)."""
    turns = list(enumerate(episode["task"]["metadata"]["turns"]))
    until = episode.get("until_turn")
    return turns if until is None else turns[:int(until) + 1]


TOOL_STEP_BASE = 1_000_000
"""A tool step's provisional index: `tool_index(asking index, j)` (the j-th call of that step), so that `in_order`
places it right after the agent step that asked for it."""
CALLS_PER_STEP = 1_000
"""The calls one agent step may ask for at most (far beyond any model's token limit; BFCL's longest turn has 35)."""


def tool_index(asked_index: int, j: int) -> int:
    """The provisional index of the `j`-th call asked for by the step at `asked_index` (unique while `j` <
    `CALLS_PER_STEP`; ValueError beyond, rather than two steps with one index)."""
    if not 0 <= j < CALLS_PER_STEP:
        raise ValueError(f"step {asked_index} asked for more than {CALLS_PER_STEP} tool calls")
    return TOOL_STEP_BASE + asked_index * CALLS_PER_STEP + j


def tool_step(agent: str, turn: int, result: str, name: Any, arguments: Any, record: dict[str, Any] | None,
              **asker: int) -> dict[str, Any]:
    """The `tool` step of one call an agent step asked for: what the agent was told, the call as asked, whether the
    tool server ran it (`record`, None when it was refused) with its call string, and the asking step (`asker`:
    `asked_by`, its position, or `asked_by_index`, its provisional index for `in_order`)."""
    return {"agent": agent, "kind": "tool", "role": "tool", "content": result,
            "tool_calls": [{"name": name, "arguments": arguments}],
            "metadata": {"turn": turn, **asker, "executed": record is not None,
                         "call": None if record is None else record["call"]}}


def in_order(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Steps by their start (a step's index is fixed when its model call starts), each tool step right after the
    agent step that asked for it; `metadata.asked_by_index` becomes `asked_by`, the asking step's position."""
    ordered = sorted(steps, key=lambda s: (s["metadata"]["asked_by_index"], 1, s["index"]) if s["kind"] == "tool"
                     else (s["index"], 0, 0))
    position = {s["index"]: i for i, s in enumerate(ordered)}
    out = []
    for s in ordered:
        meta = dict(s.get("metadata") or {})
        if "asked_by_index" in meta:
            meta["asked_by"] = position.get(meta.pop("asked_by_index"))
        out.append({**s, "metadata": meta})
    return out


def asked_calls(message: Any) -> list[dict[str, Any]]:
    """The tool calls of an OpenAI chat-completion `message`, as plain OpenAI-form dicts (ids kept: the results
    quote them)."""
    return [{"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in message.tool_calls or []]


def name_and_arguments(call: dict[str, Any]) -> tuple[Any, Any]:
    """The function name and the arguments of an OpenAI-form tool call, its JSON arguments decoded (arguments that
    do not decode are given as they are, for `ToolServer.call` to refuse)."""
    name, raw = call["function"]["name"], call["function"]["arguments"]
    try:
        return name, json.loads(raw or "{}")
    except json.JSONDecodeError:
        return name, raw


def calling_loop(recorder: Any, server: ToolServer, agent: str, role: str, messages: list[dict[str, Any]], turn: int,
                 max_calls: int, **metadata: Any) -> None:
    """An agent with the offered functions as OpenAI tools, on a driver's `StepRecorder` (`recorder`: its `client`,
    `request`, `add`, `add_step`): each of its calls is an `agent` step holding the calls it asked for, each asked
    call a `tool` step of `agent` right after it (run on `server`, or refused), its result the next message; until it
    answers without a call or has been called `max_calls` times. `metadata` goes on its agent steps (with `turn`)."""
    for _ in range(max_calls):
        started = time.time()
        reply = recorder.client(agent).chat.completions.create(
            **recorder.request(messages), tools=openai_tools(server.offered), tool_choice="auto")
        message = reply.choices[0].message
        calls = asked_calls(message)
        asker = recorder.add(agent, "agent", role, message.content or "", started, tool_calls=calls,
                             metadata={"turn": turn, **metadata})
        if not calls:
            return
        messages.append({"role": "assistant", "content": message.content or "", "tool_calls": calls})
        for call in calls:
            name, arguments = name_and_arguments(call)
            told, record = server.call(name, arguments, asker["index"])
            recorder.add_step(tool_step(agent, turn, told, name, arguments, record, asked_by=asker["index"]), time.time())
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": told})
