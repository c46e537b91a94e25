"""What one label may cost, and the meter that says when a search must stop.

A `Budget` bounds the work spent on ONE run (one counterfactual search or one injection): replays
tried, LLM calls of the analyzer or perturber (re-asks included), live calls made by replays, and the
tokens of those calls: the search's own work, whatever else the machine is doing. A wall clock stays
only as an outer safety limit (`max_seconds`), counted from when the scheduler admitted the search. A
`Meter` adds up what was spent (`Usage`, the one cost type), becomes the label's cost, and records which
limit cut the search (`Cut`), so that a search that did not finish says so and says what it had done.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from rootstep.model import CutLimit, SearchStats, Usage


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
    max_write_reasks: int = Field(default=0, ge=0)
    """Re-asks of a retake or a rewrite (writing out a fix the analyzer only described: `retake_step`,
    `rewrite_step`) after a refused answer, the problem stated. 0 by default: on the main job of 2026-11-29 and
    its re-run (8 searches) the 1.5B's 10 retake re-asks and 6 rewrite re-asks were all refused again, 16 of its
    73 calls, while 5 of its 6 re-asked diagnoses were accepted (`max_reasks`)."""
    max_candidates: int = Field(default=3, ge=1)
    """Analyzer-ranked diagnoses tried before scanning earlier steps; perturber proposals per injection."""
    max_live_calls: int | None = Field(default=None, ge=0)
    """Live LLM calls made by replays (recorded prefix calls are free and do not count)."""
    max_tokens: int | None = Field(default=None, ge=0)
    """Tokens (prompt and completion) of the search's LLM calls: the analyzer's / perturber's and the replays'
    live calls. None: unbounded (replays and calls bound the work)."""
    max_open_steps: int | None = Field(default=1, ge=1)
    """Agent steps the earlier-steps scan may leave open (no fix of the step could be tried: every one the
    analyzer wrote was refused, and it did not judge the step correct) before it stops. A label needs every agent
    step before it tried or judged correct, and the scan asks in step order, so after an open step no flip can be
    a label: the scan's further calls and replays could only find unproven flips (on a 2-core host the 1.5B's
    refused fixes of GSM8K test-474's steps 3, 4, 6 and 10 and the replays of steps 7 and 9 after them took most of
    its 40 calls and 20 minutes). None: scan every step, to collect those unproven flips too."""
    max_seconds: float | None = Field(default=None, gt=0)
    """The outer safety limit: wall seconds since the scheduler admitted the search. It measures the machine,
    not the search (a loaded machine makes every call slower), so it is a cap for runaway searches, not a
    budget; a search it cuts says so (`Cut.limit == "wall_clock"`)."""

    @classmethod
    def for_annotate(cls, **limits: Any) -> "Budget":
        """The budget of `rootstep annotate` and of the `pipeline` flow called from Python: replays and
        analyzer calls sized to each run (`for_run`), so that a label's earliest step can be established;
        one re-ask per invalid answer; three candidates (the analyzer's ranked diagnoses, or injection
        points spread over the run: one alone would be the answer step); no wall clock. `limits` override."""
        return cls(**{"max_reasks": 1, "max_candidates": 3, **limits})

    @classmethod
    def for_pipeline(cls, **limits: Any) -> "Budget":
        """The budget of `rootstep pipeline`: `for_annotate` (replays and calls sized to each run) with the outer
        wall clock `PIPELINE_WALL_CLOCK` per search, so that a runaway search cannot hold up the whole run (a
        search it stops never yields a label whose earlier steps were untried: `unproven_earliest`). `limits`
        override."""
        return cls.for_annotate(**{"max_seconds": PIPELINE_WALL_CLOCK, **limits})

    def for_run(self, agent_steps: int) -> "Budget":
        """This budget with `None` limits sized to a run of `agent_steps` agent steps: a replay for each
        ranked candidate, each agent step (the earlier-steps scan) and one joint fix; per step and candidate an
        analyzer call, one re-ask, and one more for writing out a fix the analyzer described (a retake or a
        rewrite). An earliest step can then always be established."""
        replays = self.max_replays if self.max_replays is not None else self.max_candidates + agent_steps + 1
        calls = self.max_llm_calls if self.max_llm_calls is not None else (
            (self.max_candidates + agent_steps) * (2 + min(self.max_reasks, 1)))
        return self.model_copy(update={"max_replays": replays, "max_llm_calls": calls})


PIPELINE_WALL_CLOCK = 3600.0
"""The pipeline's outer wall clock per search (seconds since admission). Sized on the offline models on 2
cores: a search of a 12-agent-step run that tries every step (about 16 replays of 60-90 s and 30 analyzer
calls of 20-60 s) fits; a search that takes longer is stuck, not working."""

class Cut(BaseModel):
    """The first limit that stopped a search from doing what it would have done next."""

    model_config = ConfigDict(extra="forbid")

    limit: CutLimit
    reason: str
    """The limit and what had been spent (`replay budget of 9 spent`)."""
    stopped: str = ""
    """What it stopped (`ranked search`, `earlier scan before step 5`, ...)."""


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
    cut: Cut | None = None
    """The first limit that stopped something (`stop`), or None: the search did all it would have done."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """Held while a replay's cost is added (a control may be replayed beside a fix, in another thread)."""

    def add_replay(self, cost: Usage, control: bool) -> None:
        """Count one replay and what it cost (`control`: a control replay, not held against `max_replays`)."""
        with self.lock:
            if control:
                self.control_replays += 1
            self.replayed += cost

    @property
    def replays(self) -> int:
        """Replays tried, controls apart (held against `max_replays`)."""
        return self.replayed.replays - self.control_replays

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started

    @property
    def tokens(self) -> int:
        """Tokens of the search's LLM calls (the analyzer's / perturber's and the replays' live calls)."""
        return (self.asked.prompt_tokens + self.asked.completion_tokens
                + self.replayed.prompt_tokens + self.replayed.completion_tokens)

    def _common(self) -> tuple[CutLimit, str] | None:
        b = self.budget
        if b.max_live_calls is not None and self.replayed.llm_calls >= b.max_live_calls:
            return "live_calls", f"live-call budget of {b.max_live_calls} spent ({self.replayed.llm_calls} live calls)"
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            return "tokens", f"token budget of {b.max_tokens} spent ({self.tokens} tokens)"
        if b.max_seconds is not None and self.seconds >= b.max_seconds:
            return "wall_clock", (f"cut by the outer wall clock of {b.max_seconds:g}s (not a work budget: "
                                  f"{self.replays} replays and {self.asked.llm_calls} analyzer calls done)")
        return None

    def _first(self, found: tuple[CutLimit, str] | None, what: str) -> str | None:
        if found is None:
            return None
        if self.cut is None and what:
            self.cut = Cut(limit=found[0], reason=found[1], stopped=what)
        return found[1]

    def cannot_ask(self, what: str = "") -> str | None:
        """Why no further analyzer/perturber call may be made, or None. `what`: what the limit stops, when it
        does (the first such limit is the search's `cut`)."""
        if self.budget.max_llm_calls is not None and self.asked.llm_calls >= self.budget.max_llm_calls:
            return self._first(("llm_calls", f"LLM-call budget of {self.budget.max_llm_calls} spent"), what)
        return self._first(self._common(), what)

    def cannot_pass(self, open_steps: Sequence[int], what: str = "") -> str | None:
        """Why the scan should stop after leaving `open_steps` open, or None (`max_open_steps`; `what`: see
        `cannot_ask`)."""
        most = self.budget.max_open_steps
        if most is not None and len(open_steps) >= most:
            steps = ", ".join(map(str, open_steps))
            return self._first(("open_steps", f"step{'s' if len(open_steps) > 1 else ''} {steps} left open (no fix could "
                                "be tried, not judged correct): no later flip could be a label"), what)
        return None

    def cannot_replay(self, what: str = "") -> str | None:
        """Why no further replay may be tried, or None (`what`: see `cannot_ask`)."""
        if self.budget.max_replays is not None and self.replays >= self.budget.max_replays:
            return self._first(("replays", f"replay budget of {self.budget.max_replays} spent"), what)
        return self._first(self._common(), what)

    def stats(self) -> SearchStats:
        """What the search did: replays (controls apart), control replays, analyzer / perturber calls, the
        replays' live calls, tokens, wall seconds since admission, and the cut."""
        cut = self.cut
        return SearchStats(replays=self.replays, control_replays=self.control_replays,
                           analyzer_calls=self.asked.llm_calls, live_calls=self.replayed.llm_calls, tokens=self.tokens,
                           seconds=round(self.seconds, 1), cut_by=None if cut is None else cut.limit,
                           cut_reason=None if cut is None else cut.reason, cut_stopped=None if cut is None else cut.stopped)

    def cost(self) -> Usage:
        """The label's cost: LLM calls = analyzer/perturber calls + replays' live calls; the wall time so far."""
        spent = self.asked + self.replayed
        return spent.model_copy(update={"seconds": self.seconds}).rounded()
