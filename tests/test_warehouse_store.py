"""The Parquet + DuckDB store: idempotent writes, views, crash safety, remote (fsspec) locations."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from rootstep.model import Annotation, Intervention, LLMCall, Replay, Step, Trajectory, Usage, Verdict
from rootstep.warehouse import Warehouse
from rootstep.warehouse.export import export_jsonl, export_parquet


def make_run(task: str, n_steps: int = 4, success: bool = False, framework: str = "ag2", benchmark: str = "gsm8k") -> Trajectory:
    return Trajectory(
        framework=framework,
        benchmark=benchmark,
        task_id=task,
        question=f"question {task}",
        ground_truth="42",
        steps=[Step(index=i, agent=f"agent{i % 2}", content=f"{task} step {i}") for i in range(n_steps)],
        final_answer="41",
        verdict=Verdict(success=success),
    )


def label(run: Trajectory, step: int, method: str = "counterfactual", verified: bool = True, at: datetime | None = None, **kw) -> Annotation:
    return Annotation(
        run_id=run.id,
        framework=run.framework,
        benchmark=run.benchmark,
        method=method,
        agent=run.steps[step].agent,
        step=step,
        verified=verified,
        annotator=kw.pop("annotator", "test-analyzer"),
        created_at=at or datetime.now(timezone.utc),
        **kw,
    )


def test_write_read_back_and_idempotency(warehouse: Warehouse):
    runs = [make_run(str(i), success=i % 2 == 0) for i in range(10)] + [make_run("x", framework="smolagents", benchmark="mbpp")]
    report = warehouse.write_trajectories(runs)
    assert report.written["runs"] == 11 and report.written["steps"] == 44
    again = warehouse.write_trajectories(runs + runs)
    assert again.written["runs"] == 0 and again.skipped["runs"] == 22
    assert warehouse.count("runs") == 11 and warehouse.count("steps") == 44
    assert warehouse.count("successes") == 5 and warehouse.count("failures") == 6
    back = warehouse.trajectory(runs[3].id)
    assert back == runs[3] and back.id == runs[3].id
    # hive partitions are folders named after framework and benchmark
    partitions = sorted(p.relative_to(Path(warehouse.root) / "runs").as_posix() for p in (Path(warehouse.root) / "runs").glob("*/*"))
    assert partitions == ["framework=ag2/benchmark=gsm8k", "framework=smolagents/benchmark=mbpp"]


def test_labels_view_is_latest_verified_label_per_run(warehouse: Warehouse):
    run, other = make_run("a"), make_run("b")
    warehouse.write_trajectories([run, other])
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    warehouse.write_annotations(
        [
            label(run, 1, method="human", annotator="person", at=t0),
            label(run, 3, at=t0 + timedelta(hours=1)),
            label(run, 2, method="tracer", verified=False, annotator="all_at_once", at=t0 + timedelta(hours=2)),
            Annotation(run_id=other.id, framework="ag2", benchmark="gsm8k", method="counterfactual", status="unresolved", annotator="test-analyzer"),
        ]
    )
    labels = warehouse.rows("SELECT run_id, step, method FROM labels")
    assert labels == [{"run_id": run.id, "step": 3, "method": "counterfactual"}]
    assert warehouse.rows("SELECT run_id FROM unresolved") == [{"run_id": other.id}]
    assert warehouse.label(run.id).step == 3
    # re-writing the same labels later does not duplicate them
    warehouse.write_annotations([label(run, 1, method="human", annotator="person")])
    assert warehouse.count("annotations") == 4


def test_llm_calls_and_replays_round_trip(warehouse: Warehouse):
    run = make_run("a")
    warehouse.write_trajectories([run])
    calls = [
        LLMCall(run_id=run.id, framework="ag2", benchmark="gsm8k", agent="agent0", request_hash="h1", counter=c, model="scripted/x", provider="scripted", simulated=True, request={"messages": [{"role": "user", "content": "hi"}]}, response={"choices": []})
        for c in range(3)
    ]
    assert warehouse.write_llm_calls(calls).written["llm_calls"] == 3
    assert warehouse.write_llm_calls(calls).written["llm_calls"] == 0
    replay = Replay(run_id=run.id, framework="ag2", benchmark="gsm8k", purpose="counterfactual", intervention=Intervention(run_id=run.id, step=2, new_content="fixed"), success_before=False, success_after=True, cost=Usage(llm_calls=2, replayed_calls=3))
    warehouse.write_replays([replay, replay])
    rows = warehouse.rows("SELECT flipped, intervention_step, live_calls FROM replays")
    assert rows == [{"flipped": True, "intervention_step": 2, "live_calls": 2}]
    assert warehouse.rows("SELECT count(*) AS n, bool_and(simulated) AS sim FROM llm_calls") == [{"n": 3, "sim": True}]


def test_files_written_before_a_column_was_added_still_read(warehouse: Warehouse):
    """A warehouse written by an older rootstep (its replays have no `intervention_also`, its annotations no
    later columns) keeps every view readable: the missing columns read as NULL."""
    run = make_run("old")
    warehouse.write_trajectories([run])
    replay = Replay(run_id=run.id, framework="ag2", benchmark="gsm8k", purpose="counterfactual",
                    intervention=Intervention(run_id=run.id, step=2, new_content="fixed"), success_before=False,
                    success_after=True)
    warehouse.write_replays([replay])
    for path in warehouse.table_files("replays"):
        table = pq.read_table(path, partitioning=None)
        pq.write_table(table.drop_columns(["intervention_also", "intervention_persist"]), path)
    assert warehouse.rows("SELECT intervention_step, intervention_also, intervention_persist FROM replays") == [
        {"intervention_step": 2, "intervention_also": None, "intervention_persist": None}]
    assert warehouse.rows("SELECT count(*) AS n FROM labels") == [{"n": 0}]


def test_what_a_search_established_is_stored_in_typed_columns_and_read_back_whole(warehouse: Warehouse):
    """Steps, confidence, the flip's proof, the edit, the earliest rule, leaks, search statistics and the
    re-check are `Annotation` fields stored as columns of the same names (structs for the records): a label
    reads back equal, and SQL reaches inside the records without parsing JSON."""
    from rootstep.model import Edit, FlipProof, SearchStats
    from rootstep.warehouse._schemas import EDIT, FLIP_PROOF, LABEL_COLUMNS, SEARCH_STATS

    for struct, model in ((EDIT, Edit), (FLIP_PROOF, FlipProof), (SEARCH_STATS, SearchStats)):
        assert [f.name for f in struct] == list(model.model_fields), model  # a new field needs its column
    assert {name for name, _ in LABEL_COLUMNS} <= set(Annotation.model_fields)
    run = make_run("typed")
    warehouse.write_trajectories([run])
    proof = FlipProof(flips=2, trials=2, control_flips=0, control_trials=1, controls_replayed=["rpl_c"],
                      repeat_replays=["rpl_r"], difference=1.0, interval=[0.2, 1.0], confidence=0.97)
    full = label(run, 1, steps=[1, 2], confidence=0.97, flip_check=proof, proof_replay_id="rpl_p",
                 edit=Edit(chars_changed=4, lines_changed=1, share=0.2, growth=1.1, summary="- 5 + 9", adds_answer=False),
                 earliest="established", answer_leaks=2,
                 search_stats=SearchStats(replays=3, analyzer_calls=7, seconds=12.5, cut_by="tokens", cut_reason="spent"),
                 metadata={"attempted_steps": [1, 2]})
    again = label(run, 2, verified=False, recheck_of=full.id, recheck_agrees=False)
    warehouse.write_annotations([full, again])
    by_id = {a.id: a for a in warehouse.annotations(run.id)}
    assert by_id[full.id] == full and by_id[again.id] == again
    assert by_id[full.id].multi_step and not by_id[again.id].multi_step
    assert warehouse.rows("SELECT flip_check.confidence AS c, search_stats.cut_by AS cut, edit.share AS share, "
                          "steps FROM labels") == [{"c": 0.97, "cut": "tokens", "share": 0.2, "steps": [1, 2]}]
    assert warehouse.rows("SELECT recheck_agrees FROM annotations WHERE recheck_of IS NOT NULL") == [
        {"recheck_agrees": False}]


def test_a_cost_is_stored_whole_and_an_older_row_keeps_its_total(warehouse: Warehouse):
    """`Usage` round-trips through the `cost_*` columns; a label written before the token split and the
    replayed calls were stored reads its token total as prompt tokens, and `quality` sums the same columns."""
    from rootstep.warehouse._schemas import replay_from_row

    run = make_run("cost")
    warehouse.write_trajectories([run])
    cost = Usage(llm_calls=3, replayed_calls=2, prompt_tokens=30, completion_tokens=12, usd=0.002, seconds=1.5, replays=4)
    label = Annotation(run_id=run.id, framework="ag2", benchmark="gsm8k", method="counterfactual", agent="agent1", step=1,
                       verified=True, annotator="scripted/a", cost=cost)
    replay = Replay(run_id=run.id, framework="ag2", benchmark="gsm8k", purpose="counterfactual", success_before=False,
                    success_after=True, intervention=Intervention(run_id=run.id, step=1, new_content="fixed"),
                    cost=Usage(llm_calls=1, replayed_calls=1, prompt_tokens=20, completion_tokens=5, usd=0.001, seconds=0.5, replays=1))
    warehouse.write_annotations([label])
    warehouse.write_replays([replay])
    assert warehouse.annotations(run.id)[0].cost == cost
    assert replay_from_row(warehouse.rows("SELECT * FROM replays")[0]).cost == replay.cost
    assert cost + replay.cost == Usage(llm_calls=4, replayed_calls=3, prompt_tokens=50, completion_tokens=17, usd=0.003,
                                       seconds=2.0, replays=5) == sum([cost, replay.cost])
    for path in warehouse.table_files("annotations"):
        table = pq.read_table(path, partitioning=None)
        pq.write_table(table.drop_columns(["cost_prompt_tokens", "cost_completion_tokens", "cost_replayed_calls"]), path)
    old = warehouse.annotations(run.id)[0].cost
    assert (old.tokens, old.prompt_tokens, old.completion_tokens, old.replayed_calls, old.llm_calls) == (42, 42, 0, 0, 3)
    assert warehouse.rows("SELECT cost_tokens, cost_llm_calls, cost_replays FROM labels") == [
        {"cost_tokens": 42, "cost_llm_calls": 3, "cost_replays": 4}]


def test_empty_warehouse_has_every_view(warehouse: Warehouse):
    for view in ("runs", "steps", "llm_calls", "replays", "annotations", "labels", "successes", "failures", "unresolved"):
        assert warehouse.count(view) == 0
    # the catalog file is a plain DuckDB database other clients can open
    warehouse.refresh_catalog()
    con = duckdb.connect(warehouse.catalog, read_only=True)
    assert con.execute("SELECT count(*) FROM labels").fetchone() == (0,)
    con.close()


def _crash_writing_runs(warehouse: Warehouse, runs: list[Trajectory], error: BaseException,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`write_trajectories(runs)` with the run rows' file write raising `error` (the steps are written first)."""
    real_write = Warehouse._write_file

    def crash_on_runs(self, path, table):
        if "/runs/" in path:
            raise error
        return real_write(self, path, table)

    monkeypatch.setattr(Warehouse, "_write_file", crash_on_runs)
    with pytest.raises(type(error)):
        warehouse.write_trajectories(runs)
    monkeypatch.setattr(Warehouse, "_write_file", real_write)


