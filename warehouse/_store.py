"""The warehouse: append-only, hive-partitioned Parquet plus one DuckDB catalog of views.

Writes are atomic per file (a temporary name, then a rename; object stores put whole objects), and
idempotent: every row has a content-derived id, and rows whose id is already stored are skipped.
A trajectory's steps are written before its run row, and the views only show steps whose run row
came from the same batch, so a crash between the two leaves nothing half-visible.
"""

from __future__ import annotations

import os
import threading
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

from ._catalog import (
    MATERIALIZED,
    MATERIALIZED_SOURCES,
    MATERIALIZED_STATE,
    STEP_FILES,
    FileColumns,
    StepFiles,
    materialize_digest,
    materialize_statements,
    view_statements,
)
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
        self._file_columns: dict[tuple[str, str], frozenset[str]] = {}

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

    def _listing(self) -> dict[str, dict[str, str]]:
        """Each table's files, as DuckDB reads them (`_url`), with a stamp of their version (`_stamp`)."""
        listing: dict[str, dict[str, str]] = {}
        for table in SCHEMAS:
            found = self.fs.glob(f"{self.table_dir(table)}/*/*/*.parquet", detail=True)
            listing[table] = {self._url(path): _stamp(info) for path, info in sorted(found.items())}
        return listing

    def _globs(self, listing: dict[str, dict[str, str]]) -> tuple[dict[str, str | None], dict[str, FileColumns]]:
        """Each table's glob (None: no files yet) and, for a local warehouse, the columns its files hold."""
        globs: dict[str, str | None] = {}
        columns: dict[str, FileColumns] = {}
        for table, files in listing.items():
            globs[table] = self._url(f"{self.table_dir(table)}/*/*/*.parquet") if files else None
            held = self._columns(files)
            if held is not None:
                columns[table] = held
        return globs, columns

    def _columns(self, files: dict[str, str]) -> FileColumns | None:
        """The columns local `files` (path: stamp) hold, in any and in every one; None for remote ones."""
        if not self.local or not files:
            return None
        held = [self._columns_of(path, stamp) for path, stamp in files.items()]
        return FileColumns(frozenset().union(*held), frozenset.intersection(*held))

    def _columns_of(self, path: str, stamp: str) -> frozenset[str]:
        """The columns one local Parquet file holds, read from its footer once per version of the file (`stamp`:
        a file replaced in place, as a migration may do, is read again)."""
        key = (path, stamp)
        if key not in self._file_columns:
            self._file_columns[key] = frozenset(pq.read_schema(path).names)
        return self._file_columns[key]

    def _create_views(self, con: duckdb.DuckDBPyConnection) -> None:
        """Views that read the files on every query (an in-memory connection: nothing to keep up to date)."""
        for statement in view_statements(*self._globs(self._listing())):
            con.execute(statement)

    def _materialize(self, con: duckdb.DuckDBPyConnection) -> None:
        """Bring the catalog's materialized tables and its views up to date with the files, in one transaction
        (another client of the catalog sees them before or after, whole). Nothing is written when no file was
        added, changed or removed since the last time; a file removed between the listing and the read (a
        vacuum elsewhere) makes it list again."""
        with _catalog_lock(self.catalog):
            for attempt in range(3):
                listing = self._listing()
                con.execute("BEGIN TRANSACTION")
                try:
                    self._update_catalog(con, listing)
                    con.execute("COMMIT")
                    return
                except duckdb.IOException:
                    con.execute("ROLLBACK")
                    if attempt == 2:
                        raise
                except BaseException:
                    con.execute("ROLLBACK")
                    raise

    def _update_catalog(self, con: duckdb.DuckDBPyConnection, listing: dict[str, dict[str, str]]) -> None:
        m = MATERIALIZED
        tables = {r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = ?",
            [m]).fetchall()}
        if not {"files", "builds"} <= tables:
            for statement in MATERIALIZED_STATE:
                con.execute(statement)
        known: dict[str, dict[str, str]] = defaultdict(dict)
        for source, path, stamp in con.execute(f"SELECT source, path, stamp FROM {m}.files").fetchall():
            known[source][path] = stamp
        builds = dict(con.execute(f"SELECT name, digest FROM {m}.builds").fetchall())
        if not {"runs", "annotations", "labels", "step_runs", "step_files"} <= tables:
            builds = {}  # a new catalog (or one a client dropped a table of): everything is built
        built: dict[str, str] = {}
        for source in MATERIALIZED_SOURCES:
            now, before = listing[source], known[source]
            digest = _digest(materialize_digest(source))
            stale = [path for path, stamp in before.items() if now.get(path) != stamp]
            added = {path: stamp for path, stamp in now.items() if before.get(path) != stamp}
            if builds.get(source) != digest or (stale and source != "steps"):
                statements = materialize_statements(source, list(now), self._columns(now))
            elif added or stale:
                statements = materialize_statements(source, list(added), self._columns(added), append=True,
                                                    stale=stale)
            else:
                continue
            for statement in statements:
                con.execute(statement)
            con.execute(f"DELETE FROM {m}.files WHERE source = ?", [source])
            if now:
                con.execute(f"INSERT INTO {m}.files SELECT ?, unnest(?), unnest(?)", [source, list(now), list(now.values())])
            built[source] = digest
        if "runs" in built or "steps" in built:
            con.execute(STEP_FILES)
        steps = listing["steps"]
        whole: dict[str, str] = {}
        partial: dict[str, str] = {}
        for path, is_whole in con.execute(f"SELECT path, whole FROM {m}.step_files ORDER BY path").fetchall():
            (whole if is_whole else partial)[path] = steps[path]
        files = StepFiles(list(whole), self._columns(whole), list(partial), self._columns(partial))
        views = {r[0] for r in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'main'"
        ).fetchall()}
        for statement in view_statements(*self._globs(listing), materialized=files):
            name = statement.split(None, 5)[4]  # CREATE OR REPLACE VIEW <name> AS ...
            digest = _digest(statement)
            if builds.get(f"view {name}") != digest or name not in views:
                con.execute(statement)
                built[f"view {name}"] = digest
        if built:
            con.execute(f"DELETE FROM {m}.builds WHERE name IN (SELECT unnest(?))", [list(built)])
            con.execute(f"INSERT INTO {m}.builds SELECT unnest(?), unnest(?)", [list(built), list(built.values())])

    def refresh_catalog(self) -> None:
        """Bring the catalog file up to date with the tables as they are now (a table may have gained files):
        what a client that opens the file itself (`duckdb rootstep-data/catalog.duckdb`) reads."""
        try:
            con = duckdb.connect(self.catalog)
        except duckdb.IOException:
            return  # another process holds the catalog; it is brought up to date when it is next connected to
        try:
            self._register(con)
            self._materialize(con)
        finally:
            con.close()

    def _register(self, con: duckdb.DuckDBPyConnection) -> None:
        if not self.local:
            con.register_filesystem(self.fs)

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A DuckDB connection with every view, which sees every file written before it was made.

        The catalog file's, brought up to date first (`_materialize`); when another process holds the catalog
        file, an in-memory connection whose views read the files on each query (materializing there would be
        done for this connection alone: it would pay only over many queries)."""
        try:
            con = duckdb.connect(self.catalog)
            in_catalog = True
        except duckdb.IOException:
            con = duckdb.connect()
            in_catalog = False
        try:
            self._register(con)
            if in_catalog:
                self._materialize(con)
            else:
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


def _stamp(info: dict[str, Any]) -> str:
    """A file's version as its filesystem describes it: its size and whichever of its times, inode or ETag the
    filesystem reports (a file replaced in place has another)."""
    return " ".join(str(info.get(key, "")) for key in ("size", "mtime", "created", "LastModified", "ETag", "ino"))


def _digest(text: str) -> str:
    return sha256(text.encode()).hexdigest()[:32]


_CATALOG_LOCKS: dict[str, threading.Lock] = {}
_CATALOG_LOCKS_GUARD = threading.Lock()


def _catalog_lock(catalog: str) -> threading.Lock:
    """One lock per catalog file in this process: two threads bringing it up to date at once would conflict
    (DuckDB lets one process open the file; connections of one process share it)."""
    key = os.path.realpath(catalog)
    with _CATALOG_LOCKS_GUARD:
        return _CATALOG_LOCKS.setdefault(key, threading.Lock())


def _protocols(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


__all__ = ["Warehouse", "WriteReport", "default_location", "PARTITION_COLUMNS"]
