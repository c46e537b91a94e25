"""Calls to real (and scripted, and local) models: always through litellm, with retries and limits.

Rate limits, timeouts, connection failures and 503s are retried with exponential backoff (streams only
before their first chunk: a half-delivered stream is never restarted). Each model string has its own
concurrency limit. Errors leave as `ProviderError` with an HTTP status and a message from which the API
key has been scrubbed.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

import litellm
from litellm import CustomLLM

from ._hashing import SECRET_KEYS, scrub

log = logging.getLogger("rootstep.gateway")

litellm.suppress_debug_info = True
litellm.telemetry = False

_PASS_THROUGH_EXCLUDED = frozenset({"model", "stream", "stream_options"}) | SECRET_KEYS

RETRYABLE = (
    litellm.RateLimitError,
    litellm.Timeout,
    litellm.APIConnectionError,
    litellm.ServiceUnavailableError,
)

_STATUS = [
    (litellm.RateLimitError, 429, "rate_limit"),
    (litellm.Timeout, 504, "timeout"),
    (litellm.ContextWindowExceededError, 400, "context_window_exceeded"),
    (litellm.BadRequestError, 400, "bad_request"),
    (litellm.AuthenticationError, 401, "authentication"),
    (litellm.PermissionDeniedError, 403, "permission_denied"),
    (litellm.NotFoundError, 404, "not_found"),
    (litellm.ServiceUnavailableError, 503, "service_unavailable"),
]


class ProviderError(Exception):
    """A provider call that failed for good: HTTP status, a short kind, and a key-free message."""

    def __init__(self, status_code: int, kind: str, message: str, attempts: int = 1):
        super().__init__(message)
        self.status_code = status_code
        self.kind = kind
        self.message = message
        self.attempts = attempts

    def __str__(self) -> str:
        return f"{self.kind} ({self.status_code}) after {self.attempts} attempt(s): {self.message}"


def _as_provider_error(exc: BaseException, secrets: list[str], attempts: int) -> ProviderError:
    message = scrub(str(exc) or type(exc).__name__, secrets)
    for cls, status, kind in _STATUS:
        if isinstance(exc, cls):
            return ProviderError(status, kind, message, attempts)
    return ProviderError(502, "provider_error", message, attempts)


_HANDLERS: dict[str, CustomLLM] = {}


def register_provider(name: str, factory: Callable[[], CustomLLM], *, replace: bool = True) -> None:
    """Route litellm model strings `name/...` to the custom handler `factory()` builds."""
    if name in _HANDLERS and not replace:
        return
    handler = factory()
    _HANDLERS[name] = handler
    litellm.custom_provider_map = [
        entry for entry in (litellm.custom_provider_map or []) if entry.get("provider") != name
    ] + [{"provider": name, "custom_handler": handler}]
    from litellm.utils import custom_llm_setup

    custom_llm_setup()


def provider_name(model: str) -> str:
    """`openai/gpt-4o` -> `openai`; a bare model name is litellm's to resolve (reported as `openai`)."""
    return model.split("/", 1)[0] if "/" in model else "openai"


@dataclass
class ProviderCall:
    """What one call needs besides the request body; the key stays in memory only."""

    model: str
    api_key: str | None = None
    api_base: str | None = None
    extra: dict[str, Any] | None = None


class Providers:
    """litellm with retries, backoff and a per-model concurrency limit."""

    def __init__(self, *, max_concurrency: int = 8, retries: int = 3, backoff_s: float = 0.5, max_backoff_s: float = 8.0):
        self.max_concurrency = max_concurrency
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._limits: dict[str, asyncio.Semaphore] = {}

    def _limit(self, model: str) -> asyncio.Semaphore:
        if model not in self._limits:
            self._limits[model] = asyncio.Semaphore(self.max_concurrency)
        return self._limits[model]

    def _kwargs(self, call: ProviderCall, request: dict[str, Any], stream: bool) -> dict[str, Any]:
        kwargs = {k: v for k, v in request.items() if k.lower() not in _PASS_THROUGH_EXCLUDED}
        kwargs.update(call.extra or {})
        kwargs.update(model=call.model, stream=stream)
        if stream:
            kwargs["stream_options"] = {"include_usage": True}
        if call.api_key:
            kwargs["api_key"] = call.api_key
        if call.api_base:
            kwargs["api_base"] = call.api_base
        # litellm imports its MCP bridge whenever `tools` are present; rootstep never routes MCP tools
        # through the gateway, and the bridge needs the optional `mcp` package.
        kwargs["_skip_mcp_handler"] = True
        return kwargs

    async def _backoff(self, attempt: int, exc: BaseException, model: str, secrets: list[str]) -> None:
        delay = min(self.max_backoff_s, self.backoff_s * 2**attempt) * (0.5 + random.random() / 2)
        log.warning("%s: %s (%s); retry %d in %.2fs", model, type(exc).__name__,
                    scrub(str(exc), secrets)[:300] or "no message", attempt + 1, delay)
        await asyncio.sleep(delay)

    async def complete(self, call: ProviderCall, request: dict[str, Any]) -> dict[str, Any]:
        """One non-streaming completion as an OpenAI ChatCompletion dict."""
        secrets = [call.api_key or ""]
        async with self._limit(call.model):
            for attempt in range(self.retries + 1):
                try:
                    response = await litellm.acompletion(**self._kwargs(call, request, stream=False))
                    return response.model_dump(exclude_none=False)
                except RETRYABLE as exc:
                    if attempt == self.retries:
                        raise _as_provider_error(exc, secrets, attempt + 1) from None
                    await self._backoff(attempt, exc, call.model, secrets)
                except Exception as exc:
                    raise _as_provider_error(exc, secrets, attempt + 1) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def stream(self, call: ProviderCall, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Stream chunks (ChatCompletionChunk dicts); the caller assembles them with `assemble`."""
        secrets = [call.api_key or ""]
        async with self._limit(call.model):
            for attempt in range(self.retries + 1):
                started = False
                try:
                    response = await litellm.acompletion(**self._kwargs(call, request, stream=True))
                    async for chunk in response:
                        started = True
                        yield chunk.model_dump(exclude_none=True)
                    return
                except RETRYABLE as exc:
                    if started or attempt == self.retries:
                        raise _as_provider_error(exc, secrets, attempt + 1) from None
                    await self._backoff(attempt, exc, call.model, secrets)
                except Exception as exc:
                    raise _as_provider_error(exc, secrets, attempt + 1) from None


def assemble(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """Rebuild the full ChatCompletion from streamed chunks (what record mode stores for a stream)."""
    from litellm import ModelResponseStream

    built = litellm.stream_chunk_builder([ModelResponseStream(**c) for c in chunks])
    if built is None:  # pragma: no cover - litellm returns None only for an empty list
        raise ValueError("no chunks to assemble")
    return built.model_dump(exclude_none=False)
