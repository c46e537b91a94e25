"""The side-by-side view of a run and one of its replays: steps aligned by index, the identical prefix
collapsed, the intervention and the first divergence marked.

A replay re-simulates the run from step 0 with one step forced (a fix or a corruption). Steps before
the forced one are served from the recording, so they are normally identical; after it the run goes
live and may take a different course (more steps, fewer steps, other agents). Rows are aligned by
step index because that is what the replay preserves; a step present on one side only is shown
against an empty cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rootstep.model import Step, Trajectory


@dataclass(frozen=True)
class Row:
    index: int
    left: Step | None
    right: Step | None
    same: bool
    """Both sides hold the same step (agent, kind, role, content, tool calls, observation)."""
    forced: bool = False
    """The intervention's step: the right side is the forced fix or corruption."""
    divergence: bool = False
    """The first row where the two runs differ."""


@dataclass
class Alignment:
    prefix: list[Row] = field(default_factory=list)
    """The leading rows identical on both sides (collapsed in the page)."""
    rows: list[Row] = field(default_factory=list)
    """Every row after the identical prefix."""
    intervention_step: int | None = None

    @property
    def identical(self) -> bool:
        return not self.rows

    @property
    def changed(self) -> int:
        return sum(not r.same for r in self.rows)


def align(original: Trajectory, replayed: Trajectory, intervention_step: int | None = None) -> Alignment:
    """Align `original` and `replayed` by step index.

    The identical prefix ends at the first differing row or at the intervention step, whichever comes
    first (a forced step is always shown, even in the unlikely case that it equals the original).
    The divergence is the first differing row; it is usually the intervention step itself.
    """
    n = max(len(original.steps), len(replayed.steps))
    out = Alignment(intervention_step=intervention_step)
    diverged = False
    for i in range(n):
        left = original.steps[i] if i < len(original.steps) else None
        right = replayed.steps[i] if i < len(replayed.steps) else None
        same = left is not None and right is not None and left.replay_key() == right.replay_key()
        forced = intervention_step == i
        divergence = not same and not diverged
        diverged = diverged or not same
        row = Row(index=i, left=left, right=right, same=same, forced=forced, divergence=divergence)
        if same and not forced and not out.rows:
            out.prefix.append(row)
        else:
            out.rows.append(row)
    return out
