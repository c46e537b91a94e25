"""Cutting a looping generation as it is made: `LoopGuard` watches an answer's text as it streams and says
once its end has become a loop (`rootstep.model.loop_period`). The answer is then cut there, as a token
limit would have cut it (finish reason `length`): what is kept is exactly what the model wrote, a prefix of
the answer it would have finished, and every further copy's decoding is saved.
"""

from __future__ import annotations

from rootstep.model import MAX_PERIOD, MIN_COPIES, MIN_SPAN, loop_period


class LoopGuard:
    """Feed it an answer's text as it is generated; `feed` says True once the answer's end is a loop."""

    def __init__(self, *, min_copies: int = MIN_COPIES, min_span: int = MIN_SPAN, max_period: int = MAX_PERIOD):
        self.text = ""
        self.period: int | None = None
        self._limits = {"min_copies": min_copies, "min_span": min_span, "max_period": max_period}

    def feed(self, delta: str) -> bool:
        if self.period is None and delta:
            self.text += delta
            self.period = loop_period(self.text, **self._limits)
        return self.period is not None
