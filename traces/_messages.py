"""Reading an LLM message out of whatever shape a tool stored it in: text, tool calls, and whether it was read.

Shapes read (each as the tools write them):

* a plain string; an OpenAI chat message `{role, content, tool_calls: [{id, function: {name, arguments}}]}`;
  a ChatCompletion `{choices: [{message}]}`;
* LangChain messages: `{role|type, content, tool_calls: [{name, args, id}], additional_kwargs: {tool_calls}}`,
  their serialised forms `{"lc": 1, "kwargs": {...}}` and `{"type": "ai", "data": {...}}`, an `LLMResult`
  `{generations: [[{message, text}]]}`, a state `{messages: [...]}` (its last message), a LangGraph
  `Command` `{update: {messages: [...]}}`;
* GenAI semantic-convention messages `{role, parts: [{type: text|reasoning|tool_call|tool_call_response}]}`;
* the OpenAI Responses API: a response `{object: "response", output: [...]}` or its `output` items
  (`message` with `output_text` parts, `function_call`, `reasoning` summaries, `function_call_output`).

`read_message` never raises: a value it cannot interpret comes back as its JSON text with `read=False`,
so an importer can count it and warn instead of storing raw JSON as if it were the agent's words.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ._build import tool_call as call

_TEXT_PARTS = {"text", "output_text", "input_text", "summary_text", "reasoning", "thinking", "refusal"}


@dataclass
class Message:
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    role: str | None = None
    read: bool = True


def _openai_calls(calls: Any) -> list[dict[str, Any]]:
    """`tool_calls` of a chat message or LangChain message (either `{function: {name, arguments}}` or `{name, args}`)."""
    out = []
    for c in calls if isinstance(calls, list) else []:
        if not isinstance(c, dict):
            continue
        inner = c.get("function")
        function: dict[str, Any] = inner if isinstance(inner, dict) else c
        arguments = function.get("arguments", function.get("args", c.get("args")))
        out.append(call(function.get("name"), arguments, c.get("id") or c.get("call_id")))
    return out


def _content_text(content: Any) -> tuple[str, list[dict[str, Any]], bool]:
    """Text of a `content` value: a string or a list of content parts (chat, Responses, Anthropic-style)."""
    if content is None:
        return "", [], True
    if isinstance(content, str):
        return content, [], True
    if isinstance(content, list):
        texts, calls, ok = [], [], True
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and (part.get("type") in _TEXT_PARTS or "text" in part):
                texts.append(str(part.get("text") or part.get("content") or ""))
            elif isinstance(part, dict) and part.get("type") in ("tool_use", "tool_call", "function_call"):
                calls.append(call(part.get("name"), part.get("input", part.get("arguments")), part.get("id") or part.get("call_id")))
            elif isinstance(part, dict) and part.get("type") in ("image_url", "image", "input_image", "file", "audio"):
                continue  # media parts carry no text to keep
            else:
                ok = False
        return "\n".join(t for t in texts if t), calls, ok
    if isinstance(content, dict):
        inner = read_message(content)
        return inner.text, inner.tool_calls, inner.read
    return str(content), [], True


def _objects(items: list[Any]) -> tuple[list[dict[str, Any]], bool]:
    """The items that are JSON objects, and whether all were (a message with anything else is not read whole)."""
    objects = [i for i in items if isinstance(i, dict)]
    return objects, len(objects) == len(items)


def _parts(parts: list[Any]) -> Message:
    """A GenAI semantic-convention message's `parts`."""
    texts, calls = [], []
    parts, ok = _objects(parts)
    for part in parts:
        kind = part.get("type")
        if kind == "tool_call":
            calls.append(call(part.get("name"), part.get("arguments"), part.get("id")))
        elif kind == "tool_call_response":
            texts.append(_plain(part.get("response", part.get("result"))))
        elif kind in _TEXT_PARTS or "content" in part:
            texts.append(_plain(part.get("content", part.get("text"))))
        elif kind in ("uri", "blob", "file", "image"):
            continue
        else:
            ok = False
    return Message("\n".join(t for t in texts if t), calls, read=ok)


