"""`rootstep pipeline | collect | annotate | deploy | backfill`: the Prefect flows from the command line.

Module-level imports stay light: Prefect and the flows are imported inside the commands, so
`rootstep --help` does not pay for them.
"""

from __future__ import annotations

import json
import os
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

import typer
from rich.console import Console

from rootstep.annotation import Budget
from rootstep.options import WarehouseOption, fail, option_group

from ._defaults import DEFAULTS
from ._session import Limits

if TYPE_CHECKING:
    from .annotate import Stage

console = Console()
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # before Prefect is imported: this runs offline

WarehouseOpt = WarehouseOption


def FrameworkOpt(help: str = f"Framework adapter; repeat for several (default {', '.join(DEFAULTS.frameworks)}).") -> Any:
    """`--framework / -f`, repeatable, the same on every command (`help` says what it does there)."""
    return typer.Option(None, "--framework", "-f", help=help)


SystemOpt = typer.Option(None, "--system", help="A system file: your own program run as a framework (docs/your-system.md); "
                         "repeat for several. Runs it in place of the default frameworks, beside any --framework.")
ModelOpt = typer.Option(DEFAULTS.model, "--model", "-m", help="The agents' model (any gateway model string).")
AnalyzerOpt = typer.Option(None, "--analyzer-model", help=f"The analyzer LLM (default: --model, or {DEFAULTS.annotator_model} "
                           "when --model is a local model).")
PerturberOpt = typer.Option(None, "--perturber-model", help="The perturber LLM (default: as --analyzer-model).")


class RunnerKind(str, Enum):
    thread = "thread"
    dask = "dask"
    ray = "ray"


def _runner(runner_kind: RunnerKind, dask_address: Optional[str], ray_address: Optional[str], workers: int,
            worker_setup: Optional[list[str]]) -> Any:
    """The flows' `Runner` from the command-line options (errors name the option)."""
    from pydantic import ValidationError

    from rootstep.flows._runner import Runner

    if dask_address and runner_kind is not RunnerKind.dask:
        fail(f"--dask-address is for --runner dask (got --runner {runner_kind.value})")
    if ray_address and runner_kind is not RunnerKind.ray:
        fail(f"--ray-address is for --runner ray (got --runner {runner_kind.value})")
    try:
        runner = Runner(kind=runner_kind.value, address=dask_address or ray_address, workers=workers,
                        setup=tuple(worker_setup or ()))
    except ValidationError as exc:
        fail("; ".join(f"--worker-setup: {e['msg']}" if e["loc"] and e["loc"][0] == "setup" else e["msg"]
                        for e in exc.errors()))
    return _run_flows(runner.require)  # before any flow starts: a missing package is said at once


runner_options = option_group("runner", {
    "runner_kind": (RunnerKind, typer.Option(
        RunnerKind.thread, "--runner", help="Where tasks run: threads of this process, or a Dask / Ray cluster "
                                            "(docs/pipeline.md).")),
    "dask_address": (Optional[str], typer.Option(
        None, "--dask-address", help="Scheduler of a running Dask cluster (tcp://host:8786); default: a local cluster.")),
    "ray_address": (Optional[str], typer.Option(
        None, "--ray-address", help="A running Ray cluster (ray://host:10001 or auto); default: a local Ray instance.")),
    "workers": (int, typer.Option(2, "--workers", min=1, help="Worker processes of the local cluster (no address given).")),
    "worker_setup": (Optional[list[str]], typer.Option(
        None, "--worker-setup", help="MODULE:FUNCTION run once in each worker process before its first task (for "
                                     "example registering scripted models); repeat for several.")),
}, build=_runner)
"""`--runner`, `--dask-address`, `--ray-address`, `--workers`, `--worker-setup`: the command receives the
checked `Runner` as its parameter `runner`."""


def _budget(preset: Budget, **limits: Any) -> Budget:
    """`preset` with the limits given on the command line (a bad value is a usage error naming the option)."""
    from pydantic import ValidationError

    try:
        return Budget.model_validate({**preset.model_dump(), **limits})
    except ValidationError as exc:
        fail("; ".join(f"--{str(e['loc'][0]).replace('_', '-')}: {e['msg']}" for e in exc.errors()))


