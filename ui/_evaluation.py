"""The evaluation page: how well each stored tracer predicts the labels, where labels sit, what they cost.

* Accuracy: every tracer annotator (`<method>/<model>[+gt]`, as `rootstep evaluate` and the attribute
  page store them) scored against the `labels` view with `rootstep.tracers.score_by`, the same figures
  `rootstep evaluate` prints, per subset (benchmark) and/or framework. A run predicted more than once
  by the same annotator counts with its latest prediction.
* Decisive-step position: where in the run each label sits, as a share of the run's steps.
* Cost per verified label: everything the annotation flows spent (verified labels and unresolved
  searches alike) divided by the verified labels they produced, per method.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rootstep.tracers import score_by
from rootstep.tracers import scored_items
from rootstep.tracers import DEFAULT_FOLDS, Example
from rootstep.tracers import task_folds
from rootstep.warehouse import Warehouse

PREDICTIONS_SQL = """
SELECT a.annotator, a.run_id, a.agent AS pred_agent, a.step AS pred_step, a.cost_llm_calls, a.cost_usd,
       l.agent AS gold_agent, l.step AS gold_step, r.framework, r.benchmark, r.n_steps, r.agents
FROM annotations a JOIN labels l ON l.run_id = a.run_id JOIN runs r ON r.id = a.run_id
WHERE a.method = 'tracer'
QUALIFY row_number() OVER (PARTITION BY a.annotator, a.run_id ORDER BY a.created_at DESC, a.id DESC) = 1
ORDER BY a.annotator, a.run_id
"""

POSITIONS_SQL = """
SELECT l.method, l.step, r.n_steps FROM labels l JOIN runs r ON r.id = l.run_id WHERE r.n_steps > 0
"""

COST_SQL = """
SELECT method,
       count(*) FILTER (WHERE verified) AS verified,
       count(*) FILTER (WHERE status = 'unresolved') AS unresolved,
       count(*) AS annotations,
       sum(cost_llm_calls) AS llm_calls, sum(cost_tokens) AS tokens, sum(cost_usd) AS usd,
       sum(cost_seconds) AS seconds, sum(cost_replays) AS replays
FROM annotations WHERE method NOT IN ('tracer', 'human', 'imported')
  AND recheck_of IS NULL
GROUP BY method ORDER BY method
"""
"""What producing the labels cost, per method: every search (unresolved ones too) over the verified labels;
re-checks (`annotate --recheck`) are left out, as in the `quality` view."""

UNCLAIMED_INJECTION_SQL = """
SELECT count(*) AS replays, coalesce(sum(cost_usd), 0) AS usd, coalesce(sum(live_calls), 0) AS live_calls
FROM replays p WHERE purpose = 'fault_injection'
AND NOT EXISTS (SELECT 1 FROM annotations a WHERE list_contains(a.replay_ids, p.id))
"""

GROUPINGS = {"benchmark": ("benchmark",), "framework": ("framework",), "both": ("benchmark", "framework")}


@dataclass
class AnnotatorScores:
    annotator: str
    rows: list[dict[str, Any]]
    overall: dict[str, Any]
    calls_per_prediction: float
    usd_per_prediction: float


@dataclass
class EvaluationView:
    keys: tuple[str, ...]
    scores: list[AnnotatorScores] = field(default_factory=list)
    positions: list[dict[str, Any]] = field(default_factory=list)
    costs: list[dict[str, Any]] = field(default_factory=list)
    unclaimed_injection: dict[str, Any] = field(default_factory=dict)
    labels: int = 0


def _per_label(row: dict[str, Any]) -> dict[str, Any]:
    n = row["verified"]
    for key in ("usd", "llm_calls", "replays", "seconds", "tokens"):
        row[f"{key}_per_label"] = None if not n else (row[key] or 0) / n
    return row


def evaluation_view(warehouse: Warehouse, by: str = "benchmark") -> EvaluationView:
    keys = GROUPINGS.get(by, GROUPINGS["benchmark"])
    with warehouse.connect() as con:
        predictions = con.sql(PREDICTIONS_SQL).to_arrow_table().to_pylist()
        positions = con.sql(POSITIONS_SQL).to_arrow_table().to_pylist()
        costs = [_per_label(r) for r in con.sql(COST_SQL).to_arrow_table().to_pylist()]
        unclaimed = con.sql(UNCLAIMED_INJECTION_SQL).to_arrow_table().to_pylist()[0]
        labels = con.execute("SELECT count(*) FROM labels").fetchall()[0][0]
    by_annotator: dict[str, list[dict[str, Any]]] = {}
    for p in predictions:
        by_annotator.setdefault(p["annotator"], []).append(p)
    view = EvaluationView(keys=keys, positions=positions, costs=costs, unclaimed_injection=unclaimed, labels=labels)
    wanted = sorted({p["run_id"] for p in predictions})
    runs = dict(warehouse.trajectories("id IN (SELECT unnest(?))", [wanted])) if wanted else {}
    for annotator, items in by_annotator.items():
        # scored as `rootstep evaluate` scores, baselines on the same task-grouped folds (its defaults)
        examples = [Example(p["run_id"], runs[p["run_id"]], p["gold_agent"], int(p["gold_step"]), "")
                    for p in items if p["run_id"] in runs]
        scored = scored_items(examples, {p["run_id"]: (p["pred_agent"], p["pred_step"]) for p in items},
                              task_folds([e.task for e in examples], DEFAULT_FOLDS, 0))
        rows = score_by(scored, keys)
        overall = score_by(scored, ())[0]
        view.scores.append(AnnotatorScores(
            annotator=annotator, rows=rows, overall=overall,
            calls_per_prediction=sum(p["cost_llm_calls"] or 0 for p in items) / len(items),
            usd_per_prediction=sum(p["cost_usd"] or 0.0 for p in items) / len(items),
        ))
    return view
