"""The `rootstep` command line.

Each stage that has commands of its own declares them in its `cli.py` (`COMMANDS`), mounted at the bottom of
this file (`STAGE_COMMANDS`).
Heavy libraries (litellm, prefect, docker) are imported inside commands so `rootstep --help` is fast.
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer
from typer.core import TyperGroup

from rootstep.gateway import DEFAULT_MODEL
from rootstep.options import WarehouseOption, console, err_console, fail, open_warehouse
from rootstep.model import RootstepError

app = typer.Typer(
    name="rootstep",
    help="Who/when failure annotation for LLM multi-agent trajectories.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


class _PathsFirst(TyperGroup):
    """`rootstep import PATH...`: a first argument that names no subcommand is the default command's (the
    hidden `paths`); `import traces` and `import whowhen` stay as its aliases."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]  # typer's own Context
        from rootstep.traces.cli import DEFAULT_IMPORT

        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [DEFAULT_IMPORT, *args]
        return super().parse_args(ctx, args)


import_app = typer.Typer(
    cls=_PathsFirst, no_args_is_help=True,
    help="Import runs and their labels: `rootstep import PATH... [--format FORMAT]` reads trace files of every "
         "registered format (OpenTelemetry, Phoenix, Langfuse, LangSmith, Inspect, smolagents, AG2, ATIF, Who&When; "
         "detected per file) into the warehouse; `rootstep import paths --help` lists its options.")
export_app = typer.Typer(help="Export the warehouse for other tools.", no_args_is_help=True)
app.add_typer(import_app, name="import")
app.add_typer(export_app, name="export")

EPHEMERAL_PREFECT_STARTUP_S = "180"
"""How long a command waits for its ephemeral Prefect server (Prefect's own default, 20 s, is too short on
a loaded machine: two 0.5B episodes and a replay on 2 cores made `annotate` fail with "Timed out while
attempting to connect to ephemeral Prefect API server"). A value set in the environment wins."""


def run_cli() -> None:
    """Entry point that turns rootstep's own errors into a one-line message and exit code 2 (`ExitCode.USAGE`)."""
    import os

    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", EPHEMERAL_PREFECT_STARTUP_S)
    try:
        app(standalone_mode=True)
    except RootstepError as exc:  # pragma: no cover - exercised through the console script
        fail(str(exc))


# ---------------------------------------------------------------------------------- export


