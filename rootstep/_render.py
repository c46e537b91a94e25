"""Terminal rendering of query results, trajectories and warehouse statistics."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from rootstep.model import Annotation, Trajectory
from rootstep.warehouse import Warehouse


def _cell(value: Any, width: int = 120) -> str:
    if value is None:
        return "∅"
    text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def print_arrow_table(console: Console, table: pa.Table, limit: int = 200, title: str | None = None) -> None:
    """`table` as a grid, or, when its columns do not fit the terminal side by side (`quality` on 80 columns
    cut every header to a few letters), one record per row: each column's name beside its value."""
    rows = table.slice(0, limit).to_pylist()
    out = Table(title=title, show_lines=False, header_style="bold cyan")
    for name in table.column_names:
        out.add_column(name, overflow="fold")
    for row in rows:
        out.add_row(*(escape(_cell(v)) for v in row.values()))
    if not rows or _fits(console, table.column_names, rows):
        console.print(out)
    else:
        if title:
            console.print(f"[italic]{escape(title)}[/]")
        for n, row in enumerate(rows, 1):
            record = Table(title=f"row {n}", show_header=False, title_justify="left", box=box.SIMPLE)
            record.add_column(style="bold cyan", no_wrap=True)
            record.add_column(overflow="fold")
            for name, value in row.items():
                record.add_row(escape(name), escape(_cell(value)))
            console.print(record)
    shown = min(limit, table.num_rows)
    console.print(f"[dim]{table.num_rows} row(s){'' if shown == table.num_rows else f', {shown} shown'}[/]")


def _fits(console: Console, columns: list[str], rows: list[dict[str, Any]]) -> bool:
    """Every column of a grid keeps its whole header and at least 12 characters of a value (or its widest value,
    when narrower) on `console`'s width: a cell border and padding take 3 characters per column."""
    need = 1
    for name in columns:
        widest = max(len(_cell(r[name])) for r in rows)
        need += 3 + max(len(name), min(widest, 12))
    return need <= console.width


_KIND_STYLE = {"agent": "green", "tool": "blue", "environment": "magenta", "human": "yellow"}


def _tool_call_text(call: Any, width: int) -> str:
    """`name(arguments)` of a tool call in the OpenAI form or the plain {name, arguments} one."""
    if not isinstance(call, dict):
        return _cell(str(call), width or 10**9)
    inner = call.get("function")
    function: dict[str, Any] = inner if isinstance(inner, dict) else call
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return _cell(f"{function.get('name', '?')}({arguments})", width or 10**9)


def print_trajectory(
    console: Console,
    run_id: str,
    trajectory: Trajectory,
    label: Annotation | None,
    annotations: list[Annotation],
    width: int = 600,
) -> None:
    t = trajectory
    outcome = "unknown" if t.success is None else "success" if t.success else "failure"
    header = Table.grid(padding=(0, 2))
    for key, value in [
        ("run", run_id),
        ("framework / benchmark", f"{t.framework} / {t.benchmark}"),
        ("task", t.task_id),
        ("outcome", outcome),
        ("model", t.model or "∅"),
        ("source", t.source or "∅"),
        ("question", _cell(t.question, 400)),
        ("ground truth", _cell(t.ground_truth, 200)),
        ("final answer", _cell(t.final_answer, 200)),
        *([("imported trace", f"{trace.get('format')} {trace.get('trace_id') or ''}".strip())] if (trace := t.metadata.get("trace")) else []),
        *([("content", t.metadata.get("content_note", "not captured"))] if t.metadata.get("content_captured") is False else []),
        *_recording_rows(t),
    ]:
        header.add_row(f"[bold]{key}[/]", escape(str(value)))
    suspect = (t.verdict.details or {}).get("suspect") if t.verdict is not None and not t.verdict.success else None
    if suspect:
        header.add_row("[bold yellow]suspect verdict[/]", escape(str(suspect)))
    console.print(Panel(header, title="trajectory", border_style="cyan"))
    for step in t.steps:
        content = step.content if width == 0 else _cell(step.content, width)
        decisive = label is not None and label.step == step.index
        title = f"step {step.index} · {escape(step.agent)} · {step.kind}"
        if step.role and step.role != step.agent:
            title += f" · {escape(step.role)}"
        if step.metadata.get("source_id"):
            title += f" · {escape(str(step.metadata['source_id']))}"
        if decisive and label is not None:
            title = f"★ DECISIVE ERROR ({label.method}) ★ " + title
        body = escape(content) or ("" if step.tool_calls else "[dim](empty)[/]")
        for call in step.tool_calls:
            body += ("\n" if body else "") + "[dim]tool call:[/] " + escape(_tool_call_text(call, width))
        if step.observation:
            body += "\n[dim]observation:[/] " + escape(_cell(step.observation, width or 10**9))
        if decisive and label is not None and label.evidence.reason:
            body += f"\n\n[bold red]reason:[/] {escape(label.evidence.reason)}"
        if decisive and label is not None and label.fixed_turn is not None:
            body += (f"\n[bold red]first failure:[/] the fix got the run past user turn {label.fixed_turn}, where it "
                     "failed (the replay stops there, or fails at a later turn on another error)")
        console.print(
            Panel(
                body,
                title=title,
                title_align="left",
                border_style="bold red" if decisive else _KIND_STYLE.get(step.kind, "white"),
            )
        )
    if annotations:
        table = Table(title="annotations", header_style="bold cyan")
        for column in ("method", "agent", "step", "verified", "status", "annotator", "replays", "llm calls", "usd"):
            table.add_column(column)
        for a in annotations:
            table.add_row(
                a.method,
                escape(a.agent or "∅"),
                "∅" if a.step is None else str(a.step),
                "yes" if a.verified else "no",
                a.status,
                escape(a.annotator),
                str(a.cost.replays),
                str(a.cost.llm_calls),
                f"{a.cost.usd:.4f}",
            )
        console.print(table)
        for a in annotations:
            if a.status == "verifier_suspect":
                console.print(f"[bold yellow]no agent error ({a.method}, {escape(a.annotator)}):[/] "
                              f"{escape(a.evidence.reason or '')}")
        for a in annotations:
            if a.evidence.transcript:
                _print_transcript(console, a, width)
    else:
        console.print("[dim]no annotations[/]")