def budget_options(preset: Budget) -> Any:
    """`--max-replays`, `--max-llm-calls`, `--max-search-tokens`, `--max-candidates`, `--max-open-steps`,
    `--max-seconds` with the defaults of `preset` (a `Budget` preset: one source for the library and the command
    line); the command receives the `Budget` as its parameter `budget`."""
    def build(max_search_tokens: Optional[int] = None, **limits: Any) -> Budget:
        return _budget(preset, max_tokens=max_search_tokens, **limits)

    return option_group("budget", {
        "max_replays": (Optional[int], typer.Option(
            preset.max_replays, "--max-replays", min=0, help="Replays per label (budget; controls apart). Default: "
            "what the run's length needs (every agent step, the ranked candidates and a joint fix).")),
        "max_llm_calls": (Optional[int], typer.Option(
            preset.max_llm_calls, "--max-llm-calls", min=0,
            help="Analyzer/perturber calls per label (budget). Default: sized to the run.")),
        "max_search_tokens": (Optional[int], typer.Option(
            preset.max_tokens, "--max-search-tokens", min=0,
            help="Tokens of a search's LLM calls (analyzer/perturber and the replays' live calls; budget). "
                 "Default: unbounded.")),
        "max_candidates": (int, typer.Option(
            preset.max_candidates, "--max-candidates", min=1, help="Analyzer-ranked diagnoses per failure; injection "
            "points per success (spread over the run's agents and steps, the answer step last).")),
        "max_open_steps": (int, typer.Option(
            preset.max_open_steps or 1, "--max-open-steps", min=1, help="Agent steps the earlier-steps scan may leave "
            "open (every fix refused, not judged correct) before it stops: after an open step no flip can be a label, "
            "so a larger value only finds unproven flips.")),
        "max_seconds": (Optional[float], typer.Option(
            preset.max_seconds, "--max-seconds", help="Outer wall clock per search, from when the scheduler admits it: "
            "a safety cap, not a budget (the work budgets above measure the search; this measures the machine). A "
            "search it cuts says so, and never yields a label whose earlier steps were not tried.")),
    }, build=build)


class StageChoice(str, Enum):
    """`rootstep annotate --method`: which of the annotate flow's stages run."""

    counterfactual = "counterfactual"
    inject = "inject"
    both = "both"

    def stages(self) -> "list[Stage]":
        if self is StageChoice.both:
            return ["counterfactual", "inject"]
        return ["counterfactual"] if self is StageChoice.counterfactual else ["inject"]


class InjectMode(str, Enum):
    auto = "auto"
    team_aware = "team_aware"
    persistent = "persistent"
    one_shot = "one_shot"


IncludeSuspectOpt = typer.Option(False, "--include-suspect",
                                 help="Also search failures whose verdict is suspect (the verifier may have misread a "
                                      "right answer; see the verdict_suspect view).")
InjectModeOpt = typer.Option(InjectMode.auto, "--inject-mode",
                             help="Fault injection: auto (team-aware, then persistent), team_aware, persistent, one_shot.")
_LIMITS = Limits.model_fields
EpisodeSecondsOpt = typer.Option(_LIMITS["episode_seconds"].default, "--episode-seconds", min=1,
                                 help="Wall clock of one framework episode (raise it for slow or hand-answered models).")
PerModelOpt = typer.Option(_LIMITS["per_model"].default, help="Concurrent episodes per model (local models: 1).")
SearchesOpt = typer.Option(None, "--searches", min=1,
                           help="Searches (counterfactual and injection) at once. Default: fitted to the machine "
                                "(one per core on the offline models, 4 with remote ones).")
SandboxesOpt = typer.Option(_LIMITS["sandboxes"].default, help="Concurrent Docker containers.")
LLMSecondsOpt = typer.Option(_LIMITS["llm_seconds"].default, "--llm-seconds", min=1,
                             help="Wall clock of one analyzer/perturber call (raise it for slow or hand-answered "
                                  "models: a cut call fails and is asked again).")
