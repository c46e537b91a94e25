"""The `pipeline` flow: collect -> split -> counterfactual + inject -> warehouse.

    from rootstep.flows.pipeline import pipeline
    report = pipeline()                              # the default slice, offline model
    print(report.render())

`split` is not a step that copies anything: it is the warehouse's `successes` / `failures` views
(collected runs only). Its two subflows, `collect` and `annotate`, share one session (warehouse, gateway,
limits). With `runner=Runner(kind="dask"|"ray")` without an address, one local cluster is started for the
pipeline and both subflows submit their tasks to it. Collection and both
annotation stages skip what the warehouse already holds, so
running the pipeline again only does what is missing (and a crashed pipeline resumes).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from prefect import flow
from pydantic import BaseModel, Field

from rootstep.model import CUT_LIMIT_NAMES, Task

from rootstep.annotation import Budget, InjectionMode
from ._runner import Runner, start_cluster
from ._defaults import DEFAULTS
from ._searches import AnnotatedRun, Causality
from ._session import Limits, Session, open_session
from .annotate import Stage
from .annotate import annotate as annotate_flow
from .collect import CollectedRun, CollectReport
from .collect import collect as collect_flow

DEFAULT_BUDGET = Budget.for_annotate()
"""Replays and analyzer calls sized to each run's length (`Budget.for_annotate`); the command line adds a wall
clock per search (`Budget.for_pipeline`, `--max-seconds`)."""

EXPLORE_SQL = {
    "labels with their cost": (
        "SELECT framework, benchmark, method, agent, step, cost_replays, cost_llm_calls, cost_tokens, cost_usd, "
        "round(cost_seconds, 1) AS seconds FROM labels ORDER BY created_at DESC LIMIT 20"),
    "the decisive step of each label": (
        "SELECT l.run_id, l.method, s.step, s.agent, left(s.content, 80) AS content FROM labels l "
        "JOIN steps s ON s.run_id = l.run_id AND s.step = l.step LIMIT 20"),
    "unresolved failures": "SELECT run_id, framework, benchmark, annotator, cost_replays, cost_llm_calls, notes FROM unresolved",
    "failures left out: the verifier may have misread a right answer": (
        "SELECT run_id, framework, benchmark, reason FROM verdict_suspect"),
    "yield, cost per label and where labels sit (also: rootstep quality)": "SELECT * FROM quality",
    "outcomes by framework": (
        "SELECT framework, benchmark, count(*) FILTER (success) AS successes, count(*) FILTER (NOT success) AS failures "
        "FROM runs WHERE parent_run_id IS NULL GROUP BY ALL ORDER BY ALL"),
    "every replay tried": (
        "SELECT purpose, run_id, intervention_step, success_before, success_after, live_calls, replayed_calls "
        "FROM replays ORDER BY created_at DESC LIMIT 20"),
}


class LeftOut(BaseModel):
    """A failure left out of the counterfactual search as a suspect verdict (the `verdict_suspect` view)."""

    run_id: str
    framework: str
    task_id: str
    reason: str


class PipelineReport(BaseModel):
    collected: list[CollectedRun] = Field(default_factory=list)
    annotated: list[AnnotatedRun] = Field(default_factory=list)
    warehouse: str = ""
    seconds: float = 0.0
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    left_out: list[LeftOut] = Field(default_factory=list)
    """Failures of this collection the counterfactual stage did not search: their verdict is suspect (the
    verifier may have misread a right answer), so the queue leaves them out and no annotation records them."""

    def counts(self) -> dict[str, Any]:
        """Collection counts, annotation outcomes by status (re-checks apart: they re-do a label) and re-checks."""
        c = CollectReport(runs=self.collected).counts()
        first: Counter[str] = Counter(a.status for a in self.annotated if a.recheck_of is None)
        c["annotated"] = sum(first.values())
        for key, status in (("labelled", "labelled"), ("unresolved", "unresolved"),
                            ("verifier_suspect", "verifier_suspect"), ("verdict_suspect", "verdict_suspect"),
                            ("not_flipped", "not_flipped"), ("not_causal", "not_causal"),
                            ("unproven_earliest", "unproven_earliest"), ("annotation_errors", "error")):
            c[key] = first[status]
        c["verdict_suspect"] += len(self.left_out)
        for limit in CUT_LIMIT_NAMES:
            c[f"cut_by_{limit}"] = sum(1 for a in self.annotated if a.recheck_of is None and a.stats.cut_by == limit)
        rechecks = [a for a in self.annotated if a.recheck_of is not None]
        c["rechecks"] = len(rechecks)
        c["rechecks_agreeing"] = sum(1 for a in rechecks if a.agrees)
        return c

    def cut_lines(self) -> list[str]:
        """One line per limit that cut searches: how many, and what they had done (replays, analyzer calls,
        seconds), so that a search that did not finish is never mistaken for one that found nothing."""
        lines = []
        cut = [a for a in self.annotated if a.recheck_of is None and a.stats.cut_by is not None]
        for limit, name in CUT_LIMIT_NAMES.items():
            these = [a for a in cut if a.stats.cut_by == limit]
            if not these:
                continue
            done = "; ".join(f"{a.method} {a.framework}/{a.task_id} ({a.status}): {a.stats.replays} replays, "
                             f"{a.stats.analyzer_calls} analyzer calls, {a.stats.seconds:.0f} s" for a in these)
            lines.append(f"cut by {name}: {len(these)} search(es): {done}")
        return lines

    def error_lines(self) -> list[str]:
        """One line per episode that could not be collected, or search that failed, with its error: a count alone
        sends the user to the logs."""
        lines = [f"collect error {r.framework}/{r.benchmark}/{r.task_id}: {r.error}" for r in self.collected if r.error]
        lines += [f"annotation error {a.method} {a.framework}/{a.task_id}: {a.error}"
                  for a in self.annotated if a.status == "error" and a.error]
        return lines

    def render(self) -> str:
        """The table of what was annotated and the SQL to explore it (plain text)."""
        head = ["method", "framework", "benchmark", "task", "status", "agent", "step", "replays", "llm calls", "seconds",
                "cut by", "re-check"]
        rows = [[a.method, a.framework, a.benchmark, a.task_id, a.status, a.agent or "-",
                 "-" if a.step is None else str(a.step), str(a.cost.replays), str(a.cost.llm_calls), f"{a.cost.seconds:.1f}",
                 a.stats.cut_by or "-", "" if a.recheck_of is None else ("agrees" if a.agrees else "lands elsewhere")]
                for a in self.annotated]
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        c = self.counts()
        lines = [
            f"collected {c['runs']} runs ({c['new']} new, {c['cached']} already stored, {c['errors']} errors): "
            f"{c['successes']} successes, {c['failures']} failures",
            f"annotated {c['annotated']}: {c['labelled']} labelled, {c['unresolved']} unresolved, "
            f"{c['verifier_suspect']} with no agent error (verifier suspect), {c['verdict_suspect']} failures "
            f"left out as suspect verdicts, {c['not_flipped']} successes not flipped, {c['not_causal']} flips their "
            f"control showed too (not causal), {c['unproven_earliest']} with the earliest step unproven, "
            f"{c['annotation_errors']} errors",
            *([f"re-checked {c['rechecks']} labels from scratch: {c['rechecks_agreeing']} found again at the same "
               "agent and step"] if c["rechecks"] else []),
            *self.cut_lines(),
            *(f"left out as a suspect verdict {o.framework}/{o.task_id} ({o.run_id}): {o.reason}; search it anyway: "
              f"rootstep annotate --run-id {o.run_id} --include-suspect" for o in self.left_out),
            *self.error_lines(),
            f"in {self.seconds:.1f} s (" + ", ".join(f"{k} {v:.1f} s" for k, v in self.stage_seconds.items()) + ")",
            "",
            fmt.format(*head),
            fmt.format(*("-" * w for w in widths)),
            *(fmt.format(*r) for r in rows),
            "",
            f"explore ({self.warehouse}): rootstep sql \"...\" or any DuckDB client on catalog.duckdb",
        ]
        for title, sql in EXPLORE_SQL.items():
            lines += [f"  -- {title}", f"  {sql};"]
        return "\n".join(lines)


def left_out(session: Session, run_ids: list[str]) -> list[LeftOut]:
    """The failures among `run_ids` whose verdict is suspect and that have no counterfactual annotation."""
    from rootstep.warehouse import suspect_left_out

    with session.lock:
        return [LeftOut.model_validate(r) for r in suspect_left_out(session.warehouse, run_ids)]


@flow(name="rootstep-pipeline", persist_result=False)
def pipeline(
    frameworks: list[str] | None = None,
    benchmarks: dict[str, int | None] | None = None,
    model: str = DEFAULTS.model,
    analyzer_model: str | None = None,
    perturber_model: str | None = None,
    agent_models: dict[str, str] | None = None,
    seed: int | None = 0,
    budget: Budget | None = None,
    inject_budget: Budget | None = None,
    counterfactual: bool = True,
    inject: bool = True,
    programmatic: bool = True,
    tasks: list[Task] | None = None,
    warehouse: str | None = None,
    limits: Limits | None = None,
    max_tokens: int | None = None,
    runner: Runner | None = None,
    include_suspect: bool = False,
    inject_mode: InjectionMode = "auto",
    causality: Causality | None = None,
    recheck: int = 0,
) -> PipelineReport:
    """Collect runs, split them, annotate failures (counterfactual) and successes (fault injection).

    Args:
        frameworks: adapters to run (default `DEFAULTS.frameworks`).
        benchmarks: benchmark name -> number of tasks (default `DEFAULTS.benchmarks`), shuffled with `seed`.
        model: the agents' model; `agent_models` per agent. `analyzer_model` defaults to `model`, or to
            the stronger offline model (`DEFAULTS.annotator_model`) when `model` is a local one;
            `perturber_model` defaults to the analyzer's.
        budget / inject_budget: per counterfactual search / per injection (default `DEFAULT_BUDGET`).
        counterfactual, inject: run that stage (the `annotate` flow runs them, side by side when neither
            annotator is the in-process model).
        tasks: collect these tasks instead of the benchmarks' (the benchmarks argument is then ignored).
        max_tokens: the least room per analyzer / perturber answer (None: sized to each run's longest
            step; a cut answer is re-asked with more room).
        include_suspect: also search failures whose verdict is suspect (`verdict_suspect` view).
        inject_mode: fault injection's mode (`auto`, `team_aware`, `persistent`, `one_shot`).
        causality: controls and repeats per flip, the least confidence a label keeps (`Causality`).
        recheck: after the annotation stages, re-annotate this many of the collected runs' labels from
            scratch (the `recheck` flow) and report how often (agent, step) agree.
        runner: where the tasks run: threads of this process (default), or a Dask / Ray cluster
            (`Runner(kind="dask", address=...)`; without an address a local one, `workers` processes).
    """
    started = time.perf_counter()
    frameworks = list(frameworks or DEFAULTS.frameworks)
    benchmarks = dict(DEFAULTS.benchmarks if benchmarks is None else benchmarks)
    budget = budget or DEFAULT_BUDGET
    analyzer_model = analyzer_model or DEFAULTS.annotator_for(model)
    perturber_model = perturber_model or analyzer_model
    report = PipelineReport()
    with open_session(warehouse, limits=limits) as session, start_cluster(runner) as runner:
        report.warehouse = session.warehouse.location
        clock = time.perf_counter()
        if tasks is None:
            from rootstep.benchmarks import load_tasks

            tasks = [t for name, n in benchmarks.items() for t in load_tasks(name, limit=n, seed=seed)]
        # one collect over every benchmark: the episodes of all of them share the concurrency limits
        collected = collect_flow(frameworks, tasks[0].benchmark if tasks else DEFAULTS.collect_benchmark, tasks=tasks,
                                 model=model, agent_models=agent_models, runner=runner, session=session)
        report.collected += collected.runs
        report.stage_seconds["collect"] = round(time.perf_counter() - clock, 3)
        stages: list[Stage] = []
        if counterfactual:
            stages.append("counterfactual")
        if inject:
            stages.append("inject")
        if stages or recheck:  # on the runs just collected
            annotated = annotate_flow(
                stages, analyzer_model, perturber_model, frameworks=frameworks,
                benchmarks=sorted({r.benchmark for r in report.collected}),
                run_ids=[r.run_id for r in report.collected if r.run_id], budget=budget, inject_budget=inject_budget,
                programmatic=programmatic, seed=seed or 0, max_tokens=max_tokens, runner=runner, session=session,
                include_suspect=include_suspect, inject_mode=inject_mode, causality=causality, recheck=recheck)
            report.annotated += annotated.runs
            report.stage_seconds.update(annotated.stage_seconds)
            if counterfactual and not include_suspect:
                report.left_out = left_out(session, [r.run_id for r in report.collected if r.run_id])
    report.seconds = round(time.perf_counter() - started, 3)
    print(report.render())
    return report