REPLAYS_OF_RUN = """
    SELECT purpose, intervention_kind AS kind, intervention_step AS step, intervention_agent AS agent,
           success_before, success_after, result_run_id, live_calls, replayed_calls, duration_s,
           intervention_content AS content, divergence, error
    FROM replays WHERE run_id = ? ORDER BY created_at, id"""
"""The replays of one run, oldest first: the proof of its label (the flipping fix or corruption and its controls)
and every correction tried before it."""


def print_replays(console: Console, replays: list[dict[str, Any]], width: int) -> None:
    """Each replay of a run: what was changed at which step, and what the verifier said before and after."""
    if not replays:
        console.print("[dim]no replays[/]")
        return

    def outcome(r: dict[str, Any]) -> str:
        if r["error"] or r["divergence"]:
            return "error" if r["error"] else "diverged"
        said = {True: "success", False: "failure", None: "?"}
        flipped = r["success_after"] is not None and r["success_before"] is not None and r["success_after"] != r["success_before"]
        return f"{said[r['success_before']]} → {said[r['success_after']]}" + (" [bold](flip)[/]" if flipped else "")

    table = Table(title="replays (the proof: a fix or corruption that flips the run, and its controls)",
                  header_style="bold cyan", show_lines=True)
    for column in ("#", "kind", "step", "outcome", "calls", "changed to"):
        table.add_column(column, overflow="fold")
    for n, r in enumerate(replays):
        kind = r["kind"] or "exact"
        step = "∅" if r["step"] is None else f"{r['step']} ({escape(r['agent'] or '?')})"
        content = (r["content"] or r["error"] or r["divergence"] or "").strip()
        table.add_row(str(n), escape(f"{r['purpose']} {kind}"), step, outcome(r),
                      f"{r['live_calls'] or 0} live, {r['replayed_calls'] or 0} replayed",
                      escape(content if width == 0 else _cell(content, min(width, 200))))
    console.print(table)


def _recording_rows(t: Trajectory) -> list[tuple[str, str]]:
    """Header rows for how the run was recorded and, for a replayed run, what it re-simulates."""
    rows: list[tuple[str, str]] = []
    if t.recording is not None:
        r = t.recording
        rows.append(("recording", f"gateway run {r.gateway_run_id} · image {r.image or '∅'} · "
                                  f"framework {r.framework_version or '∅'}"))
        if r.agent_models:
            rows.append(("agent models", ", ".join(f"{agent}: {model}" for agent, model in sorted(r.agent_models.items()))))
        if r.system is not None:
            rows.append(("system file", f"{r.system.name} ({r.system.file})"))
    if t.replay is not None:
        i = t.replay.intervention
        what = "exact replay" if i is None else f"{i.kind} at step {i.step}" + (f" ({i.agent})" if i.agent else "")
        rows.append(("replay", f"of {t.parent_run_id or t.replay.of_gateway_run_id} · {what} · "
                               f"{t.replay.live_calls} live / {t.replay.replayed_calls} replayed / "
                               f"{t.replay.forced_calls} forced call(s)"
                               + (" · diverged" if t.replay.divergence else "")))
    return rows


