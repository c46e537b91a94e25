"""The warehouse: append-only, hive-partitioned Parquet plus one DuckDB catalog of views.

Writes are atomic per file (a temporary name, then a rename; object stores put whole objects), and
idempotent: every row has a content-derived id, and rows whose id is already stored are skipped.
A trajectory's steps are written before its run row, and the views only show steps whose run row
came from the same batch, so a crash between the two leaves nothing half-visible.
"""

from __future__ import annotations

import os
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any, Callable

import duckdb
import fsspec
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from ._catalog import FileColumns, view_statements
from rootstep.model import Annotation, LLMCall, Replay, Trajectory, WarehouseError, content_id
from ._schemas import (
    PARTITION_COLUMNS,
    SCHEMAS,
    annotation_from_row,
    annotation_row,
    llm_call_row,
    replay_row,
    run_row,
    step_rows,
    trajectory_from_rows,
)

DEFAULT_LOCATION = "./rootstep-data"
ENV_LOCATION = "ROOTSTEP_WAREHOUSE"
CATALOG_NAME = "catalog.duckdb"
ProgressCallback = Callable[[int], None]


@dataclass
class WriteReport:
    """What one write did: rows written and rows skipped because their id was already stored."""

    written: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    skipped: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    files: list[str] = field(default_factory=list)

    def merge(self, other: "WriteReport") -> None:
        for k, v in other.written.items():
            self.written[k] += v
        for k, v in other.skipped.items():
            self.skipped[k] += v
        self.files += other.files


def default_location() -> str:
    return os.environ.get(ENV_LOCATION, DEFAULT_LOCATION)


