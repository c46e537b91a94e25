"""Progress reporting that library code can call without knowing about rich."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class ProgressSink(Protocol):
    """What long-running library functions report to: phases with a total, and steps done."""

    def phase(self, description: str, total: int) -> None: ...

    def advance(self, n: int = 1) -> None: ...


class _RichSink:
    def __init__(self, progress: Progress):
        self._progress = progress
        self._task: TaskID | None = None

    def phase(self, description: str, total: int) -> None:
        if self._task is not None:
            self._progress.update(self._task, completed=self._progress.tasks[-1].total)
        self._task = self._progress.add_task(description, total=total)

    def advance(self, n: int = 1) -> None:
        if self._task is not None:
            self._progress.advance(self._task, n)


@contextmanager
def progress_bar(console: Console | None = None) -> Iterator[ProgressSink]:
    """A rich progress display (on stderr by default) that phases and steps are reported to."""
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console or Console(stderr=True),
        transient=False,
    )
    with progress:
        yield _RichSink(progress)
