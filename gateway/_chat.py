"""Chat calls for the attribution methods, the analyzer and the perturber: litellm for every provider, or
through a rootstep gateway run (journaled and costed like an agent's call); usage counted per method run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rootstep.model import Usage


def ensure_provider(model: str) -> None:
    """Register rootstep's own litellm providers (`scripted/...`, `local/...`) when the model names one."""
    provider = model.split("/", 1)[0]
    if provider == "scripted":
        from rootstep.gateway import install_scripted_provider

        install_scripted_provider()
    elif provider == "local":
        from rootstep.gateway import install_local_provider

        install_local_provider()


GATEWAY_PURPOSE = "annotation"
"""The `X-Rootstep-Purpose` of a call made through a gateway route (`llm_calls.purpose`)."""


@dataclass
class Chat:
    """One model, called with a single user prompt at a time; `usage` adds up every call.

    `api_base` sends the calls to an OpenAI-compatible endpoint through litellm. `gateway_route` (a
    `GatewayServer.base_url(run_id, agent)`) sends them through that rootstep gateway run instead: the
    gateway calls the run's model, journals every call as an `LLMCall` of `gateway_run_id` (purpose
    `annotation`), and costs it; `last_call_id` names the last call's row. `extra` (for example
    `response_format`) goes with every request either way.
    """

    model: str
    api_base: str | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    extra: dict[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    """The last answer's finish reason: `length` means it was cut at `max_tokens` (never parse it as is)."""
    gateway_route: str | None = None
    gateway_run_id: str | None = None
    last_call_id: str | None = None

    def __post_init__(self) -> None:
        if self.gateway_route is None:
            ensure_provider(self.model)

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        """Ask `prompt` (one user message), or send `prompt` as the whole message list when it is a list."""
        self.last_call_id = None
        if self.gateway_route is not None:
            return self._through_gateway(prompt)
        import litellm

        start = time.perf_counter()
        kwargs: dict[str, Any] = dict(self.extra)
        if self.api_base:
            kwargs["api_base"] = self.api_base
        response = litellm.completion(
            model=self.model,
            messages=_messages(prompt),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            **kwargs,
        )
        counts = getattr(response, "usage", None)
        try:
            usd = litellm.completion_cost(completion_response=response) or 0.0
        except Exception:  # unknown price (local, scripted, self-hosted models): no cost to add
            usd = 0.0
        self.usage += Usage(llm_calls=1, prompt_tokens=getattr(counts, "prompt_tokens", 0) or 0,
                            completion_tokens=getattr(counts, "completion_tokens", 0) or 0, usd=usd,
                            seconds=time.perf_counter() - start)
        self.finish_reason = getattr(response.choices[0], "finish_reason", None)
        return response.choices[0].message.content or ""

    def _through_gateway(self, prompt: str | list[dict[str, Any]]) -> str:
        """One call to the gateway route; a refused or failed call raises with the gateway's message."""
        import httpx

        start = time.perf_counter()
        body = {"model": self.model, "messages": _messages(prompt),
                "temperature": self.temperature, "max_tokens": self.max_tokens, **self.extra}
        response = httpx.post(f"{self.gateway_route}/chat/completions", json=body,
                              headers={"X-Rootstep-Purpose": GATEWAY_PURPOSE},
                              timeout=httpx.Timeout(None, connect=30.0))
        seconds = time.perf_counter() - start
        if response.status_code != 200:
            self.usage += Usage(seconds=seconds)
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:500]
            raise GatewayCallError(f"gateway run {self.gateway_run_id}: HTTP {response.status_code}: {message}")
        self.last_call_id = response.headers.get("x-rootstep-call-id")
        data = response.json()
        counts = data.get("usage") or {}
        self.usage += Usage(llm_calls=1, prompt_tokens=int(counts.get("prompt_tokens") or 0),
                            completion_tokens=int(counts.get("completion_tokens") or 0),
                            usd=float(response.headers.get("x-rootstep-cost-usd") or 0.0), seconds=seconds)
        choice = data["choices"][0]
        self.finish_reason = choice.get("finish_reason")
        return (choice.get("message") or {}).get("content") or ""


def _messages(prompt: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": prompt}]


class GatewayCallError(RuntimeError):
    """A call through a gateway route that the gateway refused or whose provider failed."""
