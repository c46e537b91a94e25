"""Degenerate text: a small model that writes the same block over and over until its token limit.

The 0.5B agents do it (seen on the main job: the same two lines of an AG2 coder's answer repeated to the
1,024-token limit in three of the six calls of one replay), and the 1.5B analyzer copies such a step when
asked to rewrite it. `loop_period` says whether a text ends in such a loop: a block of up to `MAX_PERIOD`
characters repeated back to back at least `MIN_COPIES` times over at least `MIN_SPAN` characters. The
gateway's `LoopGuard` cuts a generation there; `looping_tail` finds where the loop began, so a run can be
shown with the loop collapsed (`collapse_loop`) and a step that loops to its end is known for what it is.

A loop whose copies differ (a counter that goes up) is not one: only exact repetition counts.
"""

from __future__ import annotations

from typing import NamedTuple

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


class LoopingTail(NamedTuple):
    """Where a text's closing loop begins (`start`: the first character from which the text is periodic to
    its end) and the length of its block (`period`)."""

    start: int
    period: int

    def copies(self, length: int) -> float:
        """How many blocks the loop spans in a text of `length` characters."""
        return (length - self.start) / self.period


def looping_tail(text: str) -> LoopingTail | None:
    """The loop `text` ends in (`loop_period`), traced back to where it began, or None."""
    period = loop_period(text)
    if period is None:
        return None
    start = len(text) - period
    while start > 0 and text[start - 1] == text[start - 1 + period]:
        start -= 1
    return LoopingTail(start, period)


def collapse_loop(text: str) -> str:
    """`text` with its closing loop shown once and counted: the text up to the end of the loop's first
    block, then a marker saying how many more times the block came back to the end. A text that does not
    end in a loop is returned as it is."""
    tail = looping_tail(text)
    if tail is None:
        return text
    kept = text[:tail.start + tail.period]
    more = tail.copies(len(text)) - 1
    return (f"{kept}\n[... the same {tail.period}-character block again, {more:.0f} more times back to back, to the "
            "end of the message: it loops until its token limit]")