limits_options = option_group("limits", {
    "per_model": (int, PerModelOpt), "sandboxes": (int, SandboxesOpt), "episode_seconds": (float, EpisodeSecondsOpt),
    "searches": (Optional[int], SearchesOpt),
}, build=lambda **limits: Limits(**limits))
"""`--per-model`, `--sandboxes`, `--episode-seconds`, `--searches` (defaults: `Limits`'): the command receives
the `Limits` as its parameter `limits`."""
SliceOpt = typer.Option(None, "--benchmark", "-b",
                        help=f"NAME:COUNT; repeat for several (default {DEFAULTS.benchmark_help()}).")
"""The benchmark slice to collect (`_benchmarks` reads it)."""
MaxTokensOpt = typer.Option(None, "--max-tokens", min=16,
                            help="Least room per analyzer/perturber answer (default: sized to each run's longest step; "
                                 "a cut answer is re-asked with more).")


def check_frameworks(names: Optional[list[str]]) -> Optional[list[str]]:
    """`names` if each is a registered adapter; otherwise a usage error naming the known ones."""
    from rootstep.adapters import list_adapters

    known = list_adapters()
    for name in names or ():
        if name not in known:
            fail(f"--framework {name!r}: unknown framework; known: {', '.join(known)}")
    return names


def with_systems(framework: Optional[list[str]], system: Optional[Sequence[str | Path]], *,
                 build: bool = True) -> Optional[list[str]]:
    """`--framework` names plus the `--system` files' names (registered here and for every worker this
    process starts; each image built once, with progress); a bad system file is a usage error naming it."""
    from rich.markup import escape

    from rootstep.adapters import use_systems
    from rootstep.model import RootstepError

    if not system:
        return check_frameworks(framework)
    try:
        names = use_systems([str(p) for p in system])
    except RootstepError as exc:
        fail(escape(f"--system: {exc}"))
    if build:
        build_systems(names)
    return list(dict.fromkeys([*(check_frameworks(framework) or []), *names]))


def build_systems(names: list[str]) -> None:
    """Build the systems' images unless they exist (resolving their requirements once); a failure names the
    system file and field. Without a Docker daemon nothing is built (the episodes then say so)."""
    from rich.markup import escape

    from rootstep.adapters import adapter_class
    from rootstep.sandboxes import SandboxUnavailableError
    from rootstep.model import RootstepError

    try:
        from rootstep.sandboxes import docker_client

        client = docker_client()
    except SandboxUnavailableError:
        return
    from rootstep.sandboxes.cli import ConsoleReporter

    for name in names:
        cls = adapter_class(name)
        if cls().image_built():
            continue
        try:
            cls.build(client, report=ConsoleReporter(False))
        except (RootstepError, SandboxUnavailableError) as exc:
            fail(escape(f"--system {cls.system.path}: {exc}"))  # type: ignore[attr-defined]  # a system file's adapter


def _benchmark_name(name: str, option: str = "--benchmark") -> str:
    """`name` if it is a registered benchmark (built in or added); otherwise a usage error."""
    from rich.markup import escape

    from rootstep.benchmarks import BenchmarkError, get_benchmark

    try:
        get_benchmark(name)
    except BenchmarkError as exc:
        fail(escape(f"{option} {name!r}: {exc}"))
    return name


def _benchmarks(specs: Optional[list[str]]) -> Optional[dict[str, Optional[int]]]:
    """`gsm8k:2` -> {"gsm8k": 2}; `gsm8k` -> {"gsm8k": None} (all tasks); each name must be registered."""
    if not specs:
        return None
    out: dict[str, Optional[int]] = {}
    for spec in specs:
        name, _, n = spec.partition(":")
        if n and not n.isdigit():
            fail(f"--benchmark {spec!r}: use NAME or NAME:COUNT")
        out[_benchmark_name(name)] = int(n) if n else None
    return out


ControlsOpt = typer.Option(1, "--controls", min=0,
                           help="Control replays per flip (the step unchanged, the rest live): a flip that a control "
                                "shows too is not_causal, never a label. Deterministic calls (temperature 0 on a "
                                "scripted model, cached responses) are proven identical instead of replayed.")
RepeatsOpt = typer.Option(1, "--repeats", min=1,
                          help="Replays of the fix or corruption (and --controls controls each) per flip: the flip "
                               "counts on both sides give the label's confidence (the probability that the "
                               "intervention raised the flip rate: 0.83 for 1/1 vs 0/1, 0.95 for 2/2 vs 0/2) "
                               "and a Wilson interval on the difference.")
