"""`rootstep evaluate`, `rootstep attribute`, `rootstep tracer train|models` and `rootstep export training`
(registered by rootstep/cli.py)."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer

from rootstep.gateway import DEFAULT_MODEL, DEFAULT_SCORER_MODEL
from rootstep.options import WarehouseOption, listed, one_of

tracer_app = typer.Typer(help="Train and list the learned failure tracer (no LLM needed).", no_args_is_help=True)


def tracer_names() -> list[str]:
    """The registered tracers (built in, plugins, `@tracer` functions), read when a command runs."""
    from ._methods import TRACERS

    return TRACERS.names()


def MethodOption(default: str) -> Any:
    """`--method/-m`: any registered tracer; an unknown name is a usage error listing them."""
    return typer.Option(default, "--method", "-m", metavar="METHOD", callback=one_of(tracer_names),
                        autocompletion=tracer_names,
                        help=f"Attribution method, a registered tracer: {listed(tracer_names)} (docs/tracers.md; "
                             "a plugin's too).")


class Format(str, Enum):
    sft = "sft"
    grpo = "grpo"


def _pct(value: object) -> str:
    return "∅" if value is None else f"{100 * value:.2f}" if isinstance(value, float) else str(value)


ACCURACY_COLUMNS = ["n", "parsed", "agent_acc", "step_acc", "step_acc_pm1", "step_acc_pm3", "mean_step_distance",
                    "random_agent_acc", "random_step_acc", "const_step_acc", "const_steps", "const_agent_acc",
                    "majority_agent_acc"]
HEADERS = {"random_agent_acc": "rand agent", "random_step_acc": "rand step", "const_step_acc": "const step",
           "const_steps": "(which)", "const_agent_acc": "its agent", "majority_agent_acc": "freq agent",
           "mean_step_distance": "mean dist", "step_acc_pm1": "step ±1", "step_acc_pm3": "step ±3",
           "agent_acc": "agent", "step_acc": "step"}


def print_accuracy(console: Any, rows: list[dict[str, Any]], keys: tuple[str, ...], title: str) -> None:
    """The accuracy table: the method's figures, then the baselines on the same runs and folds."""
    from rich.table import Table

    table = Table(title=title, header_style="bold cyan")
    columns = [*keys, *ACCURACY_COLUMNS]
    for column in columns:
        table.add_column(HEADERS.get(column, column), justify="left" if column in keys else "right")
    for row in rows:
        cells = []
        for c in columns:
            value = row.get(c)
            if c in ("n", "const_steps") or c in keys:
                cells.append("∅" if value is None else str(value))
            elif c == "mean_step_distance":
                cells.append("∅" if value is None else f"{value:.2f}")
            else:
                cells.append(_pct(value))
        table.add_row(*cells)
    console.print(table)


def print_published(console: Any, benchmarks: list[str]) -> None:
    """The Who&When paper's GPT-4o figures for the benchmarks that have them."""
    from rich.table import Table

    from ._baselines import WHOWHEN_SOURCE, published_rows

    shown = [b for b in benchmarks if published_rows(b)]
    if not shown:
        return
    table = Table(title="published figures (%)", header_style="bold magenta")
    for column in ("benchmark", "method", "ground truth", "agent", "step"):
        table.add_column(column, justify="right" if column in ("agent", "step") else "left")
    for benchmark in shown:
        for r in published_rows(benchmark):
            table.add_row(benchmark, str(r["method"]), str(r["ground_truth"]), f"{r['agent_acc']:.2f}", f"{r['step_acc']:.2f}")
    console.print(table)
    console.print(f"source: {WHOWHEN_SOURCE}", highlight=False)


