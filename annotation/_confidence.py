"""How sure a label is: flip counts with and without the intervention, and an interval on their difference.

A replay after an intervention is live and sampled, so one flip can be a re-roll (re-running a failed
multi-agent run unchanged flips it in 9-23 % of cases, DoVer, arXiv 2512.06749). A label's evidence
therefore holds two proportions: how often the run flipped with the fix (or corruption) forced, and how
often it flipped with the step left as recorded (the controls). Their difference is the effect of the
intervention; `Evidence` keeps Newcombe's hybrid Wilson score interval on it (method 10 of Newcombe 1998,
"Interval estimation for the difference between independent proportions"), and the label's `confidence`
is that interval's lower bound, clipped at 0: one fix and one control (the default) give a wide interval
and a confidence near 0; `--repeats 5` with 5/5 fixes and 0/5 controls gives 0.39.

A control that is proven identical to the recorded run (a deterministic provider served the same
requests: temperature 0 on the local model, a cached response) is not a sample: the control side is
then known exactly (0 flips, no uncertainty), and only the fix side's Wilson interval counts.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

Z95 = 1.959963984540054
BANDS = ((0.5, "high"), (0.2, "medium"), (0.0, "low"))
"""Confidence bands of `rootstep quality`: lower bound >= 0.5 high, >= 0.2 medium, else low."""


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion `successes / n`; (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} must be between 0 and n={n}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


class Effect(BaseModel):
    """Flip counts on both sides and the interval on the difference of their rates."""

    model_config = ConfigDict(extra="forbid")

    flips: int
    """Replays with the intervention that flipped the run (decided ones only)."""
    trials: int
    control_flips: int
    control_trials: int
    """Control replays decided; a control proven identical counts as a trial with no flip and no variance."""
    controls_exact: bool = False
    """Every control was proven identical to the recorded run (the control side is known, not sampled)."""
    difference: float
    low: float
    high: float

    @property
    def confidence(self) -> float:
        return round(max(0.0, self.low), 4)


def effect(flips: int, trials: int, control_flips: int, control_trials: int, *, controls_exact: bool = False,
           z: float = Z95) -> Effect:
    """The effect of an intervention: rate with it minus rate without it, with Newcombe's hybrid Wilson
    interval (`controls_exact`: the control rate is known exactly, so only the fix side's interval counts)."""
    p1 = flips / trials if trials else 0.0
    p2 = control_flips / control_trials if control_trials else 0.0
    l1, u1 = wilson(flips, trials, z)
    if controls_exact:
        l2 = u2 = p2
    else:
        l2, u2 = wilson(control_flips, control_trials, z)
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return Effect(flips=flips, trials=trials, control_flips=control_flips, control_trials=control_trials,
                  controls_exact=controls_exact, difference=round(d, 4), low=round(max(-1.0, low), 4),
                  high=round(min(1.0, high), 4))


def band(confidence: float | None) -> str | None:
    """`high`, `medium` or `low` (see `BANDS`); None without a confidence."""
    if confidence is None:
        return None
    return next(name for floor, name in BANDS if confidence >= floor)
