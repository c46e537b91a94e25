"""OpenAI streaming chunks made from a whole ChatCompletion (replayed, forced and cached calls stream too),
and tool calls put in the OpenAI form."""

from __future__ import annotations

import json
from typing import Any, Iterator


def openai_tool_call(raw: dict[str, Any], default_id: str) -> dict[str, Any]:
    """A tool call given in the OpenAI form or as `{"name", "arguments": {...}}`, in the OpenAI form (arguments
    as a JSON string; `default_id` when it has no id)."""
    function = raw.get("function", raw)
    arguments = function.get("arguments", {})
    return {
        "id": raw.get("id") or default_id,
        "type": "function",
        "function": {
            "name": function["name"],
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }


def to_chunks(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """`chat.completion.chunk` dicts that a client reassembles into `response`: role and content, each
    tool call, the finish reason, then usage (as with `stream_options.include_usage`)."""
    base = {
        "id": response.get("id", "chatcmpl-rootstep"),
        "object": "chat.completion.chunk",
        "created": response.get("created", 0),
        "model": response.get("model", ""),
        "system_fingerprint": response.get("system_fingerprint"),
    }
    for choice in response.get("choices") or []:
        index = choice.get("index", 0)
        message = choice.get("message") or {}
        delta: dict[str, Any] = {"role": message.get("role") or "assistant", "content": message.get("content") or ""}
        yield {**base, "choices": [{"index": index, "delta": delta, "finish_reason": None}]}
        for i, call in enumerate(message.get("tool_calls") or []):
            tool_delta = {
                "index": i,
                "id": call.get("id"),
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": call["function"].get("arguments") or ""},
            }
            yield {**base, "choices": [{"index": index, "delta": {"tool_calls": [tool_delta]}, "finish_reason": None}]}
        yield {**base, "choices": [{"index": index, "delta": {}, "finish_reason": choice.get("finish_reason") or "stop"}]}
    if response.get("usage"):
        yield {**base, "choices": [], "usage": response["usage"]}


def sse(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"
