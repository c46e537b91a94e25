"""The scripted provider: litellm model strings `scripted/<name>` answered from a script, not a model.

For tests, and for deterministic simulations of LLM latency in benchmarks. Everything it produces is
marked `simulated=True` where the gateway stores it, and its responses carry
`system_fingerprint="rootstep-scripted"`: a scripted answer is never mistaken for a model's.

A script is one of
- a list of responses, served in order (`cycle=True` starts again at the end; otherwise running out is
  an error that names the script);
- rules: `(pattern, response)` pairs; the first whose regex matches the last user message (or whose
  callable returns true for the messages) answers;
- a callable `fn(messages, params) -> response`.

A response is a string (the assistant's content), a dict (`content`, `tool_calls`, `finish_reason`, and
`logprobs` in the OpenAI form, returned by non-streaming calls as a provider asked for them would), or
an exception instance, which is raised (litellm maps it: `CustomLLMError(status_code=429, ...)` becomes
a rate-limit error) so provider faults can be scripted too. Tool calls may be given in the OpenAI form or
as `{"name": ..., "arguments": {...}}`.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Iterator, Union

from litellm import CustomLLM, ModelResponse
from litellm.llms.custom_llm import CustomLLMError

from ._chunks import openai_tool_call

ScriptResponse = Union[str, dict[str, Any], BaseException]
ScriptFn = Callable[[list[dict[str, Any]], dict[str, Any]], ScriptResponse]
Matcher = Union[str, Callable[[list[dict[str, Any]]], bool]]

SCRIPTED_FINGERPRINT = "rootstep-scripted"


@dataclass
class Script:
    """Where the answers of `scripted/<name>` come from; see the module docstring for the forms."""

    responses: list[ScriptResponse] | None = None
    rules: list[tuple[Matcher, ScriptResponse]] | None = None
    fn: ScriptFn | None = None
    default: ScriptResponse | None = None
    """Answer when no rule matches (rules only); without it a miss is an error."""
    cycle: bool = False
    latency_s: float = 0.0
    """Simulated provider latency added to every call."""
    calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def answer(self, name: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> ScriptResponse:
        with self._lock:
            position = self.calls
            self.calls += 1
        if self.fn is not None:
            return self.fn(messages, params)
        if self.responses is not None:
            if position >= len(self.responses) and not self.cycle:
                raise CustomLLMError(
                    status_code=500,
                    message=f"scripted/{name}: script exhausted after {len(self.responses)} responses",
                )
            return self.responses[position % len(self.responses)]
        last_user: dict[str, Any] = next((m for m in reversed(messages) if m.get("role") == "user"), {})
        text = _text(last_user.get("content"))
        for matcher, response in self.rules or []:
            hit = re.search(matcher, text) if isinstance(matcher, str) else matcher(messages)
            if hit:
                return response
        if self.default is not None:
            return self.default
        raise CustomLLMError(status_code=500, message=f"scripted/{name}: no rule matches {text[:200]!r}")


_SCRIPTS: dict[str, Script] = {}


def register_script(
    name: str,
    script: Script | list[ScriptResponse] | ScriptFn,
    *,
    latency_s: float = 0.0,
    cycle: bool = False,
) -> Script:
    """Make `scripted/<name>` answer from `script` (a `Script`, a list of responses, or a callable)."""
    if not isinstance(script, Script):
        script = Script(fn=script, latency_s=latency_s) if callable(script) else Script(
            responses=list(script), cycle=cycle, latency_s=latency_s
        )
    _SCRIPTS[name] = script
    install_scripted_provider()
    return script


def get_script(name: str) -> Script:
    try:
        return _SCRIPTS[name]
    except KeyError:
        known = ", ".join(sorted(_SCRIPTS)) or "none"
        raise CustomLLMError(status_code=404, message=f"no script named {name!r} (registered: {known})") from None


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def _message(response: ScriptResponse) -> tuple[str | None, list[dict[str, Any]], str]:
    if isinstance(response, BaseException):
        raise response
    if isinstance(response, str):
        return response, [], "stop"
    tool_calls = [openai_tool_call(t, f"call_{uuid.uuid4().hex[:16]}") for t in response.get("tool_calls") or []]
    finish = response.get("finish_reason") or ("tool_calls" if tool_calls else "stop")
    return response.get("content"), tool_calls, finish


def _usage(messages: list[dict[str, Any]], content: str | None, tool_calls: list[dict[str, Any]]) -> dict[str, int]:
    prompt = sum(len(_text(m.get("content")).split()) + 1 for m in messages)
    completion = len((content or "").split()) + sum(len(t["function"]["arguments"].split()) for t in tool_calls)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class ScriptedLLM(CustomLLM):
    """litellm custom provider `scripted`: `model` after the slash names the script."""

    def _respond(self, model: str, messages: list[dict[str, Any]], optional_params: dict[str, Any]) -> ModelResponse:
        response = get_script(model).answer(model, messages, optional_params)
        content, tool_calls, finish = _message(response)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if tool_calls:
            message["tool_calls"] = tool_calls
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        if isinstance(response, dict) and response.get("logprobs") is not None:
            choice["logprobs"] = response["logprobs"]
        return ModelResponse(
            id=f"chatcmpl-scripted-{uuid.uuid4().hex[:20]}",
            model=f"scripted/{model}",
            system_fingerprint=SCRIPTED_FINGERPRINT,
            choices=[choice],
            usage=_usage(messages, content, tool_calls),
        )

    def completion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding,
                   api_key, logging_obj, optional_params, *args, **kwargs) -> ModelResponse:
        time.sleep(get_script(model).latency_s)
        return self._respond(model, messages, optional_params)

    async def acompletion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                          encoding, api_key, logging_obj, optional_params, *args, **kwargs) -> ModelResponse:
        latency = get_script(model).latency_s
        if latency:
            await asyncio.sleep(latency)
        return self._respond(model, messages, optional_params)

    def _chunks(self, response: ModelResponse) -> Iterator[dict[str, Any]]:
        message = response.choices[0].message
        words = re.findall(r"\S+\s*|\s+", message.content or "")
        for word in words:
            yield {"text": word, "is_finished": False, "finish_reason": "", "usage": None, "index": 0, "tool_use": None}
        tool_calls = message.tool_calls or []
        for i, call in enumerate(tool_calls):
            yield {
                "text": "",
                "is_finished": False,
                "finish_reason": "",
                "usage": None,
                "index": 0,
                "tool_use": {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},  # type: ignore[union-attr]
                    "index": i,
                },
            }
        usage = getattr(response, "usage", None)  # set on every scripted completion
        yield {
            "text": "",
            "is_finished": True,
            "finish_reason": response.choices[0].finish_reason,
            "usage": {k: getattr(usage, k, 0) or 0 for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
            "index": 0,
            "tool_use": None,
        }

    def streaming(  # type: ignore[override]  # litellm passes its arguments positionally; chunks are dicts
            self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding,
                  api_key, logging_obj, optional_params, *args, **kwargs) -> Iterator[dict[str, Any]]:
        script = get_script(model)
        time.sleep(script.latency_s)
        yield from self._chunks(self._respond(model, messages, optional_params))

    async def astreaming(  # type: ignore[override]  # as `streaming`
            self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                         encoding, api_key, logging_obj, optional_params, *args, **kwargs) -> AsyncIterator[dict[str, Any]]:
        script = get_script(model)
        if script.latency_s:
            await asyncio.sleep(script.latency_s)
        response = self._respond(model, messages, optional_params)
        chunks = list(self._chunks(response))
        for chunk in chunks:
            if script.latency_s:
                await asyncio.sleep(script.latency_s / max(len(chunks), 1))
            yield chunk


def install_scripted_provider() -> None:
    """Register the `scripted` provider with litellm (idempotent)."""
    from ._providers import register_provider

    register_provider("scripted", ScriptedLLM, replace=False)
