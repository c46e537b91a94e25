"""The trajectory data model: the contract every stage of rootstep reads and writes.

Step indices are 0-based (as in Who&When). Ids are content-derived: the same trajectory,
call, replay or label always gets the same id, which is what makes re-imports and re-runs
idempotent. Timing, token and cost fields never enter an id.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ._ids import content_id
from .errors import MissingRecording

StepKind = Literal["agent", "tool", "environment", "human"]
"""Only `agent` steps are LLM-produced and can be decisive errors; the others are kept all the same."""

AnnotationMethod = Literal["counterfactual", "fault_injection", "human", "imported", "tracer"]
AnnotationStatus = Literal["labelled", "unresolved", "verifier_suspect", "not_causal", "unproven_earliest"]
"""`not_causal`: a fix (or corruption) flipped the run, but so did a control replay with the step unchanged;
`unproven_earliest`: a causal flip whose earlier agent steps were not all tested or cleared. Neither is a label."""
CallMode = Literal["live", "replayed", "forced", "cached"]
CallPurpose = Literal["step", "speaker_selection", "parse_retry", "planning", "summary", "other", "annotation"]
"""`annotation`: an analyzer's or perturber's call (its run is the search's, not a framework episode's)."""
ReplayPurpose = Literal["counterfactual", "fault_injection", "exact", "other"]
TaskKind = Literal["coding", "math", "qa", "agentic"]

_PARTITION_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _partition_value(value: str, field: str) -> str:
    if not _PARTITION_VALUE.match(value):
        raise ValueError(
            f"{field} {value!r} must be 1-128 characters of letters, digits, '.', '_', '+', '-' "
            "(it names a warehouse partition folder)"
        )
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class _Partitioned(_Model):
    """A model stored under folders named by its `framework` and `benchmark`: both are checked as such."""

    @field_validator("framework", "benchmark", check_fields=False)
    @classmethod
    def _partition_names(cls, value: str, info: ValidationInfo) -> str:
        return _partition_value(value, str(info.field_name))


class Verdict(_Model):
    """The outcome of the success function Omega on one run."""

    success: bool
    score: float = 0.0
    details: dict[str, Any] = Field(default_factory=dict)


class Task(_Partitioned):
    """One benchmark task: what an agent system is asked, and what Omega checks it against."""

    benchmark: str
    task_id: str
    prompt: str
    ground_truth: str | None = None
    verifier: str
    kind: TaskKind
    metadata: dict[str, Any] = Field(default_factory=dict)


    @property
    def id(self) -> str:
        return content_id("task", self.benchmark, self.task_id, self.prompt, self.ground_truth)


class Step(_Model):
    """One step of a trajectory: an agent's LLM-produced action, or a tool/environment/human turn."""

    index: int = Field(ge=0)
    agent: str = Field(min_length=1)
    kind: StepKind = "agent"
    content: str = ""
    role: str | None = None
    """The framework's own role label (for example `Orchestrator (-> WebSurfer)`), kept verbatim."""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    observation: str | None = None
    call_ids: list[str] = Field(default_factory=list)
    """Gateway call ids that produced this step; empty for tool, environment and human steps."""
    started_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _only_agent_steps_have_calls(self) -> "Step":
        if self.kind != "agent" and self.call_ids:
            raise ValueError(f"step {self.index}: a {self.kind} step cannot be produced by LLM calls")
        return self

    def content_key(self) -> list[Any]:
        return [self.index, self.agent, self.kind, self.role, self.content, self.tool_calls, self.observation]

    def replay_key(self) -> list[Any]:
        """`content_key` with what differs between two runs of the same program masked: the memory address of an
        object's repr (`<function create_function.<locals>.new_func at 0x7f5c86d7c4a0>`, smolagents' observation of a
        step that defines a function). A replay whose steps before the intervention match the recording's by this
        key reproduced them; on the seed-43 slice (2026-12-03) every smolagents replay past such a step was reported
        as a divergence."""
        return [_masked(value) if isinstance(value, str) else value for value in self.content_key()]


_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]{4,16}\b")


def _masked(text: str) -> str:
    return _ADDRESS.sub("at 0x?", text)


class SystemRef(_Model):
    """The system file a run was collected from (`--system FILE`): enough for another process to register
    it again before it replays the run."""

    file: str = Field(min_length=1)
    name: str
    digest: str


class Recording(_Model):
    """How a run was recorded by a rootstep adapter: what a replay needs to re-run it.

    Runs imported from trace files or Who&When have none (they cannot be replayed)."""

    gateway_run_id: str = Field(min_length=1)
    """The gateway run that journaled the run's LLM calls (`llm_calls.run_id`)."""
    task: Task
    """The whole task, so a replay re-runs exactly what was run."""
    agent_models: dict[str, str] = Field(default_factory=dict)
    """Per-agent overrides of `Trajectory.model`."""
    image: str | None = None
    """The sandbox image the episode ran in."""
    framework_version: str | None = None
    """The framework's version as the driver reported it inside the image."""
    system: SystemRef | None = None
    """The system file of a system-file run."""