MinConfidenceOpt = typer.Option(0.0, "--min-confidence", min=0.0, max=1.0,
                                help="Labels below this confidence are stored but not verified (out of `labels`).")
RecheckOpt = typer.Option(0, "--recheck", min=0,
                          help="Also re-annotate N labelled failures from scratch (fresh analyzer samples, another "
                               "candidate order) and report how often (agent, step) agree.")


def _causality(controls: int, repeats: int, min_confidence: float = 0.0) -> Any:
    from rootstep.flows.annotate import Causality

    return Causality(controls=controls, repeats=repeats, min_confidence=min_confidence)


def _run_flows(run: Any) -> Any:
    """Run `run()` so that SIGINT / SIGTERM stop it (`rootstep._stop`), turning a missing runner
    package into a clear error."""
    from rich.markup import escape

    from rootstep.flows._runner import RunnerUnavailable
    from rootstep import run_stoppable

    try:
        return run_stoppable(run)
    except RunnerUnavailable as exc:
        fail(escape(str(exc)))  # escaped: "rootstep[ray]" is not rich markup


@runner_options
@budget_options(Budget.for_pipeline())
@limits_options
def pipeline_cmd(
    framework: Optional[list[str]] = FrameworkOpt(),
    system: Optional[list[Path]] = SystemOpt,
    benchmark: Optional[list[str]] = SliceOpt,
    model: str = ModelOpt,
    analyzer_model: Optional[str] = AnalyzerOpt,
    perturber_model: Optional[str] = PerturberOpt,
    seed: int = typer.Option(0, help="Shuffles each benchmark before taking COUNT tasks."),
    budget: Any = None,
    controls: int = ControlsOpt,
    repeats: int = RepeatsOpt,
    min_confidence: float = MinConfidenceOpt,
    recheck: int = RecheckOpt,
    counterfactual: bool = typer.Option(True, help="Annotate failures by counterfactual replay."),
    inject: bool = typer.Option(True, help="Annotate successes by fault injection."),
    limits: Any = None,
    include_suspect: bool = IncludeSuspectOpt,
    inject_mode: InjectMode = InjectModeOpt,
    max_tokens: Optional[int] = MaxTokensOpt,
    llm_seconds: float = LLMSecondsOpt,
    warehouse: Optional[str] = WarehouseOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON instead of the table."),
    runner: Any = None,
) -> None:
    """Collect -> split -> counterfactual + inject -> warehouse. With no arguments: the main job's slice
    (AG2 on a few GSM8K and MBPP tasks), the offline models, a local Prefect (ephemeral API), the
    ./rootstep-data warehouse."""
    from rootstep.flows.pipeline import pipeline

    framework, benchmarks = with_systems(framework, system), _benchmarks(benchmark)
    report = _run_flows(lambda: pipeline(
        frameworks=framework, benchmarks=benchmarks, model=model, analyzer_model=analyzer_model,
        perturber_model=perturber_model, seed=seed, budget=budget, counterfactual=counterfactual, inject=inject,
        warehouse=warehouse, limits=limits.model_copy(update={"llm_seconds": llm_seconds}), runner=runner,
        include_suspect=include_suspect, causality=_causality(controls, repeats, min_confidence),
        inject_mode=inject_mode.value, max_tokens=max_tokens, recheck=recheck))
    if as_json:
        console.print_json(report.model_dump_json())


@runner_options
@limits_options
def collect_cmd(
    framework: Optional[list[str]] = FrameworkOpt(),
    system: Optional[list[Path]] = SystemOpt,
    benchmark: str = typer.Option(DEFAULTS.collect_benchmark, "--benchmark", "-b", help="A registered benchmark."),
    limit: Optional[int] = typer.Option(DEFAULTS.collect_limit, help="Tasks to run (after shuffling)."),
    seed: int = typer.Option(0),
    model: str = ModelOpt,
    limits: Any = None,
    warehouse: Optional[str] = WarehouseOpt,
    runner: Any = None,
) -> None:
    """Run frameworks on benchmark tasks, verify, store runs, steps and LLM calls (stored runs are skipped)."""
    from rootstep.flows.collect import collect

    framework, benchmark = with_systems(framework, system), _benchmark_name(benchmark)
    if limit is not None and limit < 1:
        fail(f"--limit {limit}: must be at least 1")
    report = _run_flows(lambda: collect(framework or list(DEFAULTS.frameworks), benchmark, limit=limit, seed=seed,
                                        model=model, warehouse=warehouse,
                                        limits=limits, runner=runner))
    for r in report.runs:
        state = "stored" if r.cached else ("error" if r.run_id is None else "new")
        outcome = {True: "success", False: "failure", None: "-"}[r.success]
        console.print(f"{r.framework:<12} {r.benchmark}/{r.task_id:<14} {state:<7} {outcome:<8} "
                      f"{r.run_id or ''} {r.error or ''}", highlight=False)
    console.print(json.dumps(report.counts()))