def _plain(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    inner = read_message(value)
    return inner.text


def _response_items(items: list[Any]) -> Message:
    """Responses API `output` items."""
    texts, calls = [], []
    items, ok = _objects(items)
    for item in items:
        kind = item.get("type")
        if kind == "message" or (kind is None and "role" in item):
            text, more, fine = _content_text(item.get("content"))
            texts.append(text)
            calls += more
            ok = ok and fine
        elif kind == "function_call":
            calls.append(call(item.get("name"), item.get("arguments"), item.get("call_id") or item.get("id")))
        elif kind == "reasoning":
            summary = item.get("summary") or item.get("content") or []
            texts += [str(s.get("text", "")) for s in summary if isinstance(s, dict)]
        elif kind == "function_call_output":
            texts.append(_plain(item.get("output")))
        elif kind in ("web_search_call", "file_search_call", "computer_call", "code_interpreter_call", "mcp_call",
                      "custom_tool_call", "local_shell_call", "image_generation_call"):
            calls.append(call(item.get("name") or kind, item.get("arguments", item.get("action", item.get("input"))), item.get("call_id") or item.get("id")))
        else:
            ok = False
    return Message("\n".join(t for t in texts if t), calls, "assistant", ok)


def _is_response_items(value: list[Any]) -> bool:
    return bool(value) and all(isinstance(i, dict) and i.get("type") in (
        "message", "function_call", "reasoning", "function_call_output", "web_search_call", "file_search_call",
        "computer_call", "code_interpreter_call", "mcp_call", "custom_tool_call") for i in value)


def _json_in(text: str) -> dict[str, Any] | list[Any] | None:
    """The JSON object or array a string holds (exporters store messages as JSON text), else None."""
    stripped = text.strip()
    if stripped[:1] in "[{":
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    return None


def read_message(value: Any) -> Message:
    """The text and tool calls of one stored message (or message-like output) in any shape the module lists."""
    if value is None:
        return Message()
    if isinstance(value, str):
        parsed = _json_in(value)
        return Message(value) if parsed is None else read_message(parsed)
    if isinstance(value, (int, float, bool)):
        return Message(json.dumps(value))
    if isinstance(value, list):
        return read_messages(value, last_assistant=True)
    if not isinstance(value, dict):
        return Message(str(value), read=False)
    if value.get("lc") == 1 and isinstance(value.get("kwargs"), dict):  # LangChain's serialised message
        kind = (value.get("id") or [""])[-1]
        inner = read_message(value["kwargs"])
        inner.role = inner.role or {"AIMessage": "assistant", "HumanMessage": "user", "SystemMessage": "system",
                                    "ToolMessage": "tool", "AIMessageChunk": "assistant"}.get(kind, inner.role)
        return inner
    if isinstance(value.get("data"), dict) and isinstance(value.get("type"), str) and "content" in value["data"]:
        inner = read_message(value["data"])  # LangChain's message_to_dict: {"type": "ai", "data": {...}}
        inner.role = inner.role or _ROLE.get(value["type"], value["type"])
        return inner
    if value.get("object") == "response" or (isinstance(value.get("output"), list) and _is_response_items(value["output"])):
        return _response_items(value.get("output") or [])
    if value.get("type") in ("message", "function_call", "reasoning", "function_call_output"):
        return _response_items([value])
    if isinstance(value.get("choices"), list):  # a ChatCompletion
        first = value["choices"][0] if value["choices"] else {}
        return read_message(first.get("message", first.get("text")) if isinstance(first, dict) else first)
    if isinstance(value.get("generations"), list):  # LangChain LLMResult
        generations = value["generations"]
        first = generations[0][0] if generations and isinstance(generations[0], list) and generations[0] else (generations[0] if generations else None)
        if isinstance(first, dict):
            return read_message(first.get("message")) if first.get("message") else Message(str(first.get("text") or ""))
        return Message(read=not generations)
    if isinstance(value.get("parts"), list):
        message = _parts(value["parts"])
        message.role = value.get("role")
        return message
    if "content" in value or "tool_calls" in value or "additional_kwargs" in value:
        text, calls, ok = _content_text(value.get("content"))
        calls += _openai_calls(value.get("tool_calls"))
        if not calls:  # LangChain keeps the provider's raw calls in additional_kwargs
            calls = _openai_calls((value.get("additional_kwargs") or {}).get("tool_calls"))
        if value.get("function_call"):  # the legacy single function call
            calls.append(call(value["function_call"].get("name"), value["function_call"].get("arguments")))
        role = value.get("role") or _ROLE.get(str(value.get("type")), None)
        return Message(text, calls, role, ok)
    if isinstance(value.get("messages"), list):
        return read_messages(value["messages"], last_assistant=False)
    if isinstance(value.get("update"), dict) and isinstance(value["update"].get("messages"), list):  # LangGraph Command
        return read_messages(value["update"]["messages"], last_assistant=False)
    for key in ("text", "output", "answer", "result", "final_output", "value"):
        if key in value and value[key] is not None:
            inner = read_message(value[key])
            return inner
    return Message(json.dumps(value, ensure_ascii=False, default=str), read=False)


_ROLE = {"ai": "assistant", "human": "user", "system": "system", "tool": "tool", "AIMessageChunk": "assistant"}


def read_messages(values: list[Any], last_assistant: bool = True) -> Message:
    """A list of messages as one output. Responses items are read together; a list of assistant messages only
    (a span's output messages, with `last_assistant`) is the reply, joined; any other list (a conversation,
    a graph state's messages) ends with its reply, so its last message is taken."""
    if _is_response_items(values):
        return _response_items(values)
    read = [read_message(v) for v in values]
    if not read:
        return Message()
    assistants = [m for m in read if m.role in ("assistant", "ai", "model")]
    if last_assistant and assistants and len(assistants) == len(read):  # an output list: every reply message
        return Message("\n".join(m.text for m in assistants if m.text), [c for m in assistants for c in m.tool_calls],
                       "assistant", all(m.read for m in assistants))
    return read[-1]


def messages_of(value: Any) -> list[Message]:
    """Every message of an input value (a list of messages, `{messages: [...]}`, Responses input items)."""
    if isinstance(value, str):
        parsed = _json_in(value)
        return [Message(value, role="user")] if parsed is None else messages_of(parsed)
    if isinstance(value, dict):
        for key in ("messages", "input", "inputs"):
            if isinstance(value.get(key), (list, dict)):
                return messages_of(value[key])
        return [read_message(value)]
    if isinstance(value, list):
        out = []
        for item in value:
            if isinstance(item, list):  # LangChain's chat model input: a batch of message lists
                out += messages_of(item)
            else:
                out.append(read_message(item))
        return out
    return []


def first_user_text(value: Any) -> str:
    """The first user message's text of an input value, or '' when it holds none."""
    return next((m.text for m in messages_of(value) if m.role in ("user", "human") and m.text), "")
