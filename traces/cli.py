"""`rootstep import PATH...` (with its aliases `import traces` and `import whowhen`), `rootstep export verdicts`
and `rootstep export whowhen` (registered by rootstep/cli.py)."""

from __future__ import annotations

from collections import Counter
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from rootstep.options import WarehouseOption, listed, one_of

from .verdicts import VERDICT_FORMATS


def format_names() -> list[str]:
    """The registered trace formats (built in, plugins, registered in code), read when the command runs."""
    from .detect import FORMATS

    return FORMATS.names()


FILES_LISTED = 20
"""An import of more files than this prints a count per format instead of a line per file (warnings still
name their file)."""

VerdictFormat = Enum("VerdictFormat", {name: name for name in VERDICT_FORMATS}, type=str)  # type: ignore[misc]  # the exporter's own list
_IMPORTED = "json_extract_string(metadata, '$.trace.format') IS NOT NULL"


def import_cmd(
    paths: list[Path] = typer.Argument(..., help="Trace files or folders of them (searched recursively)."),
    format: str = typer.Option("auto", "--format", metavar="FORMAT", callback=one_of(format_names, "auto"),
                               autocompletion=lambda: ["auto", *format_names()],
                               help=f"The files' format: auto (detected per file) or a registered trace format: "
                                    f"{listed(format_names)} (docs/traces.md; a plugin's too)."),
    framework: Optional[str] = typer.Option(None, help="Framework name for the runs (default: read from the trace)."),
    benchmark: Optional[str] = typer.Option(None, help="Benchmark name for the runs (default: imported-traces, "
                                                       "or the Inspect task, or the Who&When subset)."),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Import the valid files and report the rest."),
    strict: bool = typer.Option(False, "--strict", help="Refuse a file whose import would store a step empty, "
                                                        "keep a message as raw JSON or miss a subagent (default: warn)."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """Import runs from OpenTelemetry (GenAI, OpenInference), Phoenix, Langfuse, LangSmith, Inspect, smolagents,
    AG2, ATIF, and Who&When logs or plain traces (their labels become human annotations)."""
    from rich.markup import escape

    from rootstep import progress_bar
    from rootstep.options import console, err_console, fail, open_warehouse
    from rootstep.model import RootstepError

    from . import import_traces

    wh = open_warehouse(warehouse)
    try:
        with progress_bar() as bar:
            report = import_traces(paths, wh, format=format, framework=framework, benchmark=benchmark,
                                   skip_invalid=skip_invalid, progress=bar, strict=strict)
    except RootstepError as exc:
        fail(escape(f"{exc}\nNothing was written. Fix the file or pass --skip-invalid to import the rest"
                    + (" (or drop --strict to import it with warnings)." if strict else ".")))
    if len(report.summaries) > FILES_LISTED:
        by_format = Counter(s.format for s in report.summaries)
        console.print(f"{len(report.summaries)} files: " + ", ".join(f"{n} {name}" for name, n in sorted(by_format.items())),
                      highlight=False)
    for summary in report.summaries:
        if len(report.summaries) <= FILES_LISTED:
            where = f"included in {summary.included_in}" if summary.included_in else f"{summary.runs} run(s)" + (
                f" (the same as {summary.same_as}'s)" if summary.same_as else "")
            console.print(f"{escape(summary.path)}: {summary.format}, {where}, {summary.steps} step(s), "
                          f"{len(summary.warnings)} warning(s)", highlight=False, soft_wrap=True)
        for warning in summary.warnings:
            err_console.print(f"  [yellow]warning[/] {escape(summary.path)}: {escape(warning)}", highlight=False,
                              soft_wrap=True)
    console.print(f"imported {report.runs_written} runs and {report.labels_written} labels from {report.files} file(s) "
                  f"({report.runs_skipped} runs and {report.labels_skipped} labels were already in {wh.location})",
                  highlight=False)
    for _, error in report.invalid:
        err_console.print(f"[yellow]skipped[/] {escape(str(error))}", highlight=False, soft_wrap=True)
    if report.invalid:
        err_console.print(f"[yellow]{len(report.invalid)} invalid file(s) skipped[/]")


def import_whowhen_cmd(
    paths: list[Path] = typer.Argument(..., help="Who&When JSON files or folders of them (searched recursively)."),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Import the valid files and report the rest."),
    framework: Optional[str] = typer.Option(None, help="Framework for plain traces (Who&When files know theirs)."),
    benchmark: Optional[str] = typer.Option(None, help="Benchmark for plain traces (Who&When files know theirs)."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """Who&When logs (both subsets) or plain traces: `rootstep import --format whowhen PATH...`."""
    import_cmd(paths, "whowhen", framework, benchmark, skip_invalid, False, warehouse)


def export_whowhen_cmd(
    out: Path = typer.Argument(..., help="Folder to write Who&When JSON files into."),
    where: str = typer.Option("true", help="SQL condition over the `runs` view selecting what to export."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """Write runs with their labels as Who&When-format JSON (one file per run)."""
    from rootstep.options import console, open_warehouse

    from .whowhen import export_whowhen

    n = export_whowhen(open_warehouse(warehouse), out, where=where)
    console.print(f"wrote {n} Who&When files under {out}")


def export_verdicts_cmd(
    out: Path = typer.Argument(..., help="File to write (a folder for --format atif)."),
    format: VerdictFormat = typer.Option(..., "--format", help="otlp, langfuse, phoenix or atif."),
    where: str = typer.Option(_IMPORTED, help="SQL condition over the `runs` view (default: every imported trace)."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """Write who and when of every attributed run in the shape its source tool ingests."""
    from rootstep.options import console, open_warehouse

    from .verdicts import export_verdicts

    n = export_verdicts(open_warehouse(warehouse), out, format=format.value, where=where)
    console.print(f"wrote {n} verdict(s) as {format.value} to {out}", highlight=False)


DEFAULT_IMPORT = "paths"
"""The name of `import_cmd` under `rootstep import`: hidden, run when the first argument names no command."""


COMMANDS = {
    f"import {DEFAULT_IMPORT}": (import_cmd, {"hidden": True}),
    "import traces": (import_cmd, {"help": "The same as `rootstep import PATH...` (kept for scripts that name it)."}),
    "import whowhen": import_whowhen_cmd,
    "export verdicts": export_verdicts_cmd,
    "export whowhen": export_whowhen_cmd,
}
"""Mounted on `rootstep` by `rootstep.cli` (a command path -> a command, with its options, or a sub-app)."""
