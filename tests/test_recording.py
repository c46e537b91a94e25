"""A run's typed `Recording` and `ReplayProvenance`: written to and read from their own warehouse columns,
read back from Parquet written before those columns existed (the facts then lived in `metadata`), and a
clear error naming the run and the field when a recording is missing or broken."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from rootstep.model import (
    Intervention,
    MissingRecording,
    Recording,
    ReplayProvenance,
    Step,
    SystemRef,
    Task,
    Trajectory,
    Verdict,
    WarehouseError,
)
from rootstep.warehouse import Warehouse
from rootstep.warehouse._schemas import RECORDING_COLUMNS, REPLAY_COLUMNS

TASK = Task(benchmark="gsm8k", task_id="test-7", prompt="What is 6 * 7?", ground_truth="42", verifier="numeric",
            kind="math", metadata={"source": "test"})
STEPS = [Step(index=0, agent="user", kind="human", content=TASK.prompt),
         Step(index=1, agent="coder", content="6 * 7 = 41", call_ids=["call_a"]),
         Step(index=2, agent="critic", content="ok", call_ids=["call_b"])]


def recorded_run() -> Trajectory:
    return Trajectory(
        framework="ag2", benchmark="gsm8k", task_id=TASK.task_id, question=TASK.prompt, ground_truth="42", steps=STEPS,
        final_answer="41", verdict=Verdict(success=False), model="scripted/x", source="rootstep",
        recording=Recording(gateway_run_id="ag2-gsm8k-test-7-abc", task=TASK, agent_models={"critic": "scripted/y"},
                            image="rootstep-ag2:0123", framework_version="0.14.1",
                            system=SystemRef(file="/systems/pair/system.toml", name="pair", digest="d1")),
        metadata={"gateway_stats": {"live": 2}, "llm_calls": 2},
    )


def replayed_run(parent: Trajectory) -> Trajectory:
    fix = Intervention(run_id="ag2-gsm8k-test-7-abc", step=1, new_content="6 * 7 = 42", kind="fix", agent="coder")
    return parent.model_copy(update={
        "steps": [*STEPS[:1], STEPS[1].model_copy(update={"content": fix.new_content}), STEPS[2]],
        "final_answer": "42", "verdict": Verdict(success=True), "parent_run_id": parent.id,
        "recording": parent.recording.model_copy(update={"gateway_run_id": "ag2-gsm8k-test-7-abc-rpl-s1"}),
        "replay": ReplayProvenance(of_gateway_run_id="ag2-gsm8k-test-7-abc", intervention=fix, live_calls=1,
                                   replayed_calls=0, forced_calls=1, prefix_identical=True),
    })


def test_recording_and_replay_provenance_round_trip_through_their_columns(warehouse: Warehouse):
    run = recorded_run()
    replay = replayed_run(run)
    warehouse.write_trajectories([run, replay])
    assert warehouse.trajectory(run.id) == run
    assert warehouse.trajectory(replay.id) == replay
    row = warehouse.rows("SELECT * FROM runs WHERE id = ?", [replay.id])[0]
    assert (row["gateway_run_id"], row["replay_of_gateway_run_id"], row["replay_step"], row["replay_kind"]) == (
        "ag2-gsm8k-test-7-abc-rpl-s1", "ag2-gsm8k-test-7-abc", 1, "fix")
    assert json.loads(row["task"]) == TASK.model_dump(mode="json") and json.loads(row["agent_models"]) == {"critic": "scripted/y"}
    assert (row["image"], row["framework_version"], row["system_file"]) == ("rootstep-ag2:0123", "0.14.1", "/systems/pair/system.toml")
    assert json.loads(row["metadata"]) == {"gateway_stats": {"live": 2}, "llm_calls": 2}  # no recording keys left in it


def test_runs_written_before_the_recording_columns_read_their_recording_from_metadata(warehouse: Warehouse):
    """A run row written by an older rootstep has no recording columns at all; it kept the same facts in
    `metadata` (`gateway_run_id`, `task`, `agent_models`, `image`, `framework_version`, `system`, `replay`)."""
    run, replay = recorded_run(), None
    replay = replayed_run(run)
    legacy = []
    for t in (run, replay):
        i = None if t.replay is None else t.replay.intervention
        old_metadata = {**t.metadata, "gateway_run_id": t.recording.gateway_run_id,
                        "task": t.recording.task.model_dump(mode="json"), "agent_models": t.recording.agent_models,
                        "image": t.recording.image, "framework_version": t.recording.framework_version,
                        "system": t.recording.system.model_dump()}
        if t.replay is not None:
            old_metadata["replay"] = {"of": t.parent_run_id, "of_gateway_run_id": t.replay.of_gateway_run_id,
                                      "intervention": i.model_dump(mode="json"), "live_calls": 1, "replayed_calls": 0,
                                      "forced_calls": 1, "divergence": None, "prefix_identical": True, "identical": False}
        legacy.append(t.model_copy(update={"recording": None, "replay": None, "metadata": old_metadata}))
    warehouse.write_trajectories(legacy)
    new_columns = [name for name, _ in RECORDING_COLUMNS + REPLAY_COLUMNS]
    for path in warehouse.table_files("runs"):
        table = pq.read_table(path, partitioning=None)
        pq.write_table(table.drop_columns(new_columns), path)
    assert not set(new_columns) & set(pq.read_schema(warehouse.table_files("runs")[0]).names)

    assert warehouse.trajectory(run.id) == run
    assert warehouse.trajectory(replay.id) == replay
    row = warehouse.rows("SELECT gateway_run_id, agent_models, replay_step, replay_kind, replay_live_calls, "
                         "replay_prefix_identical FROM runs WHERE id = ?", [replay.id])[0]
    assert row == {"gateway_run_id": "ag2-gsm8k-test-7-abc-rpl-s1", "agent_models": '{"critic":"scripted/y"}',
                   "replay_step": 1, "replay_kind": "fix", "replay_live_calls": 1, "replay_prefix_identical": True}


def test_imported_runs_have_no_recording_and_keep_their_metadata(warehouse: Warehouse):
    imported = Trajectory(framework="whowhen", benchmark="handcrafted", task_id="1", steps=STEPS[:1], source="x.json",
                          metadata={"whowhen": {"keys": ["content"]}, "system": "not a recording key here"})
    warehouse.write_trajectories([imported])
    back = warehouse.trajectory(imported.id)
    assert back == imported and back.recording is None and back.replay is None
    with pytest.raises(MissingRecording, match=rf"run {imported.id} \(whowhen/handcrafted/1\): field `recording` is empty"):
        back.recorded()


def test_a_broken_recording_names_the_run_and_the_column(warehouse: Warehouse):
    run = recorded_run()
    broken = run.model_copy(update={"recording": None, "metadata": {
        "gateway_run_id": "g-1", "task": {"benchmark": "gsm8k", "task_id": "test-7", "prompt": "?", "kind": "poem"}}})
    no_task = run.model_copy(update={"task_id": "test-8", "recording": None, "metadata": {"gateway_run_id": "g-2"}})
    warehouse.write_trajectories([broken, no_task])
    new_columns = [name for name, _ in RECORDING_COLUMNS + REPLAY_COLUMNS]
    for path in warehouse.table_files("runs"):  # as an older rootstep wrote them: no recording columns at all
        pq.write_table(pq.read_table(path, partitioning=None).drop_columns(new_columns), path)
    with pytest.raises(WarehouseError, match=rf"runs: run {broken.id}: column 'task': 2 validation errors for Task\nverifier\n  Field required"):
        warehouse.trajectory(broken.id)
    with pytest.raises(WarehouseError, match=rf"runs: run {no_task.id}: column 'task' is NULL but 'gateway_run_id' is 'g-2'"):
        warehouse.trajectory(no_task.id)
