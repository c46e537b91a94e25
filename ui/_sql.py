"""The SQL box: read-only queries over the warehouse views, with a row limit and a time limit.

Each query gets its own in-memory DuckDB connection that cannot touch the file system:

* the raw tables are handed to DuckDB as Arrow datasets opened by this (trusted) process, so the
  views work with `enable_external_access = false`; no `read_parquet`, `read_csv`, `glob`, `COPY ... TO`,
  `ATTACH`, `INSTALL` or `LOAD` can reach a file, and Python replacement scans are off;
* the configuration is then locked (`lock_configuration = true`): the query cannot turn any of it back on;
* only read statements are accepted (SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN, PRAGMA); anything
  else is refused before it runs, and would be refused again by DuckDB for any file it names;
* a timer interrupts the query after `timeout_s`; at most `max_rows` rows are fetched.

The connection is thrown away after the query: nothing a query creates outlives it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds

from rootstep.warehouse import Warehouse
from rootstep.warehouse import PUBLIC_VIEWS, view_statements
from rootstep.warehouse import PARTITION_COLUMNS, SCHEMAS

READ_STATEMENTS = {"SELECT", "EXPLAIN", "PRAGMA"}
"""DuckDB statement types the box runs (DESCRIBE, SHOW, SUMMARIZE and WITH parse as SELECT)."""


class QueryRefused(Exception):
    """The statement is not a read, or names something the sandbox does not allow."""


@dataclass
class QueryResult:
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    truncated: bool = False
    """More rows existed than `max_rows`."""
    seconds: float = 0.0


def _hive() -> ds.Partitioning:
    return ds.partitioning(pa.schema([(c, pa.string()) for c in PARTITION_COLUMNS]), flavor="hive")


def _dataset(warehouse: Warehouse, table: str) -> ds.Dataset | None:
    files = warehouse.table_files(table)
    if not files:
        return None
    schema = SCHEMAS[table]
    for column in PARTITION_COLUMNS:
        schema = schema.append(pa.field(column, pa.string()))
    return ds.dataset(files, schema=schema, format="parquet", filesystem=warehouse.fs, partitioning=_hive(),
                      partition_base_dir=warehouse.table_dir(table))


def sandbox_connection(warehouse: Warehouse, *, memory_limit: str = "1GB", threads: int = 2) -> duckdb.DuckDBPyConnection:
    """An in-memory connection with every warehouse view, no file access, its configuration locked."""
    con = duckdb.connect(":memory:")
    try:
        statements = view_statements({t: None for t in SCHEMAS})
        for table in SCHEMAS:
            dataset = _dataset(warehouse, table)
            raw = f"CREATE OR REPLACE VIEW raw_{table} AS "
            if dataset is not None:
                con.register(f"arrow_{table}", dataset)
                statements = [raw + f"SELECT * FROM arrow_{table}" if s.startswith(raw) else s for s in statements]
        for statement in statements:
            con.execute(statement)
        con.execute("SET python_enable_replacements = false")
        con.execute(f"SET memory_limit = '{memory_limit}'")
        con.execute(f"SET threads = {int(threads)}")
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse anything but read statements, naming the statement type."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRefused(str(exc)) from None
    if not statements:
        raise QueryRefused("the query is empty")
    for statement in statements:
        kind = statement.type.name
        if kind not in READ_STATEMENTS:
            raise QueryRefused(
                f"the SQL box is read-only: {kind} statements are refused "
                "(it runs SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN and PRAGMA)"
            )


def run_query(warehouse: Warehouse, sql: str, *, max_rows: int = 500, timeout_s: float = 10.0) -> QueryResult:
    """Run one read-only query. Raises `QueryRefused` (not a read), `TimeoutError` (over `timeout_s`)
    or `duckdb.Error` (anything DuckDB rejects, file access included)."""
    con = sandbox_connection(warehouse)
    timed_out = threading.Event()

    def interrupt() -> None:
        timed_out.set()
        con.interrupt()

    timer = threading.Timer(timeout_s, interrupt)
    started = time.perf_counter()
    timer.start()
    try:
        check_read_only(con, sql)
        cursor = con.execute(sql)
        columns = [d[0] for d in cursor.description or []]
        rows = cursor.fetchmany(max_rows + 1)
    except duckdb.InterruptException:
        if timed_out.is_set():
            raise TimeoutError(f"the query was stopped after the time limit of {timeout_s:g} s") from None
        raise
    finally:
        timer.cancel()
        con.close()
    return QueryResult(columns=columns, rows=rows[:max_rows], truncated=len(rows) > max_rows,
                       seconds=time.perf_counter() - started)


def view_columns(warehouse: Warehouse) -> dict[str, list[tuple[str, str]]]:
    """(column, type) of every public view, and of any other view the catalog defines (e.g. `quality`)."""
    con = sandbox_connection(warehouse)
    try:
        names = [r[0] for r in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT starts_with(view_name, 'raw_') "
            "AND NOT starts_with(view_name, 'arrow_') ORDER BY view_name").fetchall()]
        ordered = [v for v in PUBLIC_VIEWS if v in names] + [v for v in names if v not in PUBLIC_VIEWS]
        return {v: [(r[0], r[1]) for r in con.execute(f'DESCRIBE "{v}"').fetchall()] for v in ordered}
    finally:
        con.close()
