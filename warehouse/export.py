"""Exports for other tools: plain Parquet per view, and JSONL of whole trajectories with labels."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

import pyarrow.parquet as pq

from ._catalog import PUBLIC_VIEWS
from ._schemas import annotation_from_row
from ._store import Warehouse


def export_parquet(warehouse: Warehouse, out: str | Path, views: Sequence[str] = PUBLIC_VIEWS) -> dict[str, int]:
    """One unpartitioned Parquet file per view (`runs.parquet`, `labels.parquet`, ...), written atomically."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    with warehouse.connect() as con:
        for view in views:
            table = con.sql(f"SELECT * FROM {view}").to_arrow_table()
            target = out / f"{view}.parquet"
            tmp = out / f".{view}.parquet.tmp"
            pq.write_table(table, tmp, compression="zstd")
            os.replace(tmp, target)
            counts[view] = table.num_rows
    return counts


def trajectory_record(run_id: str, trajectory: Any, label: Any) -> dict[str, Any]:
    record = trajectory.model_dump(mode="json")
    record["id"] = run_id
    record["label"] = None if label is None else label.model_dump(mode="json") | {"id": label.id}
    return record


def export_jsonl(warehouse: Warehouse, out: str | Path, where: str = "true", params: Sequence[Any] | None = None) -> int:
    """One JSON object per selected run: the trajectory (steps, verdict, provenance) and its label or null."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    labels = {r["run_id"]: annotation_from_row(r) for r in warehouse.rows("SELECT * FROM labels")}
    tmp = out.with_name(f".{out.name}.tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for run_id, trajectory in warehouse.trajectories(where, params):
            f.write(json.dumps(trajectory_record(run_id, trajectory, labels.get(run_id)), ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, out)
    return n
