"""Chat calls for the attribution methods: litellm for every provider, usage counted per method run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rootstep.warehouse import Usage


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
    """

    model: str
    api_base: str | None = None
    temperature: float = 0.0
    max_tokens: int = 512
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
        response = litellm.completion(
            model=self.model,
            messages=[{"role": "user", "content": prompt}],
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
