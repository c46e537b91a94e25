"""Replays over a framework adapter: the `ReplayFn` the annotation searches call to try a fix or a corruption.

The searches themselves (`rootstep.annotation`) are pure: they take any `ReplayFn`. This is the one that runs
the framework again in its sandbox against the gateway's recording, which is flows' business.
"""

from __future__ import annotations

import time
from typing import Any

from rootstep.adapters.base import AdapterError
from rootstep.annotation import ReplayFn, ReplayOutcome
from rootstep.model import Intervention, Trajectory, Usage, Verdict


def adapter_replay(adapter: Any, trajectory: Trajectory, *, retries: int = 1, **replay_kwargs: Any) -> ReplayFn:
    """A `ReplayFn` over a framework adapter (`rootstep.adapters.base.Adapter.replay`).

    The adapter re-runs the framework against a gateway replay run and returns the new trajectory with
    its verdict and `replay` (`ReplayProvenance`: the gateway's live/replayed counts and divergence). A replay
    whose steps before the intervention differ from the recording is reported as a divergence: its
    verdict is not evidence about the intervention. An infrastructure failure (`AdapterError`: the
    container or the Docker daemon failed) is retried `retries` times before it is reported.
    """
    def replay(intervention: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        started = time.perf_counter()
        for attempt in range(retries + 1):
            try:
                result = adapter.replay(trajectory, intervention, **replay_kwargs)
                break
            except AdapterError:
                if attempt == retries:
                    raise
        info = result.replay
        divergence = None if info is None else info.divergence
        if divergence is None and info is not None and not info.prefix_identical:
            divergence = f"the steps before step {intervention.step} differ from the recorded run"
        verdict = result.verdict
        error = None if verdict is not None else (result.metadata.get("error") or "the replayed run has no verdict")
        cost = Usage(llm_calls=0 if info is None else info.live_calls,
                     replayed_calls=0 if info is None else info.replayed_calls,
                     prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens, usd=result.cost_usd,
                     seconds=time.perf_counter() - started, replays=1)
        outcome = ReplayOutcome(cost=cost, divergence=divergence, error=None if error is None else str(error)[:2000])
        return result, verdict if verdict is not None else Verdict(success=False), outcome

    return replay