def test_crash_between_steps_and_runs_leaves_warehouse_consistent(warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch):
    warehouse.write_trajectories([make_run("kept")])
    _crash_writing_runs(warehouse, [make_run("lost1"), make_run("lost2")],
                        KeyboardInterrupt("simulated crash after the steps were written"), monkeypatch)

    # the orphaned steps are on disk but invisible; the warehouse reads as before the crash
    assert len(list((Path(warehouse.root) / "steps").rglob("*.parquet"))) == 2
    assert warehouse.count("runs") == 1 and warehouse.count("steps") == 4
    # re-running the same write completes it without duplicates; vacuum finds nothing left to remove
    warehouse.write_trajectories([make_run("lost1"), make_run("lost2")])
    assert warehouse.count("runs") == 3 and warehouse.count("steps") == 12
    # a different batch containing the same runs is skipped as a whole
    warehouse.write_trajectories([make_run("lost1"), make_run("new")])
    assert warehouse.count("runs") == 4 and warehouse.count("steps") == 16


def test_orphans_from_a_crashed_batch_are_vacuumed(warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch):
    _crash_writing_runs(warehouse, [make_run("a"), make_run("b")], OSError("disk full"), monkeypatch)
    warehouse.write_trajectories([make_run("a")])  # another batch: the crashed one's steps stay orphaned
    assert warehouse.count("steps") == 4
    assert warehouse.vacuum() == {"tmp_files": 0, "orphan_step_files": 1}
    assert warehouse.count("steps") == 4 and warehouse.count("runs") == 1


