"""Degenerate generations: a small model that writes the same block over and over until its token limit.

The 0.5B agents do it (seen on the main job: the same two lines of an AG2 coder's answer repeated to the
1,024-token limit in three of the six calls of one replay, 281 s of a 2-core machine). Nothing after the
second copy changes what the answer means, and every further copy costs a token's decoding. `LoopGuard`
watches an answer as it is generated and says when its end has become such a loop: a block of up to
`MAX_PERIOD` characters repeated back to back at least `MIN_COPIES` times over at least `MIN_SPAN`
characters. The answer is then cut there, as a token limit would have cut it (finish reason `length`):
what is kept is exactly what the model wrote, a prefix of the answer it would have finished.

A loop whose copies differ (a counter that goes up) is not one: only exact repetition is cut.
"""

from __future__ import annotations

MIN_COPIES = 4
"""Back-to-back copies of a block before its repetition counts as a loop (three identical lines in a row
happen in real code; four of a long block do not)."""
MIN_SPAN = 240
"""Characters the copies must cover together: short repeated runs (a row of `=`, `print()` four times)
are text, not a loop."""
MAX_PERIOD = 1500
"""The longest block looked for (about 400 tokens). A 0.5B answer on MATH-500 cycled through a 705-character
"contradiction, re-evaluate" paragraph to its 4,096-token limit."""


def loop_period(text: str, *, min_copies: int = MIN_COPIES, min_span: int = MIN_SPAN,
                max_period: int = MAX_PERIOD) -> int | None:
    """The length of the shortest block that `text` ends by repeating (at least `min_copies` copies back to
    back, covering at least `min_span` characters), or None when its end is not such a loop. The copies may
    start anywhere in the block: a loop is periodic whatever its phase."""
    n = len(text)
    for period in range(1, min(max_period, n // min_copies) + 1):
        if text[n - 1] != text[n - 1 - period]:
            continue
        block = text[n - period:]
        copies = 1
        while (copies + 1) * period <= n and text[n - (copies + 1) * period:n - copies * period] == block:
            copies += 1
            if copies >= min_copies and copies * period >= min_span:
                return period
    return None


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