@runner_options
@budget_options(Budget.for_annotate())
def annotate_cmd(
    method: StageChoice = typer.Option(StageChoice.both, help="counterfactual (failures), inject (successes) or both."),
    framework: Optional[list[str]] = FrameworkOpt("Restrict to these frameworks; repeat for several."),
    system: Optional[list[Path]] = typer.Option(None, "--system", help="Restrict to these system files' runs (a "
                                                "system's runs are annotated without it too: they name their file)."),
    benchmark: Optional[list[str]] = typer.Option(None, "--benchmark", "-b", help="Restrict to these benchmarks."),
    limit: Optional[int] = typer.Option(None, help="At most this many runs per method."),
    run_id: Optional[list[str]] = typer.Option(None, "--run-id", help="Only these runs (ids or prefixes); repeat for "
                                               "several. A run rootstep did not record (an import) is refused."),
    analyzer_model: str = typer.Option(DEFAULTS.annotator_model, help="The analyzer LLM."),
    perturber_model: Optional[str] = typer.Option(DEFAULTS.annotator_model, help="The perturber LLM ('none': programmatic only)."),
    budget: Any = None,
    controls: int = ControlsOpt,
    repeats: int = RepeatsOpt,
    min_confidence: float = MinConfidenceOpt,
    recheck: int = RecheckOpt,
    include_suspect: bool = IncludeSuspectOpt,
    inject_mode: InjectMode = InjectModeOpt,
    max_tokens: Optional[int] = MaxTokensOpt,
    episode_seconds: float = EpisodeSecondsOpt,
    llm_seconds: float = LLMSecondsOpt,
    searches: Optional[int] = SearchesOpt,
    warehouse: Optional[str] = WarehouseOpt,
    runner: Any = None,
) -> None:
    """Annotate the stored failures without a counterfactual label and the successes not yet injected."""
    from rootstep.flows.annotate import annotate

    framework = with_systems(framework, system)
    causality = _causality(controls, repeats, min_confidence)
    run_ids = _recorded_runs(run_id, warehouse) if run_id else None
    limits = Limits(episode_seconds=episode_seconds, llm_seconds=llm_seconds, searches=searches)
    perturber = None if perturber_model in (None, "none") else perturber_model
    report = _run_flows(lambda: annotate(
        method.stages(), analyzer_model, perturber, frameworks=framework, benchmarks=benchmark, run_ids=run_ids,
        limit=limit, budget=budget, warehouse=warehouse, runner=runner, max_tokens=max_tokens, limits=limits,
        include_suspect=include_suspect, inject_mode=inject_mode.value, causality=causality, recheck=recheck))
    runs = report.runs
    for a in runs:
        where = "+".join(map(str, a.steps)) if len(a.steps) > 1 else '-' if a.step is None else a.step
        extra = "" if a.confidence is None else f"confidence {a.confidence:g}  "
        if a.recheck_of is not None:
            extra += f"re-check of {a.recheck_of}: {'agrees' if a.agrees else 'lands elsewhere'}  "
        if a.stats.cut_by is not None:
            extra += f"cut by {a.stats.cut_by} ({a.stats.cut_reason})  "
        console.print(f"{a.method:<15} {a.framework:<12} {a.benchmark}/{a.task_id:<14} {a.status:<17} "
                      f"{a.agent or '-'}@{where}  replays {a.cost.replays}  "
                      f"llm calls {a.cost.llm_calls}  {a.cost.seconds:.1f} s {extra}{a.mode or ''} {a.error or a.reason or ''}",
                      highlight=False)
    console.print(f"{len(runs)} run(s) annotated")
    rechecked = [a for a in runs if a.recheck_of is not None]
    if rechecked:
        agreeing = sum(1 for a in rechecked if a.agrees)
        console.print(f"re-check agreement: {agreeing} of {len(rechecked)} labels found again at the same agent and step")


