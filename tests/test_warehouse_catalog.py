"""The catalog file's materialized tables: the views read the same rows as views over the files would, are
kept up to date with files any writer added (another `Warehouse`, another process), are rebuilt only when
the files changed, and read a warehouse an older rootstep wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rootstep.warehouse._store as store
from rootstep.model import Annotation, Intervention, LLMCall, Replay
from rootstep.warehouse import PUBLIC_VIEWS, Warehouse
from rootstep.warehouse._schemas import LABEL_COLUMNS, RECORDING_COLUMNS, REPLAY_COLUMNS

from .test_warehouse_store import label, make_run

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _view_rows(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[Any, ...]]]:
    return {view: sorted(con.sql(f"SELECT * FROM {view}").fetchall(), key=repr) for view in PUBLIC_VIEWS}


def _plain_rows(warehouse: Warehouse) -> dict[str, list[tuple[Any, ...]]]:
    """Every view as an in-memory connection reads it (when another process holds the catalog file): over
    the files on each query."""
    con = duckdb.connect()
    try:
        warehouse._register(con)
        warehouse._create_views(con)
        return _view_rows(con)
    finally:
        con.close()


def _catalog_rows(warehouse: Warehouse) -> dict[str, list[tuple[Any, ...]]]:
    with warehouse.connect() as con:
        return _view_rows(con)


def _racing(warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch) -> Warehouse:
    """A second writer to the same location that does not see what the first wrote (as if both wrote at once)."""
    other = Warehouse(warehouse.location)
    monkeypatch.setattr(other, "_existing_ids", lambda table, partitions: set())
    return other


def test_materialized_views_read_what_views_over_the_files_read(warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch):
    """Duplicates from racing writers (a run in two batches, an annotation id at two times), a crashed batch,
    a partly committed step file, labels, re-checks and the other outcomes: every public view of the catalog
    (kept up to date write by write, then built from scratch) holds the rows of the plain views."""
    a, b, c, d = (make_run(x) for x in "abcd")
    other_place = make_run("e", framework="smolagents", benchmark="mbpp")
    warehouse.write_trajectories([a, b, c, other_place])
    _racing(warehouse, monkeypatch).write_trajectories([b, d])  # b in two batches: the first batch id keeps it
    real_write = Warehouse._write_file

    def crash_on_runs(self, path, table):
        if "/runs/" in path:
            raise OSError("disk full")
        return real_write(self, path, table)

    monkeypatch.setattr(Warehouse, "_write_file", crash_on_runs)
    with pytest.raises(OSError):
        warehouse.write_trajectories([make_run("lost")])
    monkeypatch.setattr(Warehouse, "_write_file", real_write)

    first = label(a, 1, at=T0)
    latest = label(a, 3, method="fault_injection", at=T0 + timedelta(hours=1), confidence=0.9, steps=[3])
    warehouse.write_annotations([
        first, latest,
        label(a, 2, method="tracer", verified=False, annotator="all_at_once", at=T0 + timedelta(hours=2)),
        Annotation(run_id=b.id, framework="ag2", benchmark="gsm8k", method="counterfactual", status="unresolved",
                   annotator="test-analyzer", created_at=T0),
        label(c, 1, status="not_causal", verified=False, at=T0),
        label(d, 2, status="unproven_earliest", verified=False, at=T0),
        label(other_place, 0, at=T0),
    ])
    warehouse.write_annotations([label(a, 0, verified=False, at=T0 + timedelta(hours=3), recheck_of=latest.id,
                                       recheck_agrees=False)])
    # the same label written again later by a racing annotator: one id, two times
    _racing(warehouse, monkeypatch).write_annotations([latest.model_copy(update={"created_at": T0 + timedelta(hours=4)})])
    warehouse.write_replays([Replay(run_id=a.id, framework="ag2", benchmark="gsm8k", purpose="counterfactual",
                                    intervention=Intervention(run_id=a.id, step=1, new_content="fixed"),
                                    success_before=False, success_after=True)])
    warehouse.write_llm_calls([LLMCall(run_id=a.id, framework="ag2", benchmark="gsm8k", agent="agent1",
                                       request_hash="h", counter=0, model="m", provider="scripted")])

    plain = _plain_rows(warehouse)
    assert len(plain["runs"]) == 5 and len(plain["steps"]) == 20 and len(plain["labels"]) == 2
    assert len(plain["annotations"]) == 8 and len(plain["agreement"]) == 1
    kept_up_to_date = _catalog_rows(warehouse)
    with warehouse.connect() as con:  # b's steps of the batch that lost it are hidden row by row
        partial = con.execute("SELECT count(*) FROM materialized.step_files WHERE NOT whole").fetchone()
        files = con.execute("SELECT count(*) FROM materialized.step_files").fetchone()
    assert partial == (1,) and files == (3,)  # the crashed batch's step file has no committed step
    os.unlink(warehouse.catalog)
    from_scratch = _catalog_rows(warehouse)
    for view in PUBLIC_VIEWS:
        assert kept_up_to_date[view] == plain[view], view
        assert from_scratch[view] == plain[view], view


def test_a_reader_sees_what_another_warehouse_or_process_wrote(tmp_path: Path):
    """Files written by another `Warehouse` object, or by another process while this one held the catalog
    file (its own catalog refresh then fails, and it reads through an in-memory connection), are in the next
    query's views."""
    location = tmp_path / "wh"
    reader = Warehouse(location)
    a, b, c = make_run("a"), make_run("b"), make_run("c")
    reader.write_trajectories([a])
    Warehouse(location).write_trajectories([b])
    assert reader.count("runs") == 2 and reader.count("steps") == 8
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
        from tests.test_warehouse_store import label, make_run
        from rootstep.warehouse import Warehouse
        wh = Warehouse({str(location)!r})
        c = make_run("c")
        wh.write_trajectories([c])
        wh.write_annotations([label(c, 2)])
        print(wh.count("runs"), wh.count("steps"), wh.rows("SELECT step FROM labels")[0]["step"])
        """
    )
    with reader.connect() as con:  # the catalog file is held: the other process cannot open it
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["3", "12", "2"]
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (2,)  # what was there when it connected
    assert reader.count("runs") == 3 and reader.count("steps") == 12
    assert reader.rows("SELECT run_id, step FROM labels") == [{"run_id": c.id, "step": 2}]
    assert reader.trajectory(c.id) == c


def test_the_catalog_is_rebuilt_only_when_the_files_changed(warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch):
    """Nothing is built when no file changed; added files are appended; a run or annotation file that changed
    builds its tables from scratch; a step file that went only loses its pairs."""
    builds: list[tuple[str, int, bool]] = []
    real = store.materialize_statements

    def spy(source, files, columns=None, **kw):
        builds.append((source, len(files), kw.get("append", False)))
        return real(source, files, columns, **kw)

    monkeypatch.setattr(store, "materialize_statements", spy)
    a, b = make_run("a"), make_run("b", framework="smolagents", benchmark="mbpp")
    warehouse.write_trajectories([a, b])
    assert sorted(builds) == [("annotations", 0, False), ("runs", 2, False), ("steps", 2, False)]

    def state() -> list[tuple[Any, ...]]:
        with warehouse.connect() as con:
            return con.sql("SELECT * FROM materialized.builds ORDER BY ALL").fetchall()

    builds.clear()
    before = state()
    warehouse.refresh_catalog()
    assert warehouse.count("runs") == 2 and warehouse.count("labels") == 0
    assert builds == [] and state() == before  # not a view recreated either

    warehouse.write_annotations([label(a, 1)])
    assert builds == [("annotations", 1, True)] and warehouse.count("labels") == 1
    builds.clear()
    step_files = set(warehouse.table_files("steps"))
    warehouse.write_trajectories([make_run("c")])
    assert sorted(builds) == [("runs", 1, True), ("steps", 1, True)] and warehouse.count("steps") == 12
    [c_steps] = set(warehouse.table_files("steps")) - step_files

    builds.clear()
    [path] = warehouse.table_files("annotations")
    pq.write_table(pq.read_table(path, partitioning=None).drop_columns(["cost_prompt_tokens"]), path)
    assert warehouse.count("labels") == 1
    assert builds == [("annotations", 1, False)]

    builds.clear()
    os.unlink(c_steps)  # its run row stays: the run has no step left
    assert warehouse.count("steps") == 8 and warehouse.count("runs") == 3
    assert builds == [("steps", 0, True)]


def _as_older_rootstep(path: str, table: str) -> None:
    """Rewrite one Parquet file as a rootstep from before the recording and label columns wrote it: no such
    columns, their values kept in `metadata`."""
    data = pq.read_table(path, partitioning=None)
    moved = ([name for name, _ in RECORDING_COLUMNS + REPLAY_COLUMNS] if table == "runs"
             else [name for name, _ in LABEL_COLUMNS])
    metadata = []
    for row in data.to_pylist():
        old = json.loads(row["metadata"] or "{}")
        if table == "runs":
            old["gateway_run_id"] = row["gateway_run_id"]
        else:
            old.update(steps=row["steps"], confidence=row["confidence"])
        metadata.append(json.dumps(old))
    data = data.drop_columns(moved)
    data = data.set_column(data.schema.get_field_index("metadata"), "metadata", pa.array(metadata))
    pq.write_table(data, path)


def test_a_warehouse_an_older_rootstep_wrote_reads_before_and_after_new_files(
        warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch):
    """Files without the newer columns read their values from `metadata`, whether the tables are built from
    them, appended to with files of this version, or appended to with more old files (an older rootstep
    writing beside this one); the views over the files read the same."""
    from rootstep.model import Recording, Task

    def recorded(task: str):
        recording = Recording(gateway_run_id=f"gw-{task}", task=Task(benchmark="gsm8k", task_id=task, prompt="?",
                                                                            verifier="numeric", kind="math"))
        return make_run(task).model_copy(update={"recording": recording})

    old, new, late = recorded("old"), recorded("new"), recorded("late")
    warehouse.write_trajectories([old])
    warehouse.write_annotations([label(old, 1, steps=[1, 2], confidence=0.8)])
    for table in ("runs", "annotations"):
        for path in warehouse.table_files(table):
            _as_older_rootstep(path, table)
    expected = [{"id": old.id, "gateway_run_id": "gw-old"}]
    assert warehouse.rows("SELECT id, gateway_run_id FROM runs") == expected
    assert warehouse.rows("SELECT steps, confidence FROM labels") == [{"steps": [1, 2], "confidence": 0.8}]

    warehouse.write_trajectories([new])
    warehouse.write_annotations([label(new, 2, steps=[2], confidence=0.95)])
    monkeypatch.setattr(Warehouse, "refresh_catalog", lambda self: None)  # the older rootstep's writes
    files = {t: set(warehouse.table_files(t)) for t in ("runs", "annotations")}
    warehouse.write_trajectories([late])
    warehouse.write_annotations([label(late, 3, steps=[3], confidence=0.5)])
    for table in ("runs", "annotations"):
        for path in set(warehouse.table_files(table)) - files[table]:
            _as_older_rootstep(path, table)
    with warehouse.connect() as con:  # appended: the late files are new, the others unchanged
        state = con.sql("SELECT source, count(*) FROM materialized.files GROUP BY ALL ORDER BY ALL").fetchall()
    assert state == [("annotations", 3), ("runs", 3), ("steps", 3)]
    assert sorted(warehouse.rows("SELECT gateway_run_id AS g FROM runs"), key=str) == [
        {"g": "gw-late"}, {"g": "gw-new"}, {"g": "gw-old"}]
    assert sorted((r["step"], r["steps"], r["confidence"]) for r in warehouse.rows("SELECT * FROM labels")) == [
        (1, [1, 2], 0.8), (2, [2], 0.95), (3, [3], 0.5)]
    assert _catalog_rows(warehouse) == _plain_rows(warehouse)


def test_a_remote_warehouse_materializes_into_its_local_catalog(tmp_path: Path):
    """An fsspec location: the catalog is a local file whose tables hold the remote rows; a file another
    writer added is read on the next query."""
    location = "memory://rootstep-catalog-test/wh"
    catalog = str(tmp_path / "catalog.duckdb")
    warehouse = Warehouse(location, catalog=catalog)
    a, b = make_run("a"), make_run("b")
    warehouse.write_trajectories([a])
    warehouse.write_annotations([label(a, 1)])
    Warehouse(location, catalog=str(tmp_path / "other.duckdb")).write_trajectories([b])
    assert warehouse.count("runs") == 2 and warehouse.count("steps") == 8
    assert warehouse.rows("SELECT step FROM labels") == [{"step": 1}]
    with warehouse.connect() as con:
        paths = [r[0] for r in con.sql("SELECT path FROM materialized.files WHERE source = 'runs'").fetchall()]
    assert len(paths) == 2 and all(p.startswith("memory://") for p in paths)
    assert _catalog_rows(warehouse) == _plain_rows(warehouse)


def test_label_positions_give_the_distribution_and_the_labels_off_the_first_agent_step(warehouse: Warehouse):
    """Runs of 10 steps whose step 0 is the task (`human`): labels at the first agent step (1), mid-run (4, 6) and
    at the last step (9); one injection label. Position is the step as a share of the run (0 first, 1 last)."""
    runs = []
    for i in range(5):
        run = make_run(f"p{i}", n_steps=10)
        run.steps[0] = run.steps[0].model_copy(update={"kind": "human"})
        runs.append(run)
    warehouse.write_trajectories(runs)
    for run, step in zip(runs, (1, 4, 6, 9)):
        found = label(run, step)
        if step == 6:  # a multi-turn label whose fix got the run past its failing turn, not to a success
            found = found.model_copy(update={"fixed_turn": 2})
        warehouse.write_annotations([found])
    warehouse.write_annotations([label(runs[4], 4, method="fault_injection")])
    assert warehouse.rows("SELECT step, fixed_turn FROM labels WHERE fixed_turn IS NOT NULL") == [
        {"step": 6, "fixed_turn": 2}]
    rows = {r["method"]: r for r in warehouse.rows("SELECT * FROM label_positions")}
    cf = rows["counterfactual"]
    assert (cf["framework"], cf["benchmark"], cf["labels"], cf["first_failure_labels"]) == ("ag2", "gsm8k", 4, 1)
    assert (cf["median_step"], cf["min_step"], cf["max_step"], cf["median_run_steps"]) == (5, 1, 9, 10)
    assert cf["median_position"] == round(5 / 9, 2) and cf["mean_position"] == round(20 / 36, 2)
    assert (cf["not_on_first_agent_step"], cf["on_last_agent_step"]) == (3, 1)
    assert (rows["fault_injection"]["labels"], rows["fault_injection"]["not_on_first_agent_step"]) == (1, 1)
