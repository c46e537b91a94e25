"""What one label may cost, and the meter that says when a search must stop.

A `Budget` bounds the work spent on ONE run (one counterfactual search or one injection): replays
tried, LLM calls of the analyzer or perturber (re-asks included), live calls made by replays, and wall
time. A `Meter` adds up what was spent (`Usage`, the one cost type) and becomes the label's cost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from rootstep.warehouse import Usage


class Budget(BaseModel):
    """Limits for one counterfactual search or one fault injection; `None` means unbounded.

    A search stops as soon as one limit is reached; what it found up to then stands, but a flip whose
    earlier agent steps were not all tested or cleared is `unproven_earliest`, not a label.
    """

    model_config = ConfigDict(extra="forbid")

    max_replays: int | None = Field(default=None, ge=0)
    """Re-simulations tried (each is one `Replay` row; controls and repeats of a flip are not counted here).
    None: what the run's length needs (`for_run`): every agent step once, the ranked candidates, a joint fix."""
    max_llm_calls: int | None = Field(default=None, ge=0)
    """Calls to the analyzer / perturber, re-asks included. None: sized to the run (`for_run`)."""
    max_reasks: int = Field(default=2, ge=0)
    """Re-asks after an invalid answer, per proposal (the problem is stated in the re-ask)."""
    max_candidates: int = Field(default=3, ge=1)
    """Analyzer-ranked diagnoses tried before scanning earlier steps; perturber proposals per injection."""
    max_live_calls: int | None = Field(default=None, ge=0)
    """Live LLM calls made by replays (recorded prefix calls are free and do not count)."""
    max_seconds: float | None = Field(default=None, gt=0)
    """Wall time of the whole search."""

    @classmethod
    def for_annotate(cls, **limits: int | float | None) -> "Budget":
        """The budget of `rootstep annotate` and of the `pipeline` flow called from Python: replays and
        analyzer calls sized to each run (`for_run`), so that a label's earliest step can be established;
        one re-ask per invalid answer; three candidates (the analyzer's ranked diagnoses, or injection
        points spread over the run: one alone would be the answer step); no wall clock. `limits` override."""
        return cls(**{"max_reasks": 1, "max_candidates": 3, **limits})

    @classmethod
    def for_pipeline(cls, **limits: int | float | None) -> "Budget":
        """The budget of `rootstep pipeline`: `for_annotate` with a wall clock of 420 s per search, so one
        long search cannot hold up the whole run (a search stopped by it never yields a label whose earlier
        steps were untried: `unproven_earliest`). `limits` override."""
        return cls.for_annotate(**{"max_seconds": 420.0, **limits})

    def for_run(self, agent_steps: int) -> "Budget":
        """This budget with `None` limits sized to a run of `agent_steps` agent steps: a replay for each
        ranked candidate, each agent step (the earlier-steps scan) and one joint fix; an analyzer call per
        step and candidate plus one re-ask each. An earliest step can then always be established."""
        replays = self.max_replays if self.max_replays is not None else self.max_candidates + agent_steps + 1
        calls = self.max_llm_calls if self.max_llm_calls is not None else (
            (self.max_candidates + agent_steps) * (1 + min(self.max_reasks, 1)))
        return self.model_copy(update={"max_replays": replays, "max_llm_calls": calls})


@dataclass
class Meter:
    """What a search has spent so far, against its budget."""

    budget: Budget
    asked: Usage = field(default_factory=Usage)
    """The analyzer's / perturber's calls (re-asks included)."""
    replayed: Usage = field(default_factory=Usage)
    """The re-simulations: their live calls (`llm_calls`), recorded calls, tokens, USD, and `replays`."""
    control_replays: int = 0
    """Control replays (the step unchanged): the proof of a flip, not a search move; not held against
    `max_replays`, but counted in the label's cost."""
    started: float = field(default_factory=time.perf_counter)

    @property
    def replays(self) -> int:
        """Replays tried, controls apart (held against `max_replays`)."""
        return self.replayed.replays - self.control_replays

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started

    def _common(self) -> str | None:
        b = self.budget
        if b.max_seconds is not None and self.seconds >= b.max_seconds:
            return f"time budget of {b.max_seconds:g}s spent"
        if b.max_live_calls is not None and self.replayed.llm_calls >= b.max_live_calls:
            return f"live-call budget of {b.max_live_calls} spent ({self.replayed.llm_calls} live calls)"
        return None

    def cannot_ask(self) -> str | None:
        """Why no further analyzer/perturber call may be made, or None."""
        if self.budget.max_llm_calls is not None and self.asked.llm_calls >= self.budget.max_llm_calls:
            return f"LLM-call budget of {self.budget.max_llm_calls} spent"
        return self._common()

    def cannot_replay(self) -> str | None:
        """Why no further replay may be tried, or None."""
        if self.budget.max_replays is not None and self.replays >= self.budget.max_replays:
            return f"replay budget of {self.budget.max_replays} spent"
        return self._common()

    def cost(self) -> Usage:
        """The label's cost: LLM calls = analyzer/perturber calls + replays' live calls; the wall time so far."""
        spent = self.asked + self.replayed
        return spent.model_copy(update={"seconds": self.seconds}).rounded()
