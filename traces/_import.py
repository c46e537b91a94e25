"""The one write path of every importer (Who&When, plain traces, observability-tool traces).

Every file is read and validated first; only then is anything written, runs before labels, through the
warehouse's atomic, idempotent writes. Without `skip_invalid` the first bad file raises its `InputError`
and nothing is written; with it the valid files are imported and the bad ones listed in the report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rootstep.model import Annotation, InputError, Trajectory
from rootstep.warehouse import Warehouse

Parsed = tuple[Trajectory, Annotation | None]


@dataclass
class ImportReport:
    runs_written: int = 0
    runs_skipped: int = 0
    labels_written: int = 0
    labels_skipped: int = 0
    invalid: list[tuple[str, InputError]] = field(default_factory=list)
    files: int = 0


def read_all(files: Sequence[Path], load: Callable[[Path], list[Parsed]], report: ImportReport,
             skip_invalid: bool = False, progress: Any = None) -> list[Parsed]:
    """`load` on every file; an `InputError` raises at once, or with `skip_invalid` is noted in `report`."""
    parsed: list[Parsed] = []
    if progress:
        progress.phase("reading", len(files))
    for path in files:
        try:
            parsed += load(path)
            report.files += 1
        except InputError as exc:
            if not skip_invalid:
                raise
            report.invalid.append((str(path), exc))
        if progress:
            progress.advance()
    return parsed


def store(parsed: Sequence[Parsed], warehouse: Warehouse, report: ImportReport, progress: Any = None) -> ImportReport:
    """Write the runs, then their labels; what is stored already is skipped (content-derived ids)."""
    if progress:
        progress.phase("writing runs", len(parsed))
    written = warehouse.write_trajectories([t for t, _ in parsed], progress=progress.advance if progress else None)
    report.runs_written, report.runs_skipped = written.written["runs"], written.skipped["runs"]
    labels = [a for _, a in parsed if a is not None]
    if labels:
        written = warehouse.write_annotations(labels)
        report.labels_written, report.labels_skipped = written.written["annotations"], written.skipped["annotations"]
    return report