def test_killed_writer_leaves_a_readable_warehouse(tmp_path: Path):
    """SIGKILL a process in the middle of a large write: what is visible is whole, and a re-run completes."""
    location = tmp_path / "wh"
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_warehouse_store import make_run
        from rootstep.warehouse import Warehouse
        wh = Warehouse({str(location)!r})
        runs = [make_run(str(i), n_steps=50) for i in range(4000)]
        print("writing", flush=True)
        wh.write_trajectories(runs, chunk_steps=20_000)
        print("done", flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    deadline = time.time() + 60
    while time.time() < deadline and not list((location / "runs").rglob("*.parquet")):
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    warehouse = Warehouse(location)
    runs, steps = warehouse.count("runs"), warehouse.count("steps")
    assert steps == runs * 50  # every visible run has all of its steps, no more
    for path in (location / "steps").rglob("*.parquet"):
        pq.read_metadata(path)  # no half-written file under a final name
    sys.path.insert(0, str(Path(__file__).parent))
    report = warehouse.write_trajectories([make_run(str(i), n_steps=50) for i in range(4000)], chunk_steps=20_000)
    assert report.skipped["runs"] == runs
    assert warehouse.count("runs") == 4000 and warehouse.count("steps") == 200_000


def test_a_file_written_through_the_warehouse_is_whole_or_not_there(warehouse: Warehouse):
    """`write_file` (the learned tracer's model files, every Parquet file): a writer that fails half-way leaves the
    old file as it was and no temporary file; a crashed Parquet write's temporary file is what `vacuum` removes."""
    path = f"{warehouse.root}/models/m/model.pkl"
    warehouse.write_file(path, lambda f: f.write(b"old model"))

    def half(f) -> None:
        f.write(b"half of a new")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        warehouse.write_file(path, half)
    assert Path(path).read_bytes() == b"old model"
    assert sorted(p.name for p in Path(path).parent.iterdir()) == ["model.pkl"]

    remote = Warehouse("memory://rootstep-test/whole", catalog=f"{warehouse.root}/remote.duckdb")
    remote.write_file(f"{remote.root}/models/m/card.md", lambda f: f.write(b"card"))
    assert remote.fs.cat_file(f"{remote.root}/models/m/card.md") == b"card"


def test_a_crashed_parquet_write_leaves_a_temporary_file_that_vacuum_removes(warehouse: Warehouse,
                                                                              monkeypatch: pytest.MonkeyPatch):
    warehouse.write_trajectories([make_run("kept")])
    killed = RuntimeError("killed between the write and the rename")
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(killed))
    monkeypatch.setattr(os, "unlink", lambda *a: None)  # a killed process cleans nothing up
    with pytest.raises(RuntimeError, match="killed"):
        warehouse.write_trajectories([make_run("lost")])
    monkeypatch.undo()
    assert list(Path(warehouse.root).rglob(".*.parquet.tmp"))
    assert warehouse.vacuum()["tmp_files"] >= 1
    assert not list(Path(warehouse.root).rglob("*.tmp"))
    assert warehouse.count("runs") == 1


