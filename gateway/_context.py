"""What the gateway knows about a run: its provenance, where its calls go, and how it replays."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from rootstep.model import Intervention, LLMCall

GatewayMode = Literal["record", "replay"]

_PARTITION = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$"
"""What the warehouse accepts as a framework or benchmark name (it names a partition folder)."""

from ._defaults import DEFAULT_MODEL  # noqa: E402  (the offline agents' model, shipped in PyPI packages)


class RunContext(BaseModel):
    """A run registered with the gateway.

    In `record` mode every call goes to `model` through litellm and is journaled. In `replay` mode the
    calls recorded for `replay_of` are served for the prefix, the intervention (if any) is forced, and
    calls after it go live to `model`. `run_id` is always the id of *this* run: a replay journals its
    calls (replayed, forced, live) under its own id, never under the recorded run's.
    """

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,199}$")
    framework: str = Field(default="unknown", pattern=_PARTITION)
    benchmark: str = Field(default="unknown", pattern=_PARTITION)
    model: str = DEFAULT_MODEL
    """litellm model string: `openai/gpt-4o-mini`, `ollama/qwen2.5`, `scripted/<name>`, `local/qwen2.5-coder-0.5b`."""
    agent_models: dict[str, str] = Field(default_factory=dict)
    """Per-agent override of `model` (agent name -> litellm model string)."""
    mode: GatewayMode = "record"
    replay_of: str | None = None
    """Replay mode: the recorded run whose calls serve the prefix."""
    recorded: list[LLMCall] | None = None
    """Replay mode: the recorded calls; when None they are read from the gateway's journal of `replay_of`."""
    intervention: Intervention | None = None
    intervention_call: int | None = Field(default=None, ge=0)
    """Address the intervention by position k in the recording (0-based) instead of by step."""
    step_calls: dict[int, list[str]] | None = None
    """Step index -> the ids of the recorded calls that produced it (a trajectory's `Step.call_ids`),
    for recordings whose calls carry no `step_index`."""
    cache: bool = False
    """Opt in to the content-addressed response cache (used for temperature-0 requests only)."""
    api_base: str | None = None
    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    """The provider key: kept in the gateway's memory, never serialised, logged or stored."""
    litellm_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword arguments for `litellm.acompletion` (for example `timeout`)."""
    agents: tuple[str, ...] = ()
    """The run's declared agents. When given, a call whose agent (from its URL, header or system prompt) is
    not one of them is refused as unattributed (`Gateway.agent_for`)."""
    agent_header: str | None = None
    """A request header whose value names the calling agent (programs that set one per agent)."""
    agent_prompts: list[tuple[str, str]] = Field(default_factory=list)
    """(regex, agent) pairs: a call with no agent in its URL belongs to the first agent whose regex is found
    in the request's system message (programs that share one client for every agent)."""
    attribution_source: str | None = None
    """Where the attribution rules come from (a system file), named when a call matches none."""

    @model_validator(mode="after")
    def _replay_needs_a_source(self) -> "RunContext":
        if self.mode == "replay":
            if self.replay_of is None:
                raise ValueError("a replay run needs `replay_of`: the run whose recorded calls it serves")
            if self.replay_of == self.run_id:
                raise ValueError("a replay must have its own run_id (its calls are journaled under it)")
            if self.intervention is not None and self.intervention.run_id != self.replay_of:
                raise ValueError(
                    f"the intervention names run {self.intervention.run_id!r} but this replays {self.replay_of!r}"
                )
        elif self.intervention is not None or self.intervention_call is not None:
            raise ValueError("an intervention needs mode='replay'")
        if self.intervention_call is not None and self.intervention is None:
            raise ValueError("intervention_call addresses an intervention: give `intervention` too")
        return self

    def model_for(self, agent: str) -> str:
        return self.agent_models.get(agent, self.model)

    def secret(self) -> str | None:
        return None if self.api_key is None else self.api_key.get_secret_value()
