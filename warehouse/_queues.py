"""The flows' queues, as named queries: which stored runs a search still has to do.

* `counterfactual_queue`: failures (collected by rootstep, not replays) with no counterfactual annotation
  yet (a verified label, an `unresolved` or a `verifier_suspect` record take a run out of the queue), and
  not those whose verdict is suspect (the `verdict_suspect` view) unless asked;
* `inject_queue`: successes not injected yet (a success that resisted every corruption has a record);
* `recheck_queue`: counterfactual labels not re-checked yet;
* `suspect_left_out`: the failures `counterfactual_queue` leaves out as suspect verdicts, with their reasons (no
  annotation records them: the pipeline's summary names them).
Each is restricted to runs `rootstep` collected (`source = 'rootstep'`: an imported run cannot be replayed)
and to the frameworks, benchmarks and run ids asked for. Callers sharing a warehouse between threads hold
their lock around a call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rootstep.model import Annotation

from ._schemas import annotation_from_row
from ._store import Warehouse


def _scope(column_prefix: str, frameworks: Sequence[str] | None, benchmarks: Sequence[str] | None,
           run_ids: Sequence[str] | None) -> tuple[str, list[Any]]:
    where, params = [f"{column_prefix}.source = 'rootstep'"], []
    for column, values in (("framework", frameworks), ("benchmark", benchmarks), ("id", run_ids)):
        if values is not None:
            if not values:
                return "false", []
            where.append(f"{column_prefix}.{column} IN ({', '.join('?' for _ in values)})")
            params += list(values)
    return " AND ".join(where), params


def _queue(wh: Warehouse, view: str, done: str, frameworks: Sequence[str] | None, benchmarks: Sequence[str] | None,
           run_ids: Sequence[str] | None, limit: int | None, extra: str = "true") -> list[str]:
    """Ids of the runs of `view` (alias `v`) in scope, meeting `extra`, for which the `done` subquery finds nothing."""
    where, params = _scope("v", frameworks, benchmarks, run_ids)
    where += f" AND ({extra})"
    sql = (f"SELECT v.id FROM {view} v WHERE {where} AND NOT EXISTS ({done}) "
           "ORDER BY v.framework, v.benchmark, v.task_id, v.id")
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [r["id"] for r in wh.rows(sql, params)]


def counterfactual_queue(wh: Warehouse, frameworks: Sequence[str] | None = None, benchmarks: Sequence[str] | None = None,
                         run_ids: Sequence[str] | None = None, limit: int | None = None,
                         include_suspect: bool = False) -> list[str]:
    """Failures (collected, not replayed) with no counterfactual annotation yet; without `include_suspect`,
    not those whose verdict is suspect (the `verdict_suspect` view)."""
    extra = "true" if include_suspect else "json_extract_string(v.verdict_details, '$.suspect') IS NULL"
    return _queue(wh, "failures", "SELECT 1 FROM annotations a WHERE a.run_id = v.id AND a.method = 'counterfactual'",
                  frameworks, benchmarks, run_ids, limit, extra)


def inject_queue(wh: Warehouse, frameworks: Sequence[str] | None = None, benchmarks: Sequence[str] | None = None,
                 run_ids: Sequence[str] | None = None, limit: int | None = None) -> list[str]:
    """Successes (collected, not replayed) not injected yet: no fault-injection replay, and no record that
    one resisted injection (the flows' `not_flipped_record`)."""
    return _queue(wh, "successes", "SELECT 1 FROM replays r WHERE r.run_id = v.id AND r.purpose = 'fault_injection' "
                  "UNION ALL SELECT 1 FROM annotations a WHERE a.run_id = v.id AND a.method = 'fault_injection'",
                  frameworks, benchmarks, run_ids, limit)


def recheck_queue(wh: Warehouse, frameworks: Sequence[str] | None = None, benchmarks: Sequence[str] | None = None,
                  run_ids: Sequence[str] | None = None, limit: int | None = None) -> list[Annotation]:
    """Counterfactual labels (the `labels` view) in scope not re-checked yet, most recent first."""
    where, params = _scope("r", frameworks, benchmarks, run_ids)
    sql = (f"SELECT a.* FROM labels l JOIN annotations a ON a.id = l.id JOIN runs r ON r.id = l.run_id WHERE {where} "
           "AND l.method = 'counterfactual' AND NOT EXISTS (SELECT 1 FROM annotations x WHERE x.run_id = l.run_id "
           "AND x.recheck_of = l.id) ORDER BY l.created_at DESC, l.id")
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [annotation_from_row(row) for row in wh.rows(sql, params)]


def suspect_left_out(wh: Warehouse, run_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Failures in scope whose verdict is suspect and that have no counterfactual annotation (`run_id`, `framework`,
    `task_id`, `reason`): what `counterfactual_queue` without `include_suspect` leaves out."""
    where, params = _scope("r", None, None, run_ids)
    sql = (f"SELECT v.run_id, v.framework, v.task_id, v.reason FROM verdict_suspect v JOIN runs r ON r.id = v.run_id "
           f"WHERE {where} AND NOT EXISTS (SELECT 1 FROM annotations a WHERE a.run_id = v.run_id "
           "AND a.method = 'counterfactual') ORDER BY v.framework, v.task_id")
    return wh.rows(sql, params)