def test_fsspec_url_location(tmp_path: Path):
    warehouse = Warehouse("memory://rootstep-test/wh", catalog=str(tmp_path / "catalog.duckdb"))
    run = make_run("remote")
    warehouse.write_trajectories([run, run])
    warehouse.write_annotations([label(run, 2)])
    assert warehouse.count("runs") == 1 and warehouse.count("steps") == 4
    assert warehouse.rows("SELECT step FROM labels") == [{"step": 2}]
    assert warehouse.trajectory(run.id) == run


def test_exports_are_plain_files(warehouse: Warehouse, tmp_path: Path):
    runs = [make_run(str(i)) for i in range(3)]
    warehouse.write_trajectories(runs)
    warehouse.write_annotations([label(runs[0], 1)])
    counts = export_parquet(warehouse, tmp_path / "pq")
    assert counts["runs"] == 3 and counts["steps"] == 12 and counts["labels"] == 1
    assert pq.read_table(tmp_path / "pq" / "labels.parquet").column("step").to_pylist() == [1]
    assert export_jsonl(warehouse, tmp_path / "runs.jsonl") == 3
    import json

    lines = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    labelled = [r for r in lines if r["label"]]
    assert len(labelled) == 1 and labelled[0]["label"]["step"] == 1 and labelled[0]["id"] == runs[0].id
    assert Trajectory.model_validate({k: v for k, v in lines[0].items() if k not in ("id", "label")}).id == lines[0]["id"]


def test_resolve_run_id_prefix(warehouse: Warehouse):
    from rootstep.model import WarehouseError

    run = make_run("a")
    warehouse.write_trajectories([run])
    assert warehouse.resolve_run_id(run.id[:10]) == run.id
    with pytest.raises(WarehouseError, match="no run id starts with"):
        warehouse.resolve_run_id("run_zzzz")
