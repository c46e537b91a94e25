"""The DuckDB views over the Parquet tables: what `rootstep sql` and any DuckDB client query.

Raw tables are read with hive partitioning (`framework=`, `benchmark=` folders). The public views
hide what the append-only layout leaves behind:

* `runs`, `llm_calls`, `replays`, `annotations` keep one row per id (two writers racing on the same
  content-derived id cannot make a duplicate visible);
* `steps` only shows steps whose run row was committed by the same write batch (the run row is
  written last, so the steps of a batch that crashed half-way stay invisible);
* `labels` is the latest verified label of each run (with its `confidence`; re-checks never count);
  `label_steps` lists every step of every label (multi-step labels have several); `unproven_earliest`
  and `not_causal` hold flips that are not labels; `agreement` pairs re-checks with their labels; `successes` / `failures` split runs by Omega
  (original runs only: a replayed run, `parent_run_id` set, is in neither);
* `verdict_suspect`: failures whose verdict may be the verifier's misreading of a right answer (the
  reason); `verifier_suspect`: annotations that found no agent error; `quality` and `label_positions`:
  the pipeline's yield, cost per label and where labels sit (see `rootstep quality`).

In the catalog file (`view_statements(..., materialized=...)`) `runs`, `annotations` and `labels` read tables of
the `materialized` schema instead: the same rows, deduplicated once when the files were listed rather than on
every query (`materialize_statements`), kept up to date by `Warehouse` (appended to as files are added, rebuilt
when a file it read changed or went). `steps` reads the step files listed in `materialized.step_files` (those
with a committed step): whole files as they are, and only in a file that also holds uncommitted steps is every
row checked against `runs`. Without `materialized` (an in-memory connection, the UI's sandbox) every view reads
the Parquet files on each query.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import NamedTuple

from ._schemas import LEGACY_ANNOTATION_COLUMNS, LEGACY_RUN_COLUMNS, PARTITION_COLUMNS, SCHEMAS, duck_type


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class FileColumns(NamedTuple):
    """Which of a table's columns its Parquet files hold: in any of them, and in every one."""

    any: frozenset[str]
    every: frozenset[str]


def _files_sql(files: str | Sequence[str]) -> str:
    """A glob, or a list of files, as `read_parquet`'s first argument."""
    if isinstance(files, str):
        return _sql_string(files)
    return "[" + ", ".join(_sql_string(f) for f in files) + "]"


def raw_source(table: str, glob: str | Sequence[str] | None, columns: FileColumns | None = None) -> str:
    """SQL that reads one raw table: its Parquet files (a glob, or a list of files), or an empty typed relation
    when it has none.

    Every column of the table's schema is there: one that no file holds (written before the column was added)
    reads as a typed NULL, so a warehouse written by an older rootstep stays readable. With `columns` (what the
    files hold, read from their footers) that is a plain projection of `read_parquet`, which DuckDB reads only the
    queried columns of (and, when every file holds the same columns, without unifying their schemas on each
    query: `union_by_name` made a read of six files 3x slower); without, the files are read on top of an empty
    typed relation (`UNION ALL BY NAME`), which reads every column (3-6x slower on the bench's label queries)."""
    typed = [f"CAST(NULL AS VARCHAR) AS {c}" for c in PARTITION_COLUMNS]
    typed += [f"CAST(NULL AS {duck_type(f.type)}) AS {f.name}" for f in SCHEMAS[table]]
    empty = f"SELECT {', '.join(typed)} WHERE false"
    if not glob:
        return empty
    hive_types = ", ".join(f"'{c}': 'VARCHAR'" for c in PARTITION_COLUMNS)
    files = (f"read_parquet({_files_sql(glob)}, hive_partitioning = true, hive_types = {{{hive_types}}}, "
             "union_by_name = true)")
    if columns is None:
        return f"{empty} UNION ALL BY NAME SELECT * FROM {files}"
    if columns.any == columns.every:  # one set of columns in every file: no unifying of schemas per query
        files = f"read_parquet({_files_sql(glob)}, hive_partitioning = true, hive_types_autocast = false)"
    projected = [*PARTITION_COLUMNS] + [f.name if f.name in columns.any else f"CAST(NULL AS {duck_type(f.type)}) AS {f.name}"
                                        for f in SCHEMAS[table]]
    return f"SELECT {', '.join(projected)} FROM {files}"


