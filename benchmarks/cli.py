"""`rootstep benchmark ...`: list benchmarks, show tasks, add a benchmark (a JSONL file + a verifier name).

Module-level imports stay light (the benchmark registry is imported inside the commands) so
`rootstep --help` is fast.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from rootstep.options import fail

app = typer.Typer(help="Benchmarks and their verifiers (the success function Omega).", no_args_is_help=True)
console = Console()


class VerifierName(str, Enum):
    code_tests = "code_tests"
    numeric = "numeric"
    math = "math"
    qa = "qa"
    exact = "exact"
    gaia = "gaia"




def _parse_slice(text: Optional[str]) -> tuple[Optional[int], Optional[int]]:
    if not text:
        return None, None
    parts = text.split(":")
    try:
        if len(parts) == 1:
            start = int(parts[0])
            return start, start + 1
        if len(parts) == 2:
            return (int(parts[0]) if parts[0] else None), (int(parts[1]) if parts[1] else None)
    except ValueError:
        pass
    fail(f"--slice {text!r}: expected START:STOP (either may be empty), e.g. 10:20")
    raise AssertionError  # unreachable


@app.command("list")
def list_cmd(as_json: bool = typer.Option(False, "--json", help="One JSON object per benchmark.")) -> None:
    """Each benchmark with its task count (or `missing` when its data file is absent), verifier and licence."""
    from rootstep.benchmarks import count_tasks, list_benchmarks
    from rootstep.model import RootstepError

    try:
        rows = [(info, count_tasks(info.name)) for info in list_benchmarks()]
    except RootstepError as exc:
        fail(str(exc))
    if as_json:
        for info, count in rows:
            print(json.dumps(info.model_dump(mode="json") | {"tasks": count, "available": count is not None}))
        return
    table = Table(show_lines=False)
    for column in ("name", "tasks", "kind", "verifier", "licence"):
        table.add_column(column, overflow="fold")
    for info, count in rows:
        table.add_row(
            info.name + ("" if info.builtin else " (user)"),
            str(count) if count is not None else "[yellow]missing[/]",
            info.kind,
            info.verifier,
            info.licence,
        )
    console.print(table)
    for info, count in rows:
        if count is None:
            where = ", ".join(str(p) for p in info.paths())
            console.print(f"[yellow]{info.name}[/]: data missing, expected at {where} ({info.source})", highlight=False)


@app.command("show")
def show_cmd(
    name: str = typer.Argument(..., help="Benchmark name (see `rootstep benchmark list`)."),
    limit: int = typer.Option(3, "--limit", "-n", help="How many tasks to show."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Shuffle with this seed first."),
    slice_: Optional[str] = typer.Option(None, "--slice", help="START:STOP of the (shuffled) task list."),
    width: int = typer.Option(400, help="Characters of each prompt shown (0: all)."),
    as_json: bool = typer.Option(False, "--json", help="Print the tasks as JSON lines (the full Task model)."),
) -> None:
    """A few tasks of a benchmark: id, prompt, ground truth, verifier and metadata keys."""
    from rootstep.benchmarks import load_tasks
    from rootstep.model import RootstepError

    start, stop = _parse_slice(slice_)
    try:
        tasks = load_tasks(name, limit=limit, seed=seed, start=start, stop=stop)
    except RootstepError as exc:
        fail(str(exc))
    if as_json:
        for task in tasks:
            print(task.model_dump_json())
        return
    for task in tasks:
        prompt = task.prompt if width == 0 or len(task.prompt) <= width else task.prompt[:width] + " [...]"
        console.rule(f"[bold]{task.benchmark} / {task.task_id}[/]  ({task.kind}, verifier {task.verifier})")
        console.print(prompt, markup=False, highlight=False)
        if task.ground_truth is not None:
            console.print(f"[green]ground truth:[/] {task.ground_truth}", highlight=False)
        console.print(f"[dim]metadata: {', '.join(sorted(task.metadata)) or '-'}[/]", highlight=False)
    if not tasks:
        console.print("no tasks selected")


@app.command("add")
def add_cmd(
    name: str = typer.Argument(..., help="Name of the new benchmark (letters, digits, . _ + -)."),
    file: Path = typer.Argument(..., help="JSONL file: one task per line (see docs/benchmarks.md)."),
    verifier: VerifierName = typer.Option(..., "--verifier", "-v", help="How answers are checked."),
    licence: str = typer.Option("unknown (user-supplied)", "--licence", help="The data's licence, shown by `list`."),
    force: bool = typer.Option(False, "--force", help="Replace a user benchmark of the same name."),
) -> None:
    """Validate FILE and copy it into the user registry (ROOTSTEP_BENCHMARKS_DIR, or
    <warehouse>/benchmarks, or ~/.local/share/rootstep/benchmarks)."""
    from rootstep.benchmarks import add_benchmark
    from rootstep.model import RootstepError

    try:
        info, count = add_benchmark(name, file, verifier.value, licence=licence, force=force)
    except RootstepError as exc:
        fail(f"{exc}\nNothing was added.")
    console.print(f"added benchmark {info.name!r}: {count} tasks, verifier {info.verifier}, stored at {info.files[0]}")


@app.command("verifiers")
def verifiers_cmd() -> None:
    """The registered verifiers and what each checks."""
    from rootstep.benchmarks import list_verifiers

    for info in list_verifiers():
        sandbox = " (runs code in a sandbox)" if info.needs_sandbox else ""
        console.print(f"[bold]{info.name}[/]{sandbox}: {info.summary}", highlight=False)


COMMANDS = {"benchmark": app}
"""Mounted on `rootstep` by `rootstep.cli` (a command path -> a command or a sub-app)."""