class Warehouse:
    """A warehouse at a local path or any fsspec URL (`s3://bucket/prefix`, `memory://x`, ...).

    `catalog` is the DuckDB file holding the views; it defaults to `<location>/catalog.duckdb`
    for a local location and to a file under `~/.cache/rootstep/` for a remote one.
    """

    def __init__(self, location: str | os.PathLike[str] | None = None, catalog: str | None = None):
        location = str(location or default_location())
        self.fs, root = fsspec.core.url_to_fs(location)
        self.local = "file" in _protocols(self.fs)
        if self.local:
            root = str(Path(root).resolve())
            self.fs.makedirs(root, exist_ok=True)
        self.root = root.rstrip("/")
        self.location = location
        if catalog is None:
            if self.local:
                catalog = str(Path(self.root) / CATALOG_NAME)
            else:
                cache = Path.home() / ".cache" / "rootstep" / "catalogs"
                cache.mkdir(parents=True, exist_ok=True)
                catalog = str(cache / (sha256(location.encode()).hexdigest()[:16] + ".duckdb"))
        self.catalog = catalog
        self._file_columns: dict[tuple[str, int, int], frozenset[str]] = {}

    # ------------------------------------------------------------------ paths

    def _url(self, path: str) -> str:
        """A path as DuckDB must see it: plain for local files, with the protocol otherwise."""
        return path if self.local else self.fs.unstrip_protocol(path)

    def table_dir(self, table: str) -> str:
        return f"{self.root}/{table}"

    def _partition_dir(self, table: str, framework: str, benchmark: str) -> str:
        return f"{self.root}/{table}/framework={framework}/benchmark={benchmark}"

    def table_files(self, table: str, partitions: Iterable[tuple[str, str]] | None = None) -> list[str]:
        if partitions is None:
            pattern = [f"{self.table_dir(table)}/*/*/*.parquet"]
        else:
            pattern = [f"{self._partition_dir(table, f, b)}/*.parquet" for f, b in partitions]
        files: list[str] = []
        for p in pattern:
            files += self.fs.glob(p)
        return sorted(files)

    # ------------------------------------------------------------------ writing

    def _existing_ids(self, table: str, partitions: Iterable[tuple[str, str]]) -> set[str]:
        files = self.table_files(table, partitions)
        if not files:
            return set()
        dataset = ds.dataset(files, filesystem=self.fs, format="parquet")
        return set(dataset.to_table(columns=["id"]).column("id").to_pylist())

    def _write_file(self, path: str, table: pa.Table) -> None:
        """Write one Parquet file atomically: nobody ever sees a half-written file under `path`."""
        self.write_file(path, lambda f: pq.write_table(table, f, compression="zstd"))

    def write_file(self, path: str, write: Callable[[Any], None]) -> None:
        """A file of the warehouse (a path under `root`), written by `write(binary file)`, whole or not at all:
        locally a temporary name beside it, synced, then renamed; an object store makes an object visible only
        once it is complete. Folders are made. Every file the warehouse holds is written through here."""
        directory = path.rsplit("/", 1)[0]
        self.fs.makedirs(directory, exist_ok=True)
        if not self.local:
            with self.fs.open(path, "wb") as f:
                write(f)
            return
        tmp = f"{directory}/.{uuid.uuid4().hex}.{path.rsplit('/', 1)[1]}.tmp"  # a Parquet one: `vacuum` finds it
        try:
            with open(tmp, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def _write_rows(
        self, table: str, rows: list[dict[str, Any]], batch_id: str, skip_existing: bool = True
    ) -> WriteReport:
        report = WriteReport()
        by_partition: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_partition[(row["framework"], row["benchmark"])].append(row)
        existing = self._existing_ids(table, by_partition) if skip_existing else set()
        schema = SCHEMAS[table]
        for (framework, benchmark), part_rows in sorted(by_partition.items()):
            seen: set[str] = set()
            fresh = []
            for row in part_rows:
                if row["id"] in existing or row["id"] in seen:
                    report.skipped[table] += 1
                    continue
                seen.add(row["id"])
                fresh.append(row)
            if not fresh:
                continue
            columns = {name: [r.get(name) for r in fresh] for name in schema.names}
            arrow = pa.Table.from_pydict(columns, schema=schema)
            path = f"{self._partition_dir(table, framework, benchmark)}/part-{batch_id}.parquet"
            self._write_file(path, arrow)
            report.written[table] += len(fresh)
            report.files.append(path)
        return report

    def write_trajectories(
        self,
        trajectories: Sequence[Trajectory],
        llm_calls: Sequence[LLMCall] = (),
        chunk_steps: int = 250_000,
        progress: ProgressCallback | None = None,
    ) -> WriteReport:
        """Store runs and their steps (and optionally their LLM calls); runs already stored are skipped."""
        report = WriteReport()
        if llm_calls:
            report.merge(self.write_llm_calls(llm_calls))
        partitions = {(t.framework, t.benchmark) for t in trajectories}
        stored = self._existing_ids("runs", partitions)
        chunk: list[tuple[str, Trajectory]] = []
        chunk_size = 0
        seen: set[str] = set()
        for t in trajectories:
            run_id = t.id
            if run_id in stored or run_id in seen:
                report.skipped["runs"] += 1
                report.skipped["steps"] += len(t.steps)
                if progress:
                    progress(1)
                continue
            seen.add(run_id)
            chunk.append((run_id, t))
            chunk_size += len(t.steps) + 1
            if chunk_size >= chunk_steps:
                report.merge(self._write_run_chunk(chunk, progress))
                chunk, chunk_size = [], 0
        if chunk:
            report.merge(self._write_run_chunk(chunk, progress))
        self.refresh_catalog()
        return report

    def _write_run_chunk(self, chunk: list[tuple[str, Trajectory]], progress: ProgressCallback | None) -> WriteReport:
        batch_id = content_id("batch", sorted(run_id for run_id, _ in chunk))
        steps: list[dict[str, Any]] = []
        runs: list[dict[str, Any]] = []
        for run_id, t in chunk:
            steps += step_rows(t, run_id, batch_id)
            row = run_row(t, batch_id)
            row["id"] = run_id
            runs.append(row)
        # Steps first, the run rows last: a run row is the commit record of its steps.
        report = self._write_rows("steps", steps, batch_id, skip_existing=False)
        report.merge(self._write_rows("runs", runs, batch_id, skip_existing=False))
        if progress:
            progress(len(chunk))
        return report

    def write_llm_calls(self, calls: Sequence[LLMCall]) -> WriteReport:
        return self._write_batch("llm_calls", [llm_call_row(c) for c in calls])

    def write_replays(self, replays: Sequence[Replay]) -> WriteReport:
        return self._write_batch("replays", [replay_row(r) for r in replays])

    def write_annotations(self, annotations: Sequence[Annotation]) -> WriteReport:
        return self._write_batch("annotations", [annotation_row(a) for a in annotations])

    def _write_batch(self, table: str, rows: list[dict[str, Any]]) -> WriteReport:
        """`rows` of `table` as one batch (its id derived from the rows' ids), then the catalog refreshed."""
        report = self._write_rows(table, rows, content_id("batch", sorted(r["id"] for r in rows)))
        self.refresh_catalog()
        return report

    # ------------------------------------------------------------------ catalog and queries

    def _globs(self) -> tuple[dict[str, str | None], dict[str, FileColumns]]:
        """Each table's glob (None: no files yet) and, for a local warehouse, the columns its files hold."""
        globs: dict[str, str | None] = {}
        columns: dict[str, FileColumns] = {}
        for table in SCHEMAS:
            files = self.table_files(table)
            globs[table] = self._url(f"{self.table_dir(table)}/*/*/*.parquet") if files else None
            if files and self.local:
                held = [self._columns_of(f) for f in files]
                columns[table] = FileColumns(frozenset().union(*held), frozenset.intersection(*held))
        return globs, columns

    def _columns_of(self, path: str) -> frozenset[str]:
        """The columns one local Parquet file holds, read from its footer once per version of the file (keyed by
        its size and modification time: a file replaced in place, as a migration may do, is read again)."""
        stat = os.stat(path)
        key = (path, stat.st_size, stat.st_mtime_ns)
        if key not in self._file_columns:
            self._file_columns[key] = frozenset(pq.read_schema(path).names)
        return self._file_columns[key]

    def _create_views(self, con: duckdb.DuckDBPyConnection) -> None:
        for statement in view_statements(*self._globs()):
            con.execute(statement)

    def refresh_catalog(self) -> None:
        """Point the catalog file's views at the tables as they are now (a table may have gained files)."""
        try:
            con = duckdb.connect(self.catalog)
        except duckdb.IOException:
            return  # another process holds the catalog; it refreshes its views when it connects
        try:
            self._register(con)
            self._create_views(con)
        finally:
            con.close()

    def _register(self, con: duckdb.DuckDBPyConnection) -> None:
        if not self.local:
            con.register_filesystem(self.fs)

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A DuckDB connection with every view; in memory when another process holds the catalog file."""
        try:
            con = duckdb.connect(self.catalog)
        except duckdb.IOException:
            con = duckdb.connect()
        try:
            self._register(con)
            self._create_views(con)
            yield con
        finally:
            con.close()

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        with self.connect() as con:
            return con.sql(sql, params=params or None).to_arrow_table()

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        return self.query(sql, params).to_pylist()

    def count(self, view: str) -> int:
        return self.rows(f"SELECT count(*) AS n FROM {view}")[0]["n"]

    # ------------------------------------------------------------------ reading models back

    def resolve_run_id(self, prefix: str) -> str:
        """The full run id for an id or an unambiguous prefix of one."""
        found = self.rows("SELECT id FROM runs WHERE starts_with(id, ?) ORDER BY id LIMIT 6", [prefix])
        if not found:
            raise WarehouseError(f"{self.location}: runs: no run id starts with {prefix!r}")
        if len(found) > 1 and found[0]["id"] != prefix:
            ids = ", ".join(r["id"] for r in found)
            raise WarehouseError(f"{self.location}: runs: {prefix!r} is ambiguous ({ids}, ...)")
        return found[0]["id"]

    def trajectories(self, where: str = "true", params: Sequence[Any] | None = None) -> Iterator[tuple[str, Trajectory]]:
        """(run id, trajectory) for every run matching the SQL condition `where` over the `runs` view."""
        with self.connect() as con:
            runs = con.sql(f"SELECT * FROM runs WHERE {where} ORDER BY id", params=params or None).to_arrow_table()
            run_rows = runs.to_pylist()
            for start in range(0, len(run_rows), 500):
                batch = run_rows[start : start + 500]
                ids = [r["id"] for r in batch]
                steps = con.sql(
                    "SELECT * FROM steps WHERE run_id IN (SELECT unnest(?)) ORDER BY run_id, step", params=[ids]
                ).to_arrow_table().to_pylist()
                by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
                for s in steps:
                    by_run[s["run_id"]].append(s)
                for r in batch:
                    yield r["id"], trajectory_from_rows(r, by_run[r["id"]])

    def trajectory(self, run_id: str) -> Trajectory:
        run_id = self.resolve_run_id(run_id)
        for _, t in self.trajectories("id = ?", [run_id]):
            return t
        raise WarehouseError(f"{self.location}: runs: no run {run_id!r}")

    def annotations(self, run_id: str) -> list[Annotation]:
        rows = self.rows("SELECT * FROM annotations WHERE run_id = ? ORDER BY created_at", [run_id])
        return [annotation_from_row(r) for r in rows]

    def label(self, run_id: str) -> Annotation | None:
        rows = self.rows("SELECT * FROM labels WHERE run_id = ?", [run_id])
        return annotation_from_row(rows[0]) if rows else None

    # ------------------------------------------------------------------ housekeeping

    def vacuum(self) -> dict[str, int]:
        """Delete what crashed writes left behind: temporary files and steps no committed run owns."""
        removed = {"tmp_files": 0, "orphan_step_files": 0}
        for tmp in self.fs.glob(f"{self.root}/*/*/*/.*.parquet.tmp"):
            self.fs.rm(tmp)
            removed["tmp_files"] += 1
        committed = {(r["id"], r["batch_id"]) for r in self.rows("SELECT id, batch_id FROM runs")}
        committed_batches = {b for _, b in committed}
        for path in self.table_files("steps"):
            batch = path.rsplit("part-", 1)[-1].removesuffix(".parquet")
            if batch not in committed_batches:
                self.fs.rm(path)
                removed["orphan_step_files"] += 1
        self.refresh_catalog()
        return removed


def _protocols(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


__all__ = ["Warehouse", "WriteReport", "default_location", "PARTITION_COLUMNS"]
