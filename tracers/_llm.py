"""Chat calls for the attribution methods: litellm for every provider, usage counted per method run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0


def ensure_provider(model: str) -> None:
    """Register rootstep's own litellm providers (`scripted/...`, `local/...`) when the model names one."""
    provider = model.split("/", 1)[0]
    if provider == "scripted":
        from rootstep.gateway import install_scripted_provider

        install_scripted_provider()
    elif provider == "local":
        from rootstep.gateway import install_local_provider

        install_local_provider()


@dataclass
class Chat:
    """One model, called with a single user prompt at a time; `usage` adds up every call.

    `api_base` routes the calls through a rootstep gateway (or any OpenAI-compatible endpoint).
    `timeout`: seconds one call may take before it fails (None: litellm's own limit, 600 s unless
    `REQUEST_TIMEOUT` is set); raise it for a model that answers slowly, such as one answered by hand.
    """

    model: str
    api_base: str | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    timeout: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    """The last answer's finish reason: `length` means it was cut at `max_tokens` (never parse it as is)."""

    def __post_init__(self) -> None:
        ensure_provider(self.model)

    def __call__(self, prompt: str) -> str:
        import litellm

        start = time.perf_counter()
        kwargs: dict[str, Any] = dict(self.extra)
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.timeout is not None:
            kwargs["timeout"] = self.timeout
        response = litellm.completion(
            model=self.model,
            messages=[{"role": "user", "content": prompt}],
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            **kwargs,
        )
        self.usage.calls += 1
        self.usage.seconds += time.perf_counter() - start
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.usage.prompt_tokens += getattr(usage, "prompt_tokens", 0) or 0
            self.usage.completion_tokens += getattr(usage, "completion_tokens", 0) or 0
        try:
            self.usage.cost_usd += litellm.completion_cost(completion_response=response) or 0.0
        except Exception:  # unknown price (local, scripted, self-hosted models): no cost to add
            pass
        self.finish_reason = getattr(response.choices[0], "finish_reason", None)
        return response.choices[0].message.content or ""