def _ordered_columns(table: str, columns: FileColumns | None = None) -> str:
    """The table's columns, id and partitions first; a run row written before the recording columns
    existed has them NULL, and they are read from where it kept them (`LEGACY_RUN_COLUMNS`). With `columns`,
    only where some file lacks the column: a warehouse written by this version reads its columns as they are."""
    names = [SCHEMAS[table].field(0).name, *PARTITION_COLUMNS, *SCHEMAS[table].names[1:]]

    def legacy(name: str) -> bool:
        return columns is None or name not in columns.every

    if table == "runs":
        names = [f"coalesce({n}, {LEGACY_RUN_COLUMNS[n]}) AS {n}" if n in LEGACY_RUN_COLUMNS and legacy(n) else n
                 for n in names]
    if table == "annotations" and legacy("steps"):  # a row from before the typed label columns has `steps` NULL
        names = [f"CASE WHEN steps IS NULL THEN {LEGACY_ANNOTATION_COLUMNS[n]} ELSE {n} END AS {n}"
                 if n in LEGACY_ANNOTATION_COLUMNS else n for n in names]
    return ", ".join(names)


MATERIALIZED = "materialized"
"""The catalog's schema of the deduplicated tables behind `runs`, `annotations` and `labels`, the committed
(run, batch) pairs of each step file (`step_runs`, `step_files`), and what they were built from (`files`,
`builds`, written by `Warehouse`)."""

MATERIALIZED_SOURCES = ("runs", "annotations", "steps")
"""The raw tables the materialized tables are built from (`annotations` builds `labels` too)."""

_DEDUPE_ORDER = {"runs": "batch_id", "llm_calls": "created_at", "replays": "created_at", "annotations": "created_at"}
"""Of the rows of one id, the view keeps the first in this order (rows of one id hold the same content)."""


class StepFiles(NamedTuple):
    """The step files with a committed step: `whole` where every step is committed, `partial` where some are
    not (a batch that crashed, or lost a race, half-way), and the columns each group's files hold."""

    whole: Sequence[str] = ()
    whole_columns: FileColumns | None = None
    partial: Sequence[str] = ()
    partial_columns: FileColumns | None = None


def _deduped(table: str, source: str, columns: FileColumns | None) -> str:
    """One row per id of `table` from `source` (raw rows), its columns in the view's order."""
    return (f"SELECT {_ordered_columns(table, columns)} FROM {source} "
            f"QUALIFY row_number() OVER (PARTITION BY id ORDER BY {_DEDUPE_ORDER[table]}) = 1")


_LATEST_LABEL = "QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY created_at DESC, id DESC) = 1"


def _labels(source: str, columns: FileColumns | None) -> str:
    """The latest verified non-recheck label of each run among `source`'s raw annotation rows.

    Straight from the raw rows: one row per run is also one row per id (an id is its content, so the rows of one
    id are the same row), and one window instead of two halved the label queries of bench/warehouse.py."""
    return (f"SELECT {_ordered_columns('annotations', columns)} FROM {source} "
            f"WHERE verified AND status = 'labelled' AND {_NOT_RECHECK} {_LATEST_LABEL}")


def _committed_steps(source: str, columns: FileColumns | None, runs: str) -> str:
    return (f"SELECT {_ordered_columns('steps', columns)} FROM {source} s "
            f"WHERE EXISTS (SELECT 1 FROM {runs} r WHERE r.id = s.run_id AND r.batch_id = s.batch_id)")