class ReplayProvenance(_Model):
    """What a replayed run re-simulates (`Trajectory.parent_run_id` is the run) and what the gateway saw."""

    of_gateway_run_id: str
    """The recorded gateway run whose calls served the prefix."""
    intervention: Intervention | None = None
    """None for an exact replay; otherwise which step was forced, with what, and its kind."""
    live_calls: int = 0
    replayed_calls: int = 0
    forced_calls: int = 0
    divergence: str | None = None
    """The gateway's diff when a prefix request was not in the recording."""
    prefix_identical: bool = False
    """The steps before the intervention equal the recording's."""
    identical: bool = False
    """An exact replay that reproduced every step."""


class Trajectory(_Partitioned):
    """A run of one framework on one task: ordered steps, the final answer, Omega's verdict, provenance."""

    framework: str
    benchmark: str
    task_id: str
    question: str = ""
    ground_truth: str | None = None
    steps: list[Step] = Field(default_factory=list)
    final_answer: str | None = None
    verdict: Verdict | None = None
    model: str | None = None
    config_hash: str | None = None
    source: str | None = None
    """Where the run came from: a file path for imports, `rootstep` for collected runs."""
    parent_run_id: str | None = None
    """For a replayed run, the run it re-simulates."""
    started_at: datetime | None = None
    duration_s: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    recording: Recording | None = None
    """How a rootstep adapter recorded the run (None for imported runs)."""
    replay: ReplayProvenance | None = None
    """For a replayed run: what it re-simulates and what the gateway saw."""
    metadata: dict[str, Any] = Field(default_factory=dict)

    def recorded(self) -> Recording:
        """The recording; a `MissingRecording` naming the run and the field when there is none."""
        if self.recording is None:
            raise MissingRecording(
                f"run {self.id} ({self.framework}/{self.benchmark}/{self.task_id}): field `recording` is empty: "
                f"it was not collected by a rootstep adapter (source {self.source!r}), so it has no gateway run "
                "id and task to replay")
        return self.recording

    @model_validator(mode="after")
    def _steps_are_ordered(self) -> "Trajectory":
        for position, step in enumerate(self.steps):
            if step.index != position:
                raise ValueError(f"steps[{position}] has index {step.index}; indices must be 0..n-1 in order")
        return self

    @property
    def id(self) -> str:
        return content_id(
            "run",
            self.framework,
            self.benchmark,
            self.task_id,
            self.question,
            self.ground_truth,
            [s.content_key() for s in self.steps],
            self.final_answer,
            self.model,
            self.config_hash,
            self.parent_run_id,
        )

    @property
    def agents(self) -> list[str]:
        """Distinct agents in order of first appearance."""
        return list(dict.fromkeys(s.agent for s in self.steps))

    @property
    def success(self) -> bool | None:
        return None if self.verdict is None else self.verdict.success


class LLMCall(_Partitioned):
    """One chat-completion call that went through the gateway, matched on replay by its key."""

    run_id: str
    framework: str
    benchmark: str
    agent: str
    request_hash: str
    counter: int = Field(ge=0)
    """How many earlier calls of this run had the same (agent, request_hash)."""
    model: str
    provider: str
    mode: CallMode = "live"
    simulated: bool = False
    """True when a scripted provider produced the response: never a real model's output."""
    purpose: CallPurpose = "step"
    step_index: int | None = None
    request: dict[str, Any] = Field(default_factory=dict)
    response: dict[str, Any] = Field(default_factory=dict)
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    created_at: datetime = Field(default_factory=utcnow)

    @property
    def id(self) -> str:
        return content_id("call", self.run_id, self.agent, self.request_hash, self.counter)


class Intervention(_Model):
    """Force `new_content` as the action of step `step` of run `run_id`, then re-simulate."""

    run_id: str
    step: int = Field(ge=0)
    new_content: str
    kind: Literal["fix", "corruption", "control"] = "fix"
    """`control`: the step's recorded response forced unchanged (everything after it live), the other half
    of a cause: a flip that the control shows too is a re-roll, not the intervention's effect."""
    agent: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    persist: str | None = None
    """Persistent fault injection (as AgenTracer's released code does): an instruction appended to the
    intervened agent's system prompt on every later live call of the replay, so the agent keeps making
    the mistake instead of being talked out of it by the team. The label stays on `step`, the first
    corrupted step."""
    also: list["Intervention"] = Field(default_factory=list)
    """A joint fix: further, later steps forced in the same replay (each by its agent's call ordinal, since
    the requests after the first forced step are new). Each must be an agent step after `step`."""


