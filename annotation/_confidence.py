"""How sure a label is: flip counts with and without the intervention, an interval on their difference, and
the probability that the intervention is what flipped the run.

A replay after an intervention is live and sampled, so one flip can be a re-roll (re-running a failed
multi-agent run unchanged flips it in 9-23 % of cases, DoVer, arXiv 2512.06749). A label's evidence
therefore holds two proportions: how often the run flipped with the fix (or corruption) forced, and how
often it flipped with the step left as recorded (the controls). Their difference is the effect of the
intervention; `Effect` keeps Newcombe's hybrid Wilson score interval on it (method 10 of Newcombe 1998,
"Interval estimation for the difference between independent proportions"): how large the effect is.

The label's `confidence` answers the question a user filters on, "did the intervention raise the flip
rate?": the posterior probability that the fix side's flip rate exceeds the control side's, each rate
with a uniform Beta(1, 1) prior (`probability_greater`, exact for integer counts). One fix that flipped and
one control that did not (the default) give 5/6 = 0.83; 2/2 and 0/2 give 0.95; 3/3 and 0/3 give 0.99; a
control that flipped as well gives 0.5 (no evidence either way). The interval's lower bound would say 0
for every default label (one fix and one control cannot bound a difference away from 0), which is true of
the effect's size and useless as a filter: it stays in the evidence (`low`, `high`).

A control that is proven identical to the recorded run (a deterministic provider served the same
requests: temperature 0 on a scripted model, a cached response) is not a sample: the control side is
then known exactly (0 flips, no uncertainty), only the fix side's Wilson interval bounds the difference,
and a flip proves the rate above it (confidence 1: a flip of the intervention's replay is not a re-roll of
the control's). No flip with the intervention gives confidence 0.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

Z95 = 1.959963984540054
BANDS = ((0.95, "high"), (0.8, "medium"), (0.0, "low"))
"""Confidence bands of `rootstep quality`: >= 0.95 high (2/2 fixes and 0/2 controls, or a proven control),
>= 0.8 medium (the default one fix and one control), else low."""


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def probability_greater(flips: int, trials: int, control_flips: int, control_trials: int) -> float:
    """P(p > q) when p ~ Beta(1 + flips, 1 + trials - flips) and q ~ Beta(1 + control_flips, 1 +
    control_trials - control_flips): the posterior probability, under uniform priors, that the flip rate
    with the intervention exceeds the rate without it. Exact (a finite sum over the first shape, which is
    an integer; Cook 2005, "Exact calculation of beta inequalities")."""
    for name, k, n in (("flips", flips, trials), ("control_flips", control_flips, control_trials)):
        if n < 0 or not 0 <= k <= n:
            raise ValueError(f"{name} {k} must be between 0 and its trials ({n})")
    a1, b1 = 1 + flips, 1 + trials - flips
    a2, b2 = 1 + control_flips, 1 + control_trials - control_flips
    total = sum(math.exp(_log_beta(a2 + i, b1 + b2) - math.log(b1 + i) - _log_beta(1 + i, b1) - _log_beta(a2, b2))
                for i in range(a1))
    return min(1.0, max(0.0, total))


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
    """Newcombe's interval on the difference of the two flip rates (how large the effect is)."""
    confidence: float
    """The posterior probability that the intervention raised the flip rate (`probability_greater`; with
    `controls_exact`, the probability that the fix side's rate exceeds the known control rate)."""


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
    if not flips:
        confidence = 0.0  # nothing flipped with the intervention: no evidence that it raises the rate
    elif controls_exact:
        confidence = 1.0 - _beta_cdf(p2, 1 + flips, 1 + trials - flips)
    else:
        confidence = probability_greater(flips, trials, control_flips, control_trials)
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return Effect(flips=flips, trials=trials, control_flips=control_flips, control_trials=control_trials,
                  controls_exact=controls_exact, difference=round(d, 4), low=round(max(-1.0, low), 4),
                  high=round(min(1.0, high), 4), confidence=round(confidence, 4))


def _beta_cdf(x: float, a: int, b: int) -> float:
    """The Beta(a, b) CDF at x for integer shapes: P(at least a successes in a + b - 1 trials of rate x)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    n = a + b - 1
    return sum(math.comb(n, j) * x ** j * (1 - x) ** (n - j) for j in range(a, n + 1))


def band(confidence: float | None) -> str | None:
    """`high`, `medium` or `low` (see `BANDS`); None without a confidence."""
    if confidence is None:
        return None
    return next(name for floor, name in BANDS if confidence >= floor)