def _recorded_runs(prefixes: list[str], warehouse: Optional[str]) -> list[str]:
    """Full ids of `--run-id` values; a run that rootstep did not record (an imported trace) is refused:
    without its recorded LLM calls there is nothing to replay."""
    from rich.markup import escape

    from rootstep.model import RootstepError
    from rootstep.warehouse import Warehouse, default_location

    wh = Warehouse(warehouse or default_location())
    ids = []
    for prefix in prefixes:
        try:
            run = wh.resolve_run_id(prefix)
        except RootstepError as exc:
            fail(escape(f"--run-id {prefix}: {exc}"))
        source = wh.rows("SELECT source FROM runs WHERE id = ?", [run])[0]["source"]
        if source != "rootstep":
            fail(escape(f"--run-id {run}: imported from {source}, not recorded by rootstep: without its recorded LLM "
                         "calls counterfactual replay and fault injection cannot re-simulate it. Attribute it with a "
                         f"tracer instead: rootstep evaluate --unlabelled --where \"id = '{run}'\""))
        ids.append(run)
    return ids


def deploy_cmd(
    cron: str = typer.Option(DEFAULTS.cron, help="When the pipeline runs (cron, UTC)."),
    framework: Optional[list[str]] = FrameworkOpt(),
    system: Optional[list[Path]] = SystemOpt,
    benchmark: Optional[list[str]] = SliceOpt,
    model: str = ModelOpt,
    warehouse: Optional[str] = WarehouseOpt,
    serve: bool = typer.Option(False, help="Also execute the scheduled runs in this process (blocks)."),
) -> None:
    """Create the Prefect deployments (nightly pipeline on a benchmark slice) on the server in PREFECT_API_URL."""
    from rootstep.flows.deploy import default_schedules, deploy

    schedules = default_schedules(model=model, warehouse=warehouse, frameworks=with_systems(framework, system),
                                  benchmarks=_benchmarks(benchmark), cron=cron)
    try:
        names = deploy(schedules, serve=serve)
    except RuntimeError as exc:
        fail(str(exc))
    for name, s in zip(names, schedules):
        console.print(f"deployment {name}: cron {s.cron!r} -> flow {s.flow}", highlight=False)


@runner_options
def backfill_cmd(
    benchmark: Path = typer.Option(..., "--benchmark", "-b", exists=True, dir_okay=False, help="A JSONL task file."),
    verifier: str = typer.Option(..., "--verifier", "-v", help="Verifier name (`rootstep benchmark verifiers`)."),
    name: Optional[str] = typer.Option(None, help="Benchmark name (default: the file's stem)."),
    limit: Optional[int] = typer.Option(None, help="At most this many tasks."),
    framework: Optional[list[str]] = FrameworkOpt(),
    system: Optional[list[Path]] = SystemOpt,
    model: str = ModelOpt,
    analyzer_model: Optional[str] = AnalyzerOpt,
    perturber_model: Optional[str] = PerturberOpt,
    warehouse: Optional[str] = WarehouseOpt,
    runner: Any = None,
) -> None:
    """Register a new benchmark (JSONL + verifier) and run the pipeline on it once."""
    from rootstep.benchmarks import BenchmarkError
    from rootstep.flows.deploy import backfill

    framework = with_systems(framework, system)
    try:
        _run_flows(lambda: backfill(benchmark, verifier, name=name, limit=limit, frameworks=framework, model=model,
                                    analyzer_model=analyzer_model, perturber_model=perturber_model,
                                    warehouse=warehouse, runner=runner))
    except BenchmarkError as exc:
        fail(str(exc))


COMMANDS = {"pipeline": pipeline_cmd, "collect": collect_cmd, "annotate": annotate_cmd, "deploy": deploy_cmd,
            "backfill": backfill_cmd}
"""Mounted on `rootstep` by `rootstep.cli` (a command path -> a command or a sub-app)."""