class Usage(_Model):
    """What some work cost: the one cost type of rootstep, added up with `+` (and `sum(..., Usage())`).

    It is a label's cost (`Annotation.cost`), a replay's (`Replay.cost`), what a search has spent
    (`rootstep.annotation.Meter`), an attribution method's (`tracers.Attribution.cost`, a `gateway.Chat`'s
    `usage`) and what the gateway served a run (`gateway.RunStats.usage`). Stored in the warehouse's
    `cost_*` columns of `annotations` and the `live_calls`, `replayed_calls`, `tokens`, `cost_usd`,
    `duration_s` columns of `replays` (the token split in `prompt_tokens` / `completion_tokens` beside them).
    """

    llm_calls: int = Field(default=0, ge=0)
    """Calls a model answered live (paid): the analyzer's, the perturber's or a tracer's, and a replay's live
    calls after its intervention. A replay row's `live_calls` column."""
    replayed_calls: int = Field(default=0, ge=0)
    """Calls served from a recording (free): the prefix of a replay."""
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    usd: float = 0.0
    """Money, where the provider's price is known (litellm's price list); 0 for local, scripted and
    self-hosted models, whose price is unknown."""
    seconds: float = 0.0
    """Wall time."""
    replays: int = Field(default=0, ge=0)
    """Re-simulations run (controls and repeats of a flip included)."""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "Usage") -> "Usage":
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(**{name: getattr(self, name) + getattr(other, name) for name in Usage.model_fields})

    def __radd__(self, other: Any) -> "Usage":
        return self if other == 0 else NotImplemented  # sum(usages) starts from 0

    def rounded(self) -> "Usage":
        """USD to 10 and seconds to 6 decimals: what is stored and shown, free of float noise."""
        return self.model_copy(update={"usd": round(self.usd, 10), "seconds": round(self.seconds, 6)})


class Replay(_Partitioned):
    """One re-simulation of a run with an intervention, and what Omega said of it."""

    run_id: str
    framework: str
    benchmark: str
    intervention: Intervention | None = None
    """None for an exact replay of the unmodified run."""
    purpose: ReplayPurpose
    result_run_id: str | None = None
    success_before: bool | None = None
    success_after: bool | None = None
    cost: Usage = Field(default_factory=lambda: Usage(replays=1))
    """The re-simulation's cost (`replays` = 1): its live calls (`llm_calls`), the prefix calls served from the
    recording, tokens, USD and wall seconds."""
    divergence: str | None = None
    error: str | None = None
    created_at: datetime = Field(default_factory=utcnow)

    @property
    def flipped(self) -> bool:
        return (
            self.success_before is not None
            and self.success_after is not None
            and self.success_before != self.success_after
        )

    @property
    def id(self) -> str:
        intervention = None if self.intervention is None else self.intervention.model_dump()
        return content_id("rpl", self.run_id, self.purpose, intervention, self.result_run_id, self.error)


class Asked(_Model):
    """One analyzer / perturber call of a search: which prompt, the answer and, when it was rejected, why."""

    prompt_name: str
    answer: str
    problem: str | None = None
    call_id: str | None = None
    """The `llm_calls` row of the call (its full request and response), when it went through the gateway."""


class Evidence(_Model):
    """Why a label holds: the replays that prove it, the reason, the fix or corruption applied, and the
    analyzer's / perturber's transcript (not part of the annotation's id: re-asked samples differ)."""

    reason: str | None = None
    fix: str | None = None
    corruption: str | None = None
    replay_ids: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    transcript: list[Asked] = Field(default_factory=list)
    """Every analyzer / perturber call of the search, in order (`rootstep show` lists them)."""
    transcript_run_id: str | None = None
    """The gateway run that journaled those calls (`llm_calls.run_id`)."""

    def identity(self) -> dict[str, Any]:
        """What of the evidence names the annotation (its id): all but the transcript."""
        return self.model_dump(exclude={"transcript", "transcript_run_id"})


CutLimit = Literal["replays", "llm_calls", "live_calls", "tokens", "open_steps", "wall_clock"]
CUT_LIMIT_NAMES: dict[CutLimit, str] = {
    "replays": "the replay budget", "llm_calls": "the analyzer-call budget", "live_calls": "the live-call budget",
    "tokens": "the token budget", "open_steps": "a step left open (no label possible after it)",
    "wall_clock": "the outer wall clock"}
"""What each `CutLimit` is, in words (the pipeline's summary); every limit has one (tests/test_scheduler.py)."""