def evaluate_cmd(
    method: str = MethodOption("all_at_once"),
    model: Optional[str] = typer.Option(None, "--model", help=f"LLM of the LLM methods (default {DEFAULT_MODEL}) / local "
                                        f"scoring model of confidence (default {DEFAULT_SCORER_MODEL})."),
    subset: Optional[str] = typer.Option(None, help="algorithm-generated, hand-crafted, or any benchmark name."),
    framework: Optional[str] = typer.Option(None, help="Only runs of this framework."),
    ground_truth: bool = typer.Option(True, "--ground-truth/--no-ground-truth", help="Show the correct answer to the method."),
    limit: Optional[int] = typer.Option(None, help="Evaluate at most this many labelled runs."),
    concurrency: int = typer.Option(1, help="Runs attributed at once."),
    api_base: Optional[str] = typer.Option(None, help="Send the calls to this OpenAI-compatible endpoint (e.g. the gateway)."),
    max_prompt_chars: int = typer.Option(60_000, help="Step contents are shortened evenly to fit this many characters."),
    max_tokens: int = typer.Option(512, help="Longest answer asked of the model per call."),
    folds: int = typer.Option(10, min=1, help="Task-grouped folds: learned's cross-validation and the baselines'."),
    seed: int = typer.Option(0, help="Changes which tasks share a fold."),
    by: str = typer.Option("benchmark", help="Group the table by: benchmark, framework, or both (benchmark,framework)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Also write a PNG of accuracy by method and the decisive-step distribution."),
    unlabelled: bool = typer.Option(False, "--unlabelled", help="Also attribute runs with no label that did not succeed "
                                                                 "(imported traces, fresh failures): stored, not scored."),
    where: str = typer.Option("true", help="SQL condition over the `runs` view restricting the runs attributed."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """Attribute every labelled run with a method, store the predictions (method=tracer), print accuracy.

    The learned method is cross-validated by task (each run predicted by a model that never saw its task).
    Every table carries the baselines on the same runs and folds: random, the constant step chosen on the
    other folds (and its agent), the most frequent agent; Who&When subsets also get the paper's figures.
    """
    from rootstep import progress_bar
    from rootstep.options import console, fail, open_warehouse

    from ._evaluate import evaluate
    from ._methods import default_model

    wh = open_warehouse(warehouse)
    model = model or default_model(method)
    keys = tuple(k.strip() for k in by.split(",") if k.strip())
    if not keys or any(k not in ("benchmark", "framework") for k in keys):
        fail(f"--by: {by!r} must name benchmark and/or framework")
    try:
        with progress_bar() as bar:
            result = evaluate(
                wh, method, model, with_ground_truth=ground_truth, subset=subset, framework=framework, limit=limit,
                concurrency=concurrency, api_base=api_base, max_prompt_chars=max_prompt_chars, max_tokens=max_tokens,
                folds=folds, seed=seed, progress=bar, unlabelled=unlabelled, where=where,
            )
    except ValueError as exc:
        fail(str(exc))
    if result.unlabelled:
        _print_unlabelled(console, result)
    if not result.scored:
        if result.unlabelled:
            return
        fail("no labelled runs match; import some first (rootstep import whowhen ../shared/data/whowhen)"
             + ("" if unlabelled else ", or attribute unlabelled runs (imported traces) with --unlabelled"))
    print_accuracy(console, result.table(keys), keys, f"{result.annotator}: accuracy in % (exact step match)")
    console.print(f"baselines on the same runs, {result.folds} task-grouped fold(s): constant step and most frequent "
                  "agent chosen on the other folds" + (" (one fold: fitted on the runs themselves)" if result.folds == 1 else ""))
    speed = f" in {result.seconds:.1f} s ({1000 * result.seconds / result.predicted:.1f} ms per run)" if result.predicted else ""
    console.print(f"{result.predicted} new prediction(s){speed}, {result.resumed} already stored; "
                  f"annotator {result.annotator!r}", highlight=False)
    if result.errors:
        console.print(f"no prediction for {len(result.errors)} new run(s), for example: {result.errors[0]}", highlight=False)
    print_published(console, sorted({s.benchmark for s in result.scored}))
    if plot is not None:
        from ._plot import plot_evaluation

        console.print(f"plot written to {plot_evaluation(wh, plot)}")


def _print_unlabelled(console: Any, result: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{result.annotator}: runs without a label (stored, not scored)", header_style="bold cyan")
    for column in ("run", "framework", "benchmark", "agent", "step", "reason or refusal"):
        table.add_column(column)
    for p in result.unlabelled:
        why = p["reason"] if p["agent"] is not None else p["error"]
        table.add_row(p["run_id"], p["framework"], p["benchmark"], escape(p["agent"] or "∅"),
                      "∅" if p["step"] is None else str(p["step"]), escape((why or "")[:200]))
    console.print(table)


def attribute_cmd(
    source: str = typer.Argument(..., metavar="FILE_OR_RUN", help="A Who&When / plain-trace JSON file, or a run id (prefix) in the warehouse."),
    method: str = MethodOption("learned"),
    model: Optional[str] = typer.Option(None, "--model", help="LLM methods: the LLM (default: the offline local model); "
                                        "confidence: the local scoring model; learned: a model directory or id (default: the newest)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ground_truth: bool = typer.Option(True, "--ground-truth/--no-ground-truth", help="Let the method use the correct answer."),
    counterpart: Optional[str] = typer.Option(None, "--counterpart", help="divergence: a successful trace (file or run id) to compare with."),
    api_base: Optional[str] = typer.Option(None, help="LLM methods: send the calls to this OpenAI-compatible endpoint."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """Who made the decisive error, and when: agent, step and reason for one trace (exit 1: no prediction)."""
    from rootstep.options import console, fail, open_warehouse
    from rootstep.model import RootstepError

    from ._attribute import attribute

    opened: list[Any] = []

    def open_once() -> Any:
        if not opened:
            opened.append(open_warehouse(warehouse))
        return opened[0]

    options = {"api_base": api_base} if api_base else {}
    try:
        run_id, trajectory, a = attribute(source, method, open_once, model=model, with_ground_truth=ground_truth,
                                          counterpart=counterpart, **options)
    except RootstepError as exc:
        fail(str(exc))
    if json_out:
        out = {"source": source, "run_id": run_id, "method": a.method, "model": a.model, "agent_name": a.agent_name,
               "step_number": a.step_number, "reason": a.reason, "error": a.error, "notes": a.notes,
               "with_ground_truth": a.with_ground_truth, "llm_calls": a.cost.llm_calls, "seconds": round(a.cost.seconds, 4),
               "details": a.details}
        sys.stdout.write(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    else:
        console.print(f"[bold]{a.method}[/] ({a.model}) on {run_id or source}", highlight=False)
        if a.ok:
            console.print(f"agent:  [bold]{a.agent_name}[/]\nstep:   [bold]{a.step_number}[/]\nreason: {a.reason or ''}",
                          highlight=False)
        else:
            console.print(f"[yellow]no prediction:[/] {a.error}", highlight=False)
        for note in a.notes:
            console.print(f"note: {note}", highlight=False)
    if not a.ok:
        raise typer.Exit(1)


@tracer_app.command("train")
def train_cmd(
    ground_truth: bool = typer.Option(True, "--ground-truth/--no-ground-truth", help="Train the setting that sees the correct answer (or not)."),
    folds: int = typer.Option(10, min=2, help="Task-grouped folds of the cross-validation reported in the model card."),
    seed: int = typer.Option(0, help="Changes which tasks share a fold, and the model's random state."),
    text_dims: int = typer.Option(8, min=0, help="Size of the text component (0: step features only)."),
    where: str = typer.Option("true", help="SQL condition over the `runs` view: train on these labelled runs only."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """Fit the learned tracer on every verified label of the warehouse; save it with its run ids and a model card."""
    from rootstep.options import console, fail, open_warehouse

    from ._learned import train_model
    from ._methods import TracerError
    from ._scoring import score_by

    wh = open_warehouse(warehouse)
    try:
        model, report = train_model(wh, with_ground_truth=ground_truth, folds=folds, seed=seed, text_dims=text_dims,
                                    where=where)
    except TracerError as exc:
        fail(str(exc))
    t = model.manifest["training"]
    console.print(f"trained [bold]{model.model_id}[/] ({'with' if ground_truth else 'without'} ground truth) on "
                  f"{t['runs']} labelled runs of {t['tasks']} tasks ("
                  + ", ".join(f"{k} {v}" for k, v in t["label_methods"].items()) + f") in {t['fit_seconds']} s",
                  highlight=False)
    if report:
        print_accuracy(console, score_by(report["scored"], ("benchmark",)), ("benchmark",),
                       f"task-grouped {report['folds']}-fold cross-validation: accuracy in % (exact step match)")
        print_published(console, sorted(t["benchmarks"]))
    else:
        console.print("one task only: no task-grouped cross-validation possible")
    console.print(f"saved to {model.path} (model card: {model.path}/MODEL_CARD.md)", highlight=False)


@tracer_app.command("models")
def models_cmd(
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """The learned tracers saved under the warehouse, newest first."""
    from rich.table import Table

    from rootstep.options import console, open_warehouse

    from ._learned import list_models

    found = list_models(open_warehouse(warehouse))
    if not found:
        console.print("no learned model yet: `rootstep tracer train`")
        return
    table = Table(header_style="bold cyan")
    for column in ("model id", "created", "ground truth", "schema", "runs", "tasks", "cv step acc (all)", "path"):
        table.add_column(column)
    for m in found:
        rows = (m.get("cross_validation") or {}).get("by_benchmark") or []
        overall = next((r for r in rows if r.get("benchmark") == "all"), rows[0] if rows else {})
        table.add_row(str(m.get("model_id")), str(m.get("created_at", ""))[:19], "with" if m.get("with_ground_truth") else "without",
                      str(m.get("schema_version")), str((m.get("training") or {}).get("runs")),
                      str((m.get("training") or {}).get("tasks")), _pct(overall.get("step_acc")), str(m["path"]))
    console.print(table)


def export_training_cmd(
    out: Path = typer.Argument(..., help="Folder for train/test files."),
    format: Format = typer.Option(Format.sft, "--format", help="sft (chat targets) or grpo (prompts + reward ground truth)."),
    ground_truth: bool = typer.Option(False, "--ground-truth/--no-ground-truth", help="Show the correct answer in the prompt."),
    test_fraction: float = typer.Option(0.2, help="Share of TASKS (not runs) held out for test."),
    seed: int = typer.Option(0, help="Changes which tasks are held out."),
    max_prompt_chars: int = typer.Option(60_000, help="Step contents are shortened evenly to fit this many characters."),
    where: str = typer.Option("true", help="SQL condition over the `runs` view."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """Training data for a failure tracer from every labelled run, split by task."""
    from rootstep.options import console, fail, open_warehouse

    from ._training import export_training

    try:
        counts = export_training(
            open_warehouse(warehouse), out, format=format.value, with_ground_truth=ground_truth,
            test_fraction=test_fraction, seed=seed, max_prompt_chars=max_prompt_chars, where=where,
        )
    except ValueError as exc:
        fail(f"--test-fraction: {exc}")
    console.print(f"{format.value}: {counts['train']} train and {counts['test']} test examples in {out}")


COMMANDS = {"evaluate": evaluate_cmd, "attribute": attribute_cmd, "tracer": tracer_app,
            "export training": export_training_cmd}
"""Mounted on `rootstep` by `rootstep.cli` (a command path -> a command or a sub-app)."""