def _materialized_steps(files: StepFiles) -> str:
    parts = []
    if files.whole:
        parts.append(f"SELECT {_ordered_columns('steps', files.whole_columns)} "
                     f"FROM ({raw_source('steps', files.whole, files.whole_columns)})")
    if files.partial:
        parts.append(_committed_steps(f"({raw_source('steps', files.partial, files.partial_columns)})",
                                      files.partial_columns, f"{MATERIALIZED}.runs"))
    if not parts:
        parts.append(f"SELECT {_ordered_columns('steps')} FROM ({raw_source('steps', None)})")
    return " UNION ALL ".join(parts)


def view_statements(globs: dict[str, str | None], columns: dict[str, FileColumns] | None = None,
                    materialized: StepFiles | None = None) -> list[str]:
    """CREATE VIEW statements for every view, given each raw table's glob (or None when it is empty) and, when
    known, the columns its files hold (`FileColumns`: the raw views then read only what a query needs).

    With `materialized` (the step files with a committed step), `runs`, `annotations` and `labels` read the
    tables `materialize_statements` built in the `MATERIALIZED` schema, and `steps` reads those step files."""
    held = columns or {}
    statements = [f"CREATE OR REPLACE VIEW raw_{t} AS {raw_source(t, globs.get(t), held.get(t))}" for t in SCHEMAS]
    for table in ("runs", "llm_calls", "replays", "annotations"):
        if materialized is not None and table in MATERIALIZED_SOURCES:
            statements.append(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM {MATERIALIZED}.{table}")
        else:
            statements.append(f"CREATE OR REPLACE VIEW {table} AS {_deduped(table, f'raw_{table}', held.get(table))}")
    if materialized is not None:
        statements += [f"CREATE OR REPLACE VIEW steps AS {_materialized_steps(materialized)}",
                       f"CREATE OR REPLACE VIEW labels AS SELECT * FROM {MATERIALIZED}.labels"]
    else:
        statements += [
            f"CREATE OR REPLACE VIEW steps AS {_committed_steps('raw_steps', held.get('steps'), 'runs')}",
            f"CREATE OR REPLACE VIEW labels AS {_labels('raw_annotations', held.get('annotations'))}",
        ]
    statements += [
        _LABEL_STEPS,
        "CREATE OR REPLACE VIEW unproven_earliest AS SELECT * FROM annotations a "
        f"WHERE status = 'unproven_earliest' AND {_NOT_RECHECK} "
        "AND NOT EXISTS (SELECT 1 FROM labels l WHERE l.run_id = a.run_id)",
        f"CREATE OR REPLACE VIEW not_causal AS SELECT * FROM annotations WHERE status = 'not_causal' AND {_NOT_RECHECK}",
        _AGREEMENT,
        "CREATE OR REPLACE VIEW successes AS SELECT * FROM runs WHERE success AND parent_run_id IS NULL",
        "CREATE OR REPLACE VIEW failures AS SELECT * FROM runs WHERE NOT success AND parent_run_id IS NULL",
        "CREATE OR REPLACE VIEW unresolved AS SELECT * FROM annotations a WHERE status = 'unresolved' "
        "AND method = 'counterfactual' AND NOT EXISTS (SELECT 1 FROM labels l WHERE l.run_id = a.run_id)",
        "CREATE OR REPLACE VIEW verdict_suspect AS SELECT id AS run_id, framework, benchmark, task_id, "
        "json_extract_string(verdict_details, '$.suspect') AS reason, final_answer, ground_truth, model "
        "FROM failures WHERE json_extract_string(verdict_details, '$.suspect') IS NOT NULL",
        "CREATE OR REPLACE VIEW verifier_suspect AS SELECT * FROM annotations WHERE status = 'verifier_suspect' "
        f"AND {_NOT_RECHECK}",
        _QUALITY,
        _LABEL_POSITIONS,
        _SEARCH_CUTS,
    ]
    return statements


MATERIALIZED_STATE = [
    f"CREATE SCHEMA IF NOT EXISTS {MATERIALIZED}",
    f"CREATE TABLE IF NOT EXISTS {MATERIALIZED}.files (source VARCHAR, path VARCHAR, stamp VARCHAR)",
    f"CREATE TABLE IF NOT EXISTS {MATERIALIZED}.builds (name VARCHAR, digest VARCHAR)",
]
"""The tables that say what the materialized tables were built from: each source's files (`path`: as
`read_parquet` was given it; `stamp`: its size and modification time), and a digest of each build's SQL and of
each view's (a table or view whose definition changed is rebuilt)."""

_FORMAT = "materialized tables, format 1"
"""Part of every build's digest: a change to how the tables are kept up to date rebuilds them."""


def materialize_statements(source: str, files: Sequence[str], columns: FileColumns | None = None, *,
                           append: bool = False, stale: Sequence[str] = ()) -> list[str]:
    """Statements that build the materialized tables of one raw table (`MATERIALIZED_SOURCES`) from `files`.

    Without `append`, from scratch: `files` are all of the table's files. With `append`, `files` were added
    since the last build: their rows join the tables where they come first (the pick of each table is a first
    or a latest of the raw rows, so the pick among the kept rows and the new ones is the pick among all rows).
    Step files are independent of each other: `stale` ones (changed or gone) lose their rows, and changed ones
    are among `files` again. A run or annotation file that changed or went needs a build from scratch."""
    m = MATERIALIZED
    if source == "steps":
        pairs = (f"SELECT DISTINCT filename AS path, run_id, batch_id FROM read_parquet({_files_sql(files)}, "
                 "filename = true, union_by_name = true)" if files else
                 "SELECT CAST(NULL AS VARCHAR) AS path, CAST(NULL AS VARCHAR) AS run_id, "
                 "CAST(NULL AS VARCHAR) AS batch_id WHERE false")
        if not append:
            return [f"CREATE OR REPLACE TABLE {m}.step_runs AS {pairs}"]
        gone = ", ".join(_sql_string(f) for f in stale)
        statements = [f"DELETE FROM {m}.step_runs WHERE path IN ({gone})"] if stale else []
        return statements + ([f"INSERT INTO {m}.step_runs {pairs}"] if files else [])
    raw = f"({raw_source(source, files, columns)})"
    if not append:
        statements = [f"CREATE OR REPLACE TABLE {m}.{source} AS {_deduped(source, raw, columns)}"]
        if source == "annotations":
            statements.append(f"CREATE OR REPLACE TABLE {m}.labels AS {_labels(raw, columns)}")
        return statements
    if not files:
        return []
    fresh, pick = f"{m}_fresh_{source}", f"{m}_pick_{source}"
    statements = [
        f"CREATE OR REPLACE TEMP TABLE {fresh} AS {raw_source(source, files, columns)}",
        f"CREATE OR REPLACE TEMP TABLE {pick} AS SELECT * FROM ("
        f"SELECT * FROM {m}.{source} WHERE id IN (SELECT id FROM {fresh}) "
        f"UNION ALL BY NAME {_deduped(source, fresh, columns)}) "
        f"QUALIFY row_number() OVER (PARTITION BY id ORDER BY {_DEDUPE_ORDER[source]}) = 1",
        f"DELETE FROM {m}.{source} WHERE id IN (SELECT id FROM {pick})",
        f"INSERT INTO {m}.{source} BY NAME SELECT * FROM {pick}",
    ]
    if source == "annotations":
        statements += [
            f"CREATE OR REPLACE TEMP TABLE {pick} AS SELECT * FROM ("
            f"SELECT * FROM {m}.labels WHERE run_id IN (SELECT run_id FROM {fresh}) "
            f"UNION ALL BY NAME {_labels(fresh, columns)}) {_LATEST_LABEL}",
            f"DELETE FROM {m}.labels WHERE run_id IN (SELECT run_id FROM {pick})",
            f"INSERT INTO {m}.labels BY NAME SELECT * FROM {pick}",
        ]
    return statements + [f"DROP TABLE {fresh}", f"DROP TABLE {pick}"]


@cache
def materialize_digest(source: str) -> str:
    """What a build of `source`'s materialized tables depends on besides its files (changed: build anew)."""
    full = materialize_statements(source, ["<files>"])
    step = materialize_statements(source, ["<files>"], append=True, stale=["<stale>"])
    return "\n".join([_FORMAT, *full, *step])


STEP_FILES = f"""CREATE OR REPLACE TABLE {MATERIALIZED}.step_files AS
SELECT p.path, count(r.id) = count(*) AS whole
FROM {MATERIALIZED}.step_runs p LEFT JOIN {MATERIALIZED}.runs r ON r.id = p.run_id AND r.batch_id = p.batch_id
GROUP BY p.path HAVING count(r.id) > 0"""
"""The step files with a committed step (a step whose run row, of the same batch, is in `runs`), and whether
every step of the file is (`whole`): what the materialized `steps` view reads (`StepFiles`)."""


_NOT_RECHECK = "recheck_of IS NULL"

_LABEL_STEPS = """CREATE OR REPLACE VIEW label_steps AS
WITH l AS (
  SELECT id, run_id, framework, benchmark, method, agent, step AS primary_step, confidence,
         CASE WHEN len(steps) > 0 THEN steps ELSE [step] END AS all_steps FROM labels)
SELECT l.id AS annotation_id, l.run_id, l.framework, l.benchmark, l.method, u.step, coalesce(s.agent, l.agent) AS agent,
       u.step = l.primary_step AS is_primary, len(l.all_steps) > 1 AS multi_step, l.confidence
FROM l, unnest(l.all_steps) AS u(step)
LEFT JOIN steps s ON s.run_id = l.run_id AND s.step = u.step
ORDER BY l.run_id, u.step"""
"""Every step of every label: one row per step (a multi-step label, the joint fix of a repeated error, has
several; `is_primary` marks the earliest, which is the label's own step)."""

_AGREEMENT = """CREATE OR REPLACE VIEW agreement AS
SELECT o.framework, o.benchmark, o.run_id, o.id AS label_id, o.agent AS label_agent, o.step AS label_step,
       r.id AS recheck_id, r.status AS recheck_status, r.agent AS recheck_agent, r.step AS recheck_step,
       coalesce(r.recheck_agrees, false) AS agrees,
       r.created_at AS rechecked_at
FROM annotations r JOIN annotations o ON o.id = r.recheck_of"""
"""Each re-check (`rootstep annotate --recheck N`: the label re-done from scratch) beside the label it re-did,
and whether the (agent, step) agree."""

_QUALITY = """CREATE OR REPLACE VIEW quality AS
WITH collected AS (SELECT * FROM runs WHERE parent_run_id IS NULL AND source = 'rootstep'),
r AS (
  SELECT framework, benchmark, count(*) AS runs, count(*) FILTER (WHERE success) AS successes,
         count(*) FILTER (WHERE NOT success) AS failures,
         count(*) FILTER (WHERE NOT success AND json_extract_string(verdict_details, '$.suspect') IS NOT NULL)
           AS suspect_verdicts
  FROM collected GROUP BY ALL),
ann AS (
  SELECT a.*, a.status = 'labelled' AND a.verified AS is_label, greatest(coalesce(x.n_steps, 1) - 1, 1) AS last_step,
         a.confidence, coalesce(a.answer_leaks, 0) AS answer_leaks, coalesce(len(a.steps) > 1, false) AS multi_step,
         a.edit.share AS edit_share
  FROM annotations a LEFT JOIN runs x ON x.id = a.run_id
  WHERE a.method IN ('counterfactual', 'fault_injection') AND a.recheck_of IS NULL),
a AS (
  SELECT framework, benchmark,
         count(DISTINCT run_id) FILTER (WHERE method = 'counterfactual' AND is_label) AS counterfactual_labels,
         count(DISTINCT run_id) FILTER (WHERE method = 'counterfactual' AND status = 'verifier_suspect')
           AS verifier_suspect,
         count(DISTINCT run_id) FILTER (WHERE method = 'counterfactual' AND status = 'unresolved') AS unresolved,
         count(DISTINCT run_id) FILTER (WHERE method = 'fault_injection' AND is_label) AS flips,
         count(*) FILTER (WHERE is_label) AS labels,
         count(DISTINCT run_id) FILTER (WHERE status = 'not_causal') AS not_causal,
         count(DISTINCT run_id) FILTER (WHERE status = 'unproven_earliest') AS unproven_earliest,
         sum(answer_leaks) AS answer_leaks,
         count(*) FILTER (WHERE is_label AND multi_step) AS multi_step_labels,
         count(*) FILTER (WHERE is_label AND confidence >= 0.95) AS confidence_high,
         count(*) FILTER (WHERE is_label AND confidence >= 0.8 AND confidence < 0.95) AS confidence_medium,
         count(*) FILTER (WHERE is_label AND (confidence < 0.8 OR confidence IS NULL)) AS confidence_low,
         median(edit_share) FILTER (WHERE is_label) AS median_edit_share,
         sum(cost_llm_calls) AS llm_calls, sum(cost_usd) AS usd,
         avg(step / last_step) FILTER (WHERE is_label) AS mean_position
  FROM ann GROUP BY ALL),
agr AS (
  SELECT framework, benchmark, count(*) AS rechecks, count(*) FILTER (WHERE agrees) AS rechecks_agreeing
  FROM agreement GROUP BY ALL),
inj AS (
  SELECT framework, benchmark, count(DISTINCT run_id) AS injection_attempts, count(*) AS injection_replays
  FROM replays WHERE purpose = 'fault_injection' GROUP BY ALL)
SELECT r.framework, r.benchmark, r.runs, r.successes, r.failures, r.suspect_verdicts,
       coalesce(a.counterfactual_labels, 0) AS counterfactual_labels, coalesce(a.verifier_suspect, 0) AS verifier_suspect,
       coalesce(a.unresolved, 0) AS unresolved, coalesce(inj.injection_attempts, 0) AS injection_attempts,
       coalesce(inj.injection_replays, 0) AS injection_replays, coalesce(a.flips, 0) AS flips,
       round(100.0 * coalesce(a.labels, 0) / r.runs, 1) AS labels_per_100_runs,
       round(a.llm_calls / nullif(a.labels, 0), 1) AS live_calls_per_label,
       round(a.usd / nullif(a.labels, 0), 6) AS usd_per_label,
       round(a.mean_position, 2) AS mean_label_position,
       coalesce(a.not_causal, 0) AS not_causal, coalesce(a.unproven_earliest, 0) AS unproven_earliest,
       coalesce(a.answer_leaks, 0) AS answer_leaks, coalesce(a.multi_step_labels, 0) AS multi_step_labels,
       coalesce(a.confidence_high, 0) AS confidence_high, coalesce(a.confidence_medium, 0) AS confidence_medium,
       coalesce(a.confidence_low, 0) AS confidence_low, round(a.median_edit_share, 3) AS median_edit_share,
       coalesce(agr.rechecks, 0) AS rechecks, round(agr.rechecks_agreeing / nullif(agr.rechecks, 0), 2) AS agreement
FROM r LEFT JOIN a USING (framework, benchmark) LEFT JOIN inj USING (framework, benchmark)
LEFT JOIN agr USING (framework, benchmark)
ORDER BY r.framework, r.benchmark"""
"""Yield and cost of the annotation pipeline per framework x benchmark, over the runs rootstep collected.
Counts are of runs; `injection_attempts` are successes corrupted at least once, `flips` those that gave
a label; `live_calls_per_label` / `usd_per_label` divide the cost of every search (unresolved and
not-flipped ones included, control replays included) by the verified labels; `mean_label_position` is the
label's step as a share of its run (0 = first step, 1 = last). Issue 23: `not_causal` (a flip its control
showed too), `unproven_earliest` (a flip with earlier steps untested), `answer_leaks` (fixes / corruptions
rejected for handing over or planting an answer), `multi_step_labels`, labels by confidence band (high
>= 0.95, medium >= 0.8, low: `rootstep.annotation._confidence.BANDS`), `median_edit_share` (the share of its step a label's fix or corruption
changed), and `rechecks` / `agreement` (the share of re-checks that found the same agent and step)."""

_LABEL_POSITIONS = """CREATE OR REPLACE VIEW label_positions AS
WITH agent_steps AS (
  SELECT run_id, min(step) AS first_agent_step, max(step) AS last_agent_step FROM steps WHERE kind = 'agent'
  GROUP BY run_id
), placed AS (
  SELECT l.framework, l.benchmark, l.method, l.step, r.n_steps, l.step / greatest(r.n_steps - 1, 1) AS share,
         l.step = a.first_agent_step AS on_first, l.step = a.last_agent_step AS on_last, l.fixed_turn
  FROM labels l JOIN runs r ON r.id = l.run_id LEFT JOIN agent_steps a ON a.run_id = l.run_id
  WHERE l.method IN ('counterfactual', 'fault_injection')
)
SELECT framework, benchmark, method, count(*) AS labels,
       median(step) AS median_step, min(step) AS min_step, max(step) AS max_step,
       round(median(share), 2) AS median_position, round(avg(share), 2) AS mean_position,
       round(median(n_steps), 1) AS median_run_steps,
       count(*) FILTER (WHERE NOT coalesce(on_first, false)) AS not_on_first_agent_step,
       count(*) FILTER (WHERE on_last) AS on_last_agent_step,
       count(*) FILTER (WHERE fixed_turn IS NOT NULL) AS first_failure_labels
FROM placed GROUP BY ALL ORDER BY framework, benchmark, method"""
"""Where verified labels sit, per framework x benchmark x method: the step (median, range), the step as a share of
the run (0 first, 1 last), the runs' length, and how many labels are not on the run's first agent step, or are on
its last one (a corpus of first- or last-step labels teaches a tracer to blame that step); `first_failure_labels`:
multi-turn labels whose fix got the run past the turn it failed at, not to a success (`fixed_turn`)."""

_SEARCH_CUTS = """CREATE OR REPLACE VIEW search_cuts AS
WITH s AS (
  SELECT framework, benchmark, method, status, verified,
         search_stats.cut_by AS cut_by, CAST(search_stats.replays AS DOUBLE) AS replays,
         CAST(search_stats.analyzer_calls AS DOUBLE) AS analyzer_calls, search_stats.seconds AS seconds
  FROM annotations
  WHERE method IN ('counterfactual', 'fault_injection') AND recheck_of IS NULL
    AND search_stats.cut_by IS NOT NULL)
SELECT framework, benchmark, method, cut_by, count(*) AS searches,
       count(*) FILTER (WHERE status = 'labelled' AND verified) AS labelled_anyway,
       round(avg(replays), 1) AS mean_replays, round(avg(analyzer_calls), 1) AS mean_analyzer_calls,
       round(avg(seconds)) AS mean_seconds
FROM s GROUP BY ALL ORDER BY framework, benchmark, method, cut_by"""
"""Searches that a limit cut before they had done all they would have done, per limit (`cut_by`: `replays`,
`llm_calls`, `live_calls`, `tokens` for the work budgets, `open_steps` for a scan that stopped once no later flip
could be a label, `wall_clock` for the outer safety limit), with
what they had done: replays (controls apart), analyzer / perturber calls and seconds since admission."""


PUBLIC_VIEWS = ("runs", "steps", "llm_calls", "replays", "annotations", "labels", "label_steps", "successes", "failures",
                "unresolved", "unproven_earliest", "not_causal", "agreement", "verdict_suspect", "verifier_suspect",
                "quality", "label_positions", "search_cuts")
