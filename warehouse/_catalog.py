"""The DuckDB views over the Parquet tables: what `rootstep sql` and any DuckDB client query.

Raw tables are read with hive partitioning (`framework=`, `benchmark=` folders). The public views
hide what the append-only layout leaves behind:

* `runs`, `llm_calls`, `replays`, `annotations` keep one row per id (two writers racing on the same
  content-derived id cannot make a duplicate visible);
* `steps` only shows steps whose run row was committed by the same write batch (the run row is
  written last, so the steps of a batch that crashed half-way stay invisible);
* `labels` is the latest verified label of each run; `successes` / `failures` split runs by Omega
  (original runs only: a replayed run, `parent_run_id` set, is in neither).
"""

from __future__ import annotations

import pyarrow as pa

from ._schemas import PARTITION_COLUMNS, SCHEMAS

_DUCK_TYPES = {
    pa.string(): "VARCHAR",
    pa.bool_(): "BOOLEAN",
    pa.float64(): "DOUBLE",
    pa.int64(): "BIGINT",
    pa.int32(): "INTEGER",
    pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ",
    pa.list_(pa.string()): "VARCHAR[]",
}


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def raw_source(table: str, glob: str | None) -> str:
    """SQL that reads one raw table: its Parquet files, or an empty typed relation when it has none."""
    if glob is not None:
        hive_types = ", ".join(f"'{c}': 'VARCHAR'" for c in PARTITION_COLUMNS)
        return (
            f"SELECT * FROM read_parquet({_sql_string(glob)}, hive_partitioning = true, "
            f"hive_types = {{{hive_types}}}, union_by_name = true)"
        )
    columns = [f"CAST(NULL AS VARCHAR) AS {c}" for c in PARTITION_COLUMNS]
    columns += [f"CAST(NULL AS {_DUCK_TYPES[f.type]}) AS {f.name}" for f in SCHEMAS[table]]
    return f"SELECT {', '.join(columns)} WHERE false"


def _ordered_columns(table: str) -> str:
    names = [SCHEMAS[table].field(0).name, *PARTITION_COLUMNS, *SCHEMAS[table].names[1:]]
    return ", ".join(names)


def view_statements(globs: dict[str, str | None]) -> list[str]:
    """CREATE VIEW statements for every view, given each raw table's glob (or None when it is empty)."""
    statements = [f"CREATE OR REPLACE VIEW raw_{t} AS {raw_source(t, globs.get(t))}" for t in SCHEMAS]
    for table in ("runs", "llm_calls", "replays", "annotations"):
        order = "batch_id" if table == "runs" else "created_at"
        statements.append(
            f"CREATE OR REPLACE VIEW {table} AS SELECT {_ordered_columns(table)} FROM raw_{table} "
            f"QUALIFY row_number() OVER (PARTITION BY id ORDER BY {order}) = 1"
        )
    statements += [
        f"CREATE OR REPLACE VIEW steps AS SELECT {_ordered_columns('steps')} FROM raw_steps s "
        "WHERE EXISTS (SELECT 1 FROM runs r WHERE r.id = s.run_id AND r.batch_id = s.batch_id)",
        "CREATE OR REPLACE VIEW labels AS SELECT * FROM annotations "
        "WHERE verified AND status = 'labelled' "
        "QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY created_at DESC, id DESC) = 1",
        "CREATE OR REPLACE VIEW successes AS SELECT * FROM runs WHERE success AND parent_run_id IS NULL",
        "CREATE OR REPLACE VIEW failures AS SELECT * FROM runs WHERE NOT success AND parent_run_id IS NULL",
        "CREATE OR REPLACE VIEW unresolved AS SELECT * FROM annotations a WHERE status = 'unresolved' "
        "AND NOT EXISTS (SELECT 1 FROM labels l WHERE l.run_id = a.run_id)",
    ]
    return statements


PUBLIC_VIEWS = ("runs", "steps", "llm_calls", "replays", "annotations", "labels", "successes", "failures", "unresolved")
