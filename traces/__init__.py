"""The trace-import stage: runs from the tools people already use (and Who&When's logs), in; verdicts, out.

    from rootstep.traces import load_traces, import_traces, export_verdicts
    trajectories = load_traces("phoenix-export.json")              # format detected; or format="langfuse", ...
    report = import_traces(["traces/"], Warehouse(), skip_invalid=True)
    export_verdicts(Warehouse(), "verdicts.json", format="otlp")     # the attribution back to its source

Formats (`FORMATS`): OTLP/JSON with the GenAI semantic conventions or OpenInference attributes, Phoenix's
REST span list, Langfuse observations, LangSmith runs and the LangSmith SDK's post/patch batches, Inspect
AI eval logs (optional extra `inspect`), smolagents memory, AG2 runtime logging (SQLite) and GroupChat
messages, ATIF (subagent trajectories in sibling files followed), Who&When logs and plain traces (`whowhen`:
its labels are stored as human annotations). `FORMATS` is a `rootstep.model.Registry`: a
`TraceFormat` registered there (or by the entry point `rootstep.trace_formats`) is read, detected and
offered by `--format` like these. What an import could not keep is a warning per file
(`FileSummary.warnings`); `strict=True` makes it an error. One module per format, each a pure function from
a file to trajectories; `docs/traces.md` has the mapping table of each. Imported runs keep their source
ids (`Step.metadata["source_id"]`, `Trajectory.metadata["trace"]`) so a verdict can go back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._import import ImportReport, read_all, store
from rootstep.model import Annotation, Trajectory
from rootstep.warehouse import Warehouse
from ._build import CONTENT_NOT_CAPTURED
from .detect import FORMATS, TraceFormat, detect_format, discover, load_traces, read_traces
from .verdicts import VERDICT_FORMATS, export_verdicts, verdicts


@dataclass
class FileSummary:
    """What one file gave: its format, runs, steps, and the import's warnings (empty steps, unread messages...)."""

    path: str
    format: str
    runs: int
    steps: int
    warnings: list[str] = field(default_factory=list)
    included_in: str | None = None
    """Set when the file is an ATIF subagent trajectory already read through the root that references it."""
    same_as: str | None = None
    """Set when the file's runs are runs an earlier file of the import gave (the same spans from two exports)."""


@dataclass
class TraceImportReport(ImportReport):
    summaries: list[FileSummary] = field(default_factory=list)


def import_traces(
    paths: Sequence[str | Path],
    warehouse: Warehouse,
    format: str = "auto",
    framework: str | None = None,
    benchmark: str | None = None,
    skip_invalid: bool = False,
    progress: Any = None,
    strict: bool = False,
) -> TraceImportReport:
    """Read every trace file under `paths`, then store their runs (all or nothing, unless `skip_invalid`).

    An ATIF file that another file of the import follows as its subagent trajectory is not stored again as a
    run of its own (its summary names the file that includes it)."""
    report = TraceImportReport()
    loaded: dict[str, list[Trajectory]] = {}
    formats: dict[str, str] = {}

    def load(path: Path) -> list[tuple[Trajectory, Annotation | None]]:
        formats[str(path)], labelled = read_traces(path, format, framework, benchmark, strict=strict)
        loaded[str(path)] = [t for t, _label in labelled]
        return labelled

    parsed = read_all(discover(paths), load, report, skip_invalid=skip_invalid, progress=progress)
    included = {str(Path(sub).resolve()): file for file, ts in loaded.items() for t in ts
                for sub in (t.metadata.get("trace") or {}).get("subagent_files") or []}
    first_file: dict[str, str] = {}
    for file, trajectories in loaded.items():
        owner = included.get(str(Path(file).resolve()))
        earlier = {first_file.setdefault(t.id, file) for t in trajectories} - {file}
        report.summaries.append(FileSummary(
            path=file, format=formats[file],
            runs=0 if owner else len(trajectories), steps=sum(len(t.steps) for t in trajectories),
            warnings=[w for t in trajectories for w in t.metadata.get("import_warnings") or []], included_in=owner,
            same_as=min(earlier) if earlier else None))
    parsed = [(t, a) for t, a in parsed if not included.get(str(Path(t.source or "").resolve()))]
    store(parsed, warehouse, report, progress)
    return report


__all__ = ["CONTENT_NOT_CAPTURED", "FORMATS", "FileSummary", "ImportReport", "TraceFormat", "TraceImportReport",
           "VERDICT_FORMATS", "detect_format", "discover", "export_verdicts", "import_traces", "load_traces",
           "read_traces", "verdicts"]