@export_app.command("parquet")
def export_parquet_cmd(
    out: Path = typer.Argument(..., help="Folder to write one plain Parquet file per view into."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """Plain (unpartitioned) Parquet of every view: pandas, polars and `datasets` read them as they are."""
    from rootstep.warehouse.export import export_parquet

    wh = open_warehouse(warehouse)
    for view, n in export_parquet(wh, out).items():
        console.print(f"{view:12} {n:>9} rows -> {out / (view + '.parquet')}")


@export_app.command("jsonl")
def export_jsonl_cmd(
    out: Path = typer.Argument(..., help="JSONL file to write: one trajectory with its label per line."),
    where: str = typer.Option("true", help="SQL condition over the `runs` view selecting what to export."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """One JSON object per run: the trajectory, its verdict and its label (if any)."""
    from rootstep.warehouse.export import export_jsonl

    wh = open_warehouse(warehouse)
    n = export_jsonl(wh, out, where=where)
    console.print(f"wrote {n} runs to {out}")


# ---------------------------------------------------------------------------------- query


class OutputFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


@app.command("sql")
def sql_cmd(
    query: str = typer.Argument(..., help="A DuckDB query over runs, steps, llm_calls, replays, annotations, labels."),
    format: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, csv or json."),
    limit: int = typer.Option(200, help="Rows shown in table format (csv and json print all)."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """Run SQL against the warehouse's DuckDB views."""
    import duckdb

    from rootstep._render import print_arrow_table

    wh = open_warehouse(warehouse)
    try:
        result = wh.query(query)
    except duckdb.Error as exc:
        fail(f"SQL: {exc}")
    if format is OutputFormat.csv:
        import csv

        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.column_names)
        for row in result.to_pylist():
            writer.writerow(["" if v is None else v for v in row.values()])
    elif format is OutputFormat.json:
        sys.stdout.write(json.dumps(result.to_pylist(), default=str, ensure_ascii=False, indent=1) + "\n")
    else:
        print_arrow_table(console, result, limit=limit)


@app.command("show")
def show_cmd(
    run_id: str = typer.Argument(..., help="A run id, or an unambiguous prefix of one."),
    width: int = typer.Option(600, help="Characters of each step's content shown (0: all)."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """A readable trajectory with its labelled (decisive) step highlighted, its annotations and their replays
    (the fix or corruption that flipped it and its controls, and every correction tried before it)."""
    from rootstep._render import REPLAYS_OF_RUN, print_replays, print_trajectory

    wh = open_warehouse(warehouse)
    try:
        run_id = wh.resolve_run_id(run_id)
        trajectory = wh.trajectory(run_id)
    except RootstepError as exc:
        fail(str(exc))
    print_trajectory(console, run_id, trajectory, wh.label(run_id), wh.annotations(run_id), width=width)
    print_replays(console, wh.rows(REPLAYS_OF_RUN, [run_id]), width)


@app.command("run")
def run_cmd(
    framework: str = typer.Option("ag2", "--framework", "-f", help="A framework adapter (`rootstep frameworks`)."),
    system: Optional[Path] = typer.Option(None, "--system", help="Run your own program instead: a system file "
                                          "(docs/your-system.md); its image is built on first use."),
    benchmark: str = typer.Option("gsm8k", "--benchmark", "-b", help="A registered benchmark (`rootstep benchmark list`)."),
    limit: int = typer.Option(3, min=1, help="How many tasks (after shuffling with --seed)."),
    seed: int = typer.Option(0, help="Shuffle the benchmark with this seed before taking --limit tasks."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", "-m", help="The agents' model (any gateway model string)."),
    width: int = typer.Option(300, help="Characters of each step's content shown (0: all)."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """Run one framework on benchmark tasks now, store each run (steps, LLM calls, verdict) and show it.

    No Prefect and no cache: every task is run again (for scheduled, cached, resumable collection use
    `rootstep collect` / `rootstep pipeline`). Exit code 1 when an episode could not be run.
    """
    from rootstep.adapters import adapter_class
    from rootstep.adapters.base import AdapterError
    from rootstep.benchmarks import BenchmarkError, load_tasks
    from rootstep._render import print_trajectory
    from rootstep.flows import open_session
    from rootstep.flows.cli import check_frameworks, with_systems
    from rootstep.flows import perform
    from rootstep.flows.collect import CollectSpec

    if system is not None:
        framework = (with_systems(None, [str(system)]) or [""])[0]  # the system's name (a bad file has failed)
    check_frameworks([framework])
    try:
        tasks = load_tasks(benchmark, limit=limit, seed=seed)
    except (BenchmarkError, KeyError) as exc:
        fail(f"--benchmark {benchmark!r}: {exc}")
    kinds = adapter_class(framework).task_kinds
    wrong = sorted({t.kind for t in tasks} - set(kinds))
    if wrong:
        fail(f"--benchmark {benchmark!r} has {', '.join(wrong)} tasks; {framework} runs {', '.join(kinds)} tasks")
    errors = 0
    with open_session(warehouse) as session:
        for number, task in enumerate(tasks, 1):
            with err_console.status(f"[{number}/{len(tasks)}] {framework} on {task.benchmark}/{task.task_id} "
                                    f"with {model} ..."):
                try:
                    outcome = perform(CollectSpec(framework=framework, task=task, model=model), session)
                except AdapterError as exc:
                    errors += 1
                    err_console.print(f"[bold red]episode failed:[/] {task.benchmark}/{task.task_id}: {exc}",
                                      highlight=False, soft_wrap=True)
                    continue
            session.store(outcome)
            done, [trajectory] = outcome.row, outcome.runs
            print_trajectory(console, done.run_id, trajectory, None, [], width=width)
            err_console.print(f"[{number}/{len(tasks)}] stored {done.run_id} in {done.seconds:.1f} s "
                              f"({'success' if done.success else 'failure'}, {done.n_steps} steps)", highlight=False)
    if errors:
        raise typer.Exit(1)


@app.command("stats")
def stats_cmd(warehouse: Optional[str] = WarehouseOption) -> None:
    """Counts by framework, benchmark, outcome and label method."""
    from rootstep._render import print_stats

    print_stats(console, open_warehouse(warehouse))


@app.command("quality")
def quality_cmd(warehouse: Optional[str] = WarehouseOption) -> None:
    """Yield and precision of the annotation pipeline per framework x benchmark: runs, successes, failures,
    suspect verdicts, counterfactual labels, verifier-suspect and unresolved searches, injection attempts
    and flips, labels per 100 runs, live LLM calls and USD per verified label, and where labels sit."""
    from rootstep._render import print_quality

    if print_quality(console, open_warehouse(warehouse)) == 0:
        console.print("no collected runs yet: `rootstep pipeline` or `rootstep collect` first")


@app.command("vacuum")
def vacuum_cmd(warehouse: Optional[str] = WarehouseOption) -> None:
    """Remove what interrupted writes left behind (temporary files, uncommitted steps)."""
    removed = open_warehouse(warehouse).vacuum()
    console.print(", ".join(f"{k}: {v}" for k, v in removed.items()))


# ---------------------------------------------------------------------------------- stage sub-apps
STAGE_COMMANDS = ("rootstep.tracers.cli", "rootstep.traces.cli", "rootstep.gateway.cli", "rootstep.sandboxes.cli",
                  "rootstep.benchmarks.cli", "rootstep.adapters.cli", "rootstep.flows.cli", "rootstep.ui.cli")
"""The stages' command modules. Each declares `COMMANDS`: a command path (`"pipeline"`, `"export training"`)
-> the command function (with its options: `(function, {"hidden": True})`) or a typer sub-app."""


def mount(path: str, command: Any) -> None:
    """Mount one of a stage's `COMMANDS` under `rootstep` (a path's first word may be `import` or `export`)."""
    *group, name = path.split()
    parents = {(): app, ("import",): import_app, ("export",): export_app}
    if tuple(group) not in parents:
        raise ValueError(f"command path {path!r}: only `rootstep`, `rootstep import` and `rootstep export` take commands")
    command, options = command if isinstance(command, tuple) else (command, {})
    parent = parents[tuple(group)]
    if isinstance(command, typer.Typer):
        parent.add_typer(command, name=name, **options)
    else:
        parent.command(name, **options)(command)


def _mount_stage_commands() -> None:
    """Mount each stage's commands on `app`, one way: every `COMMANDS` entry of `STAGE_COMMANDS`."""
    import importlib

    for module in STAGE_COMMANDS:
        for path, command in importlib.import_module(module).COMMANDS.items():
            mount(path, command)


_mount_stage_commands()
