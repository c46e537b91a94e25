"""Exports for other tools: plain Parquet per view, and JSONL of whole trajectories with labels; and the atomic file
writers (`write_text`, `write_jsonl`, `write_parquet`) every export of rootstep uses (Who&When files, verdicts for
tracing tools, training data), so that an interrupted export never leaves half a file."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ._catalog import PUBLIC_VIEWS
from ._schemas import annotation_from_row
from ._store import Warehouse


@contextmanager
def _replacing(path: str | Path) -> Iterator[Path]:
    """A temporary file beside `path` (folders made) for the block to write; renamed onto `path` when the block
    ends without an error, so `path` is whole or not there at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    yield tmp
    os.replace(tmp, path)


def write_text(path: str | Path, text: str) -> None:
    """`text` as the file `path`, whole or not at all (a temporary file beside it, then renamed); folders made."""
    with _replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_jsonl(path: str | Path, records: Iterable[dict[str, Any]]) -> int:
    """One JSON object per line, written atomically (see `write_text`); returns how many."""
    n = 0
    with _replacing(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
            n += 1
    return n


def write_parquet(path: str | Path, table: pa.Table) -> int:
    """An Arrow table as one zstd Parquet file, written atomically (see `write_text`); returns its rows."""
    with _replacing(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return table.num_rows


def export_parquet(warehouse: Warehouse, out: str | Path, views: Sequence[str] = PUBLIC_VIEWS) -> dict[str, int]:
    """One unpartitioned Parquet file per view (`runs.parquet`, `labels.parquet`, ...), written atomically."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with warehouse.connect() as con:
        return {view: write_parquet(out / f"{view}.parquet", con.sql(f"SELECT * FROM {view}").to_arrow_table())
                for view in views}


def trajectory_record(run_id: str, trajectory: Any, label: Any) -> dict[str, Any]:
    record = trajectory.model_dump(mode="json")
    record["id"] = run_id
    record["label"] = None if label is None else label.model_dump(mode="json") | {"id": label.id}
    return record


def export_jsonl(warehouse: Warehouse, out: str | Path, where: str = "true", params: Sequence[Any] | None = None) -> int:
    """One JSON object per selected run: the trajectory (steps, verdict, provenance) and its label or null."""
    labels = {r["run_id"]: annotation_from_row(r) for r in warehouse.rows("SELECT * FROM labels")}
    return write_jsonl(out, (trajectory_record(run_id, trajectory, labels.get(run_id))
                             for run_id, trajectory in warehouse.trajectories(where, params)))
