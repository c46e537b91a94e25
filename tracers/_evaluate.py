"""Run an attribution method over the labelled runs of a warehouse, store its predictions, score them.

Predictions are stored as `Annotation(method="tracer", verified=False)` with the annotator
`<method>/<model>[+gt]`; a run already predicted by the same annotator is not asked again, so an
interrupted evaluation resumes where it stopped. Gold labels are the `labels` view (verified labels:
human, counterfactual, fault injection), which never contains a tracer's own predictions.

The learned method is evaluated by task-grouped cross-validation (`_learned.cross_validate`): each run
is predicted by a model trained on the other folds' tasks, never by a saved model (which may have seen
it). Every evaluation carries the trivial baselines (`_baselines`) computed on the same folds.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rootstep.model import Annotation, Asked, Evidence, Trajectory
from rootstep.warehouse import Warehouse

from ._baselines import attach_baselines
from ._learned import DEFAULT_FOLDS, DEFAULT_TEXT_DIMS, Example, cross_validate, cv_model_name
from ._methods import NO_PROVIDER, Attribution, TracerError, run_tracer, tracer_fn
from ._scoring import Scored, score_by
from ._training import task_folds

SUBSETS = {
    "algorithm-generated": "whowhen-algorithm-generated",
    "hand-crafted": "whowhen-hand-crafted",
}


def annotator_name(method: str, model: str, with_ground_truth: bool) -> str:
    return f"{method}/{model}" + ("+gt" if with_ground_truth else "")


def to_annotation(run_id: str, t: Trajectory, a: Attribution, annotator: str | None = None) -> Annotation:
    labelled = a.ok
    notes = list(a.notes) + ([a.error] if a.error else []) + (["prompt truncated"] if a.truncated else [])
    return Annotation(
        run_id=run_id,
        framework=t.framework,
        benchmark=t.benchmark,
        method="tracer",
        agent=a.agent if labelled else None,
        step=a.step if labelled else None,
        verified=False,
        status="labelled" if labelled else "unresolved",
        annotator=annotator or annotator_name(a.method, a.model, a.with_ground_truth),
        evidence=Evidence(reason=a.reason, notes=notes,
                          transcript=[Asked(prompt_name=f"tracer {a.method}", answer=answer) for answer in a.answers]),
        cost=a.cost,
        metadata={"details": a.details} if a.details else {},
    )




@dataclass
class Evaluation:
    annotator: str
    scored: list[Scored] = field(default_factory=list)
    predicted: int = 0
    resumed: int = 0
    folds: int = 0
    """Task-grouped folds of the baselines (and of the learned method's cross-validation)."""
    seconds: float = 0.0
    """Time spent predicting the new runs (not the resumed ones), in total."""
    errors: list[str] = field(default_factory=list)
    """Why each new run got no prediction (a refusal, an unparseable answer, ...)."""
    unlabelled: list[dict[str, Any]] = field(default_factory=list)
    """With `unlabelled=True`: one `{run_id, framework, benchmark, agent, step, reason, error}` per run attributed
    that has no label to score against (imported traces, fresh failures)."""

    def table(self, by: Sequence[str] = ("benchmark",)) -> list[dict[str, Any]]:
        return score_by(self.scored, by)


def gold_condition(subset: str | None, framework: str | None, benchmark: str | None) -> tuple[str, list[Any]]:
    clauses, params = ["true"], []
    if subset:
        clauses.append("benchmark = ?")
        params.append(SUBSETS.get(subset, subset))
    if framework:
        clauses.append("framework = ?")
        params.append(framework)
    if benchmark:
        clauses.append("benchmark = ?")
        params.append(benchmark)
    return " AND ".join(clauses), params


def scored_items(examples: Sequence[Example], predictions: dict[str, tuple[str | None, int | None]],
                 fold_of: Sequence[int]) -> list[Scored]:
    """Gold labels beside predictions (run id -> (agent, step), None when there is none), with baselines."""
    items = [
        Scored(run_id=e.run_id, framework=e.trajectory.framework, benchmark=e.trajectory.benchmark, gold_agent=e.agent,
               gold_step=e.step, n_steps=len(e.trajectory.steps), agents=tuple(e.trajectory.agents),
               pred_agent=predictions.get(e.run_id, (None, None))[0], pred_step=predictions.get(e.run_id, (None, None))[1])
        for e in examples
    ]
    return attach_baselines(items, {e.run_id: e.trajectory for e in examples}, fold_of)


def attribute_run(run_id: str, trajectory: Trajectory, method: str, model: str, *, label: str | None = None,
                  with_ground_truth: bool = True, api_base: str | None = None, max_prompt_chars: int = 60_000,
                  max_tokens: int = 512, warehouse: Warehouse | None = None) -> Attribution:
    """Attribute one run with `method`. A refusal (no counterpart, no content, ...) or a provider error (a
    prompt over the model's context) is this run's result, an `Attribution` with `error`, not an exception."""
    try:
        return run_tracer(method, trajectory, model=model, with_ground_truth=with_ground_truth, api_base=api_base,
                          max_prompt_chars=max_prompt_chars, max_tokens=max_tokens, warehouse=warehouse, run_id=run_id)
    except TracerError as exc:
        return Attribution(method=method, model=label or model, with_ground_truth=with_ground_truth, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - see the docstring
        return Attribution(method=method, model=label or model, with_ground_truth=with_ground_truth,
                           error=f"provider error: {type(exc).__name__}: {str(exc)[:500]}")


def predict(run_id: str, trajectory: Trajectory, method: str, model: str, *, with_ground_truth: bool = True,
            api_base: str | None = None, max_prompt_chars: int = 60_000, max_tokens: int = 512,
            warehouse: Warehouse | None = None) -> Annotation:
    """Attribute one run and return the prediction as `rootstep evaluate` stores it (`method=tracer`)."""
    return to_annotation(run_id, trajectory, attribute_run(
        run_id, trajectory, method, model, with_ground_truth=with_ground_truth, api_base=api_base,
        max_prompt_chars=max_prompt_chars, max_tokens=max_tokens, warehouse=warehouse))


def as_prediction(a: Attribution) -> tuple[str | None, int | None]:
    """An attribution as the (agent, step) that is scored: nothing when it has no prediction."""
    return (a.agent, a.step) if a.ok else (None, None)


def evaluate(
    warehouse: Warehouse,
    method: str,
    model: str,
    *,
    with_ground_truth: bool = True,
    subset: str | None = None,
    framework: str | None = None,
    benchmark: str | None = None,
    limit: int | None = None,
    concurrency: int = 1,
    api_base: str | None = None,
    max_prompt_chars: int = 60_000,
    max_tokens: int = 512,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
    progress: Any = None,
    unlabelled: bool = False,
    where: str = "true",
) -> Evaluation:
    """Predict every labelled run (matching the filters) with `method`, store and score the predictions.

    `model` is the LLM of the LLM methods and the scoring model of `confidence`; `divergence` and `learned`
    ignore it. `folds` and `seed` set the task-grouped folds of the baselines and of `learned`. With
    `unlabelled`, also the runs with no label that did not succeed (failures and unknown outcomes:
    imported traces), stored but not scored (`learned` predicts those with the newest saved model).
    `where`: an SQL condition over the `runs` view restricting both.
    """
    tracer_fn(method)  # ValueError listing the methods
    condition, params = gold_condition(subset, framework, benchmark)
    gold = warehouse.rows(
        f"SELECT l.run_id, l.agent, l.step, l.method, r.framework, r.benchmark FROM labels l JOIN runs r ON r.id = l.run_id "
        f"WHERE {condition.replace('benchmark', 'r.benchmark').replace('framework', 'r.framework')} "
        f"AND r.id IN (SELECT id FROM runs WHERE {where}) ORDER BY l.run_id",
        params,
    )
    if limit is not None:
        gold = gold[:limit]
    extra = warehouse.rows(
        f"SELECT id AS run_id, NULL AS agent, NULL AS step, framework, benchmark FROM runs r WHERE {condition} "
        f"AND ({where}) AND parent_run_id IS NULL AND success IS NOT TRUE "
        "AND NOT EXISTS (SELECT 1 FROM labels l WHERE l.run_id = r.id) ORDER BY id",
        params,
    ) if unlabelled else []
    runs = {run_id: t for run_id, t in warehouse.trajectories(
        "id IN (SELECT unnest(?))", [[g["run_id"] for g in gold + extra]])}
    examples = [Example(g["run_id"], runs[g["run_id"]], g["agent"], int(g["step"]), g["method"]) for g in gold]
    fold_of = task_folds([e.task for e in examples], folds, seed)

    cv: dict[str, Attribution] = {}
    if method == "learned":
        label = cv_model_name(examples, with_ground_truth, folds, seed, DEFAULT_TEXT_DIMS)
    else:
        label = {"divergence": "difflib"}.get(method, model)
    annotator = annotator_name(method, label, with_ground_truth)
    stored = warehouse.rows("SELECT run_id, agent, step, reason, notes FROM annotations WHERE method = 'tracer' "
                            "AND annotator = ?", [annotator])
    previous = {r["run_id"]: (r["agent"], r["step"]) for r in stored}
    why = {r["run_id"]: (r["reason"], "; ".join(r["notes"] or [])) for r in stored}
    result = Evaluation(annotator=annotator, folds=len(set(fold_of)))
    todo = [g for g in gold + extra if g["run_id"] not in previous]
    result.resumed = len(gold) + len(extra) - len(todo)
    if method == "learned" and any(g["agent"] is not None for g in todo):
        cv, _ = cross_validate(examples, with_ground_truth, folds, seed)
    if progress:
        progress.phase(f"{method} with {label}", len(todo))

    def predict(g: dict[str, Any]) -> Attribution:
        run_id = g["run_id"]
        if method == "learned" and run_id in cv:
            return cv[run_id]
        return attribute_run(run_id, runs[run_id], method, model, label=label, with_ground_truth=with_ground_truth,
                             api_base=api_base, max_prompt_chars=max_prompt_chars, max_tokens=max_tokens,
                             warehouse=warehouse)

    pending: list[Annotation] = []
    # The methods that read the warehouse while predicting run in this thread, between the writes below:
    # DuckDB refuses two threads (re)creating the catalog's views at once. LLM methods run in the pool.
    parallel = concurrency > 1 and method not in NO_PROVIDER
    with ThreadPoolExecutor(max_workers=max(concurrency, 1)) as pool:
        for g, attribution in zip(todo, pool.map(predict, todo) if parallel else map(predict, todo)):
            annotation = to_annotation(g["run_id"], runs[g["run_id"]], attribution, annotator)
            pending.append(annotation)
            previous[annotation.run_id] = as_prediction(attribution)
            why[annotation.run_id] = (attribution.reason, attribution.error or "")
            result.predicted += 1
            result.seconds += attribution.cost.seconds
            if not attribution.ok:
                result.errors.append(attribution.error or "no prediction")
            if progress:
                progress.advance()
            if len(pending) >= 10:  # store as we go: an interrupted evaluation resumes from here
                warehouse.write_annotations(pending)
                pending = []
    if pending:
        warehouse.write_annotations(pending)
    result.scored = scored_items(examples, previous, fold_of)
    for g in extra:
        agent, step = previous.get(g["run_id"], (None, None))
        reason, error = why.get(g["run_id"], (None, ""))
        result.unlabelled.append({"run_id": g["run_id"], "framework": g["framework"], "benchmark": g["benchmark"],
                                  "agent": agent, "step": step, "reason": reason,
                                  "error": None if agent is not None else error or "no prediction"})
    return result