class SearchStats(_Model):
    """What a search did and the limit that cut it, if any (`Meter.stats`; `Annotation.search_stats`)."""

    replays: int = 0
    """Replays tried, controls apart."""
    control_replays: int = 0
    analyzer_calls: int = 0
    """Calls of the analyzer / perturber (re-asks included)."""
    live_calls: int = 0
    tokens: int = 0
    seconds: float = 0.0
    """Wall seconds since the scheduler admitted the search."""
    cut_by: CutLimit | None = None
    """The first limit that stopped the search from doing what it would have done next (None: it finished)."""
    cut_reason: str | None = None
    cut_stopped: str | None = None


class FlipProof(_Model):
    """How a flip was proven: the intervention's replays against control replays of the step unchanged."""

    flips: int
    trials: int
    control_flips: int
    control_trials: int
    controls_replayed: list[str] = Field(default_factory=list)
    controls_proven_identical: int = 0
    """Controls not replayed because the provider answers the same request the same way (`proven_identical_because`)."""
    proven_identical_because: str | None = None
    repeat_replays: list[str] = Field(default_factory=list)
    difference: float
    interval: list[float]
    """Newcombe's interval on the difference of the two flip rates: [low, high]."""
    confidence: float
    """The posterior probability that the intervention raised the flip rate."""


class Edit(_Model):
    """How much a fix or a corruption changed its step."""

    chars_changed: int
    lines_changed: int
    share: float
    """Characters changed over the longer of the two texts."""
    growth: float
    """The new text's length over the old one's."""
    summary: str
    """What changed, briefly (`- old / + new` fragments)."""
    adds_answer: bool | None = None
    """Whether the new text states an answer the step did not (None: no task to tell by)."""


EarliestRule = Literal["established", "unproven", "by construction"]


class Annotation(_Partitioned):
    """A who/when label on a run; or, with status `unresolved`, the record that none was found; or, with
    status `verifier_suspect`, the finding that no agent erred and the verdict is the check's fault (the
    analyzer said so, or a fix that only re-formatted the answer turned the run into a success). Only
    `labelled` annotations can be labels."""

    run_id: str
    framework: str
    benchmark: str
    method: AnnotationMethod
    agent: str | None = None
    step: int | None = Field(default=None, ge=0)
    verified: bool = False
    """Counterfactual: a replay turned failure into success. Fault injection: into failure.
    Human: a person labelled it. Tracers' predictions are never verified."""
    status: AnnotationStatus = "labelled"
    annotator: str = ""
    """Who produced the label: a model name, a tracer method, or the human-labelled source."""
    evidence: Evidence = Field(default_factory=Evidence)
    cost: Usage = Field(default_factory=Usage)
    created_at: datetime = Field(default_factory=utcnow)
    # ---- what a search established (typed: the views and the flows read these, never `metadata`)
    steps: list[int] = Field(default_factory=list)
    """Every step of the label, `step` first; several for the joint fix of a repeated error."""
    confidence: float | None = None
    """The probability that the label's intervention raised the flip rate (`flip_check.confidence`)."""
    flip_check: FlipProof | None = None
    proof_replay_id: str | None = None
    """The replay that flipped the run (a fixed failure, or a corrupted success)."""
    edit: Edit | None = None
    """How much the fix or the corruption changed its step."""
    earliest: EarliestRule | None = None
    """Whether every earlier agent step was tried or judged correct (`established`), not (`unproven`), or
    nothing before it can matter (`by construction`: an injected fault)."""
    answer_leaks: int = 0
    """Fixes refused because they handed over the reference answer."""
    fixed_turn: int | None = None
    """A multi-turn run's label whose fix got the run past the user turn it failed at (this turn, 0-based): the
    replay stopped after that turn (`Adapter.replay(until_turn=...)`, the default of the searches) or failed later,
    at another turn, on another error. The decisive error of the run's first failure. None when the fix turned the
    whole run into a success (and on every other kind of run)."""
    search_stats: SearchStats | None = None
    recheck_of: str | None = None
    """The label this annotation re-did from scratch (`rootstep annotate --recheck`); it is never a label itself."""
    recheck_agrees: bool | None = None
    """Whether the re-check found the same (agent, step) as `recheck_of`."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """What else the search kept (attempted and declined steps, calls, the injection's points, ...)."""

    @property
    def multi_step(self) -> bool:
        return len(self.steps) > 1

    @model_validator(mode="after")
    def _labelled_has_who_and_when(self) -> "Annotation":
        if self.status == "labelled" and (self.agent is None or self.step is None):
            raise ValueError("a labelled annotation needs both agent and step")
        if self.status != "labelled" and self.verified:
            raise ValueError(f"an {self.status} annotation cannot be verified: only a label can")
        return self

    @property
    def id(self) -> str:
        return content_id(
            "ann",
            self.run_id,
            self.method,
            self.annotator,
            self.agent,
            self.step,
            self.status,
            self.evidence.identity(),
        )


ReplayProvenance.model_rebuild()
Trajectory.model_rebuild()