def _print_transcript(console: Console, a: Annotation, width: int) -> None:
    """The analyzer's / perturber's calls of one annotation, in order, each with why it was rejected."""
    table = Table(title=f"{a.method} transcript ({escape(a.annotator)}, gateway run {a.evidence.transcript_run_id or '∅'})",
                  header_style="bold cyan", show_lines=True)
    for column in ("#", "prompt", "answer", "problem", "call"):
        table.add_column(column, overflow="fold")
    for n, x in enumerate(a.evidence.transcript):
        answer = x.answer if width == 0 else _cell(x.answer, width)
        table.add_row(str(n), escape(x.prompt_name), escape(answer), escape(x.problem or "accepted"), escape(x.call_id or "∅"))
    console.print(table)


STATS_QUERIES = {
    "runs by framework and benchmark (a replay's re-simulated run counted apart)": """
        SELECT framework, benchmark, count(*) FILTER (WHERE parent_run_id IS NULL) AS runs,
               count(*) FILTER (WHERE parent_run_id IS NULL AND success) AS successes,
               count(*) FILTER (WHERE parent_run_id IS NULL AND NOT success) AS failures,
               count(*) FILTER (WHERE parent_run_id IS NULL AND success IS NULL) AS unverified,
               coalesce(sum(n_steps) FILTER (WHERE parent_run_id IS NULL), 0) AS steps,
               count(*) FILTER (WHERE parent_run_id IS NOT NULL) AS replayed_runs
        FROM runs GROUP BY ALL ORDER BY framework, benchmark""",
    "annotations by method": """
        SELECT method, status, verified, count(*) AS annotations, count(DISTINCT run_id) AS runs,
               round(avg(cost_llm_calls), 2) AS avg_llm_calls, round(sum(cost_usd), 4) AS usd
        FROM annotations GROUP BY ALL ORDER BY method, status, verified""",
    "labels (latest verified per run)": """
        SELECT framework, benchmark, method, count(*) AS labels,
               round(avg(step), 2) AS mean_step
        FROM labels GROUP BY ALL ORDER BY framework, benchmark, method""",
}


def print_stats(console: Console, warehouse: Warehouse) -> None:
    with warehouse.connect() as con:
        for title, sql in STATS_QUERIES.items():
            print_arrow_table(console, con.sql(sql).to_arrow_table(), title=title)
        totals = con.execute(
            "SELECT (SELECT count(*) FROM runs WHERE parent_run_id IS NULL) AS runs, (SELECT count(*) FROM steps WHERE run_id IN (SELECT id FROM runs WHERE parent_run_id IS NULL)) AS steps, "
            "(SELECT count(*) FROM llm_calls) AS llm_calls, (SELECT count(*) FROM replays) AS replays, "
            "(SELECT count(*) FROM labels) AS labels"
        ).fetchone() or (0, 0, 0, 0, 0)
    console.print(
        f"[bold]{warehouse.location}[/]: {totals[0]} runs, {totals[1]} steps, {totals[2]} LLM calls, "
        f"{totals[3]} replays, {totals[4]} labels"
    )


QUALITY_QUERIES = {
    "yield and cost per verified label (collected runs)": (
        "SELECT * EXCLUDE (not_causal, unproven_earliest, answer_leaks, multi_step_labels, confidence_high, "
        "confidence_medium, confidence_low, median_edit_share, rechecks, agreement) FROM quality"),
    "how far the labels are established (flips that are not labels, leaks, confidence, agreement on re-check)": (
        "SELECT framework, benchmark, counterfactual_labels, flips, not_causal, unproven_earliest, answer_leaks, "
        "multi_step_labels, confidence_high, confidence_medium, confidence_low, median_edit_share, rechecks, "
        "agreement, live_calls_per_label FROM quality"),
    "where the labels sit (step as a share of the run: 0 first, 1 last)": "SELECT * FROM label_positions",
    "searches a limit cut before they finished (cut_by: a work budget, or the outer wall clock), and what they had done": (
        "SELECT * FROM search_cuts"),
    "failures left out of counterfactual search: the verdict may be the verifier's misreading": (
        "SELECT framework, benchmark, count(*) AS runs, any_value(reason) AS example FROM verdict_suspect GROUP BY ALL "
        "ORDER BY ALL"),
}


def print_quality(console: Console, warehouse: Warehouse) -> int:
    """The `quality` and `label_positions` tables and the suspect verdicts; the number of collected runs
    (nothing is printed when there are none)."""
    with warehouse.connect() as con:
        runs = int(con.execute("SELECT coalesce(sum(runs), 0) FROM quality").fetchall()[0][0])
        if runs:
            for title, sql in QUALITY_QUERIES.items():
                print_arrow_table(console, con.sql(sql).to_arrow_table(), title=title)
    return runs
