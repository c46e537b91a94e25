"""Who&When import/export on the real shared data: counts, idempotency, lossless round trip, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rootstep.model import InputError
from rootstep.warehouse import Warehouse
from rootstep.traces.whowhen import import_paths, load_file, export_whowhen, parse_record


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_import_all_shared_data_and_again(whowhen_dir: Path, warehouse: Warehouse):
    first = import_paths([whowhen_dir], warehouse)
    assert (first.runs_written, first.labels_written) == (138, 138)
    assert warehouse.count("labels") == 138
    assert warehouse.count("runs") == 138
    counts = warehouse.rows("SELECT framework, count(*) AS n FROM labels GROUP BY 1 ORDER BY 1")
    assert counts == [{"framework": "captainagent", "n": 126}, {"framework": "magentic-one", "n": 12}]
    n_steps = sum(len(json.loads(p.read_text())["history"]) for p in whowhen_dir.rglob("*.json"))
    assert warehouse.count("steps") == n_steps

    second = import_paths([whowhen_dir], warehouse)
    assert (second.runs_written, second.labels_written) == (0, 0)
    assert (second.runs_skipped, second.labels_skipped) == (138, 138)
    assert warehouse.count("labels") == 138
    assert warehouse.count("steps") == n_steps
    assert warehouse.count("annotations") == 138


def test_labels_match_the_files(whowhen_dir: Path, warehouse: Warehouse):
    import_paths([whowhen_dir], warehouse)
    rows = warehouse.rows("SELECT r.source, l.agent, l.step, l.method, l.verified, l.reason FROM labels l JOIN runs r ON r.id = l.run_id")
    assert len(rows) == 138
    for row in rows:
        record = json.loads(Path(row["source"]).read_text())
        assert row["agent"] == record["mistake_agent"]
        assert row["step"] == int(record["mistake_step"])
        assert row["reason"] == record["mistake_reason"]
        assert row["method"] == "human" and row["verified"] is True


def test_hand_crafted_agents_drop_the_orchestrator_suffix(whowhen_dir: Path):
    trajectory, label = load_file(whowhen_dir / "Hand-Crafted" / "6.json")
    assert trajectory.framework == "magentic-one"
    assert trajectory.steps[5].role == "Orchestrator (thought)"
    assert trajectory.steps[5].agent == "Orchestrator" == label.agent
    assert trajectory.steps[0].kind == "human"
    assert label.evidence.notes == []


def test_known_label_quirk_is_kept_with_a_note(whowhen_dir: Path):
    # Algorithm-Generated 14: step 2 is the Computer_terminal's turn but the label names Culinary_Awards_Expert.
    trajectory, label = load_file(whowhen_dir / "Algorithm-Generated" / "14.json")
    assert trajectory.steps[2].agent == "Computer_terminal" and trajectory.steps[2].kind == "tool"
    assert (label.agent, label.step) == ("Culinary_Awards_Expert", 2)
    assert "differs from the agent of step 2" in label.evidence.notes[0]


def test_round_trip_is_lossless(whowhen_dir: Path, warehouse: Warehouse, tmp_path: Path):
    import_paths([whowhen_dir], warehouse)
    out = tmp_path / "export"
    assert export_whowhen(warehouse, out) == 138
    originals = {str(p.relative_to(whowhen_dir)): p for p in whowhen_dir.rglob("*.json")}
    exported = {str(p.relative_to(out)): p for p in out.rglob("*.json")}
    assert exported.keys() == originals.keys()
    byte_identical = 0
    for name, original in originals.items():
        a, b = json.loads(original.read_text()), json.loads(exported[name].read_text())
        assert a == b, name
        assert list(a) == list(b), f"{name}: key order"
        assert [list(e) for e in a["history"]] == [list(e) for e in b["history"]], f"{name}: entry key order"
        assert type(a.get("level")) is type(b.get("level")), f"{name}: level type"
        byte_identical += original.read_bytes() == exported[name].read_bytes()
    # Machine-written files come back byte for byte; a few hand-edited ones differ only in whitespace.
    assert byte_identical >= 125
    # and exporting the export again re-imports as the very same runs
    again = Warehouse(tmp_path / "wh2")
    import_paths([out], again)
    assert {r["id"] for r in again.rows("SELECT id FROM runs")} == {r["id"] for r in warehouse.rows("SELECT id FROM runs")}


def test_plain_trace_formats(tmp_path: Path, warehouse: Warehouse):
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "a.json").write_text(
        json.dumps(
            {
                "conversation": [
                    {"role": "user", "content": "What is 6*7?"},
                    {"name": "solver", "role": "assistant", "content": "6*7 = 48"},
                    {"name": "checker", "role": "assistant", "content": "Looks right: 48"},
                ],
                "question": "What is 6*7?",
                "ground_truth": 42,
                "mistake_agent": "solver",
                "mistake_step": 1,
            }
        )
    )
    (traces / "b.json").write_text(json.dumps({"history": [{"name": "solver", "content": "42"}], "question": "q", "ground_truth": "42"}))
    report = import_paths([traces], warehouse, framework="myframework", benchmark="arith")
    assert (report.runs_written, report.labels_written) == (2, 1)
    label = warehouse.rows("SELECT agent, step, framework, benchmark FROM labels")[0]
    assert label == {"agent": "solver", "step": 1, "framework": "myframework", "benchmark": "arith"}
    steps = warehouse.rows("SELECT agent, kind FROM steps ORDER BY run_id, step")
    assert {"agent": "user", "kind": "human"} in steps
    unlabelled = warehouse.rows("SELECT success FROM runs r WHERE NOT EXISTS (SELECT 1 FROM labels l WHERE l.run_id = r.id)")
    assert unlabelled == [{"success": None}]
    out = tmp_path / "out"
    export_whowhen(warehouse, out)
    a = json.loads((out / "arith" / "a.json").read_text())
    assert a["ground_truth"] == 42 and a["mistake_step"] == 1 and list(a)[0] == "conversation"


BAD_INPUTS = [
    ("{not json", "<json>", "malformed JSON"),
    ('{"question": "q", "ground_truth": "a"}', "history", "missing"),
    ('{"history": "hello"}', "history", "expected a list"),
    ('{"history": [{"name": "a"}]}', "history[0].content", "missing"),
    ('{"history": [{"content": "x"}]}', "history[0].name", "needs `name` or `role`"),
    ('{"history": [{"name": "a", "content": "x"}], "mistake_agent": "a", "mistake_step": "3"}', "mistake_step", "outside the history"),
    ('{"history": [{"name": "a", "content": "x"}], "mistake_agent": "a", "mistake_step": "two"}', "mistake_step", "not an integer"),
    ('{"history": [{"name": "a", "content": "x"}], "mistake_agent": "a", "mistake_step": 0.5}', "mistake_step", "not an integer"),
    ('{"history": [{"name": "a", "content": "x"}], "mistake_agent": "a", "mistake_step": "-1"}', "mistake_step", "outside the history"),
    ('{"history": [{"name": "a", "content": "x"}], "mistake_agent": "zed", "mistake_step": "0"}', "mistake_agent", "not an agent of this trajectory"),
    ('{"history": [{"name": "a", "content": "x"}], "mistake_step": "0"}', "mistake_agent", "needs both"),
]


@pytest.mark.parametrize("text,field,problem", BAD_INPUTS)
def test_bad_input_names_file_field_and_problem(tmp_path: Path, text: str, field: str, problem: str):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_file(path)
    assert info.value.file == str(path)
    assert info.value.field == field
    assert problem in info.value.problem
    assert str(path) in str(info.value) and field in str(info.value)


def test_failed_import_touches_nothing_and_skip_invalid_imports_the_rest(whowhen_copy: Path, tmp_path: Path):
    warehouse = Warehouse(tmp_path / "wh")
    import_paths([whowhen_copy / "Hand-Crafted"], warehouse)
    before = _files(Path(warehouse.root) / "runs") | _files(Path(warehouse.root) / "annotations")

    broken = whowhen_copy / "Algorithm-Generated" / "7.json"
    record = json.loads(broken.read_text())
    record["mistake_step"] = str(len(record["history"]) + 5)
    broken.write_text(json.dumps(record))
    (whowhen_copy / "Algorithm-Generated" / "8.json").write_text("{ truncated")

    with pytest.raises(InputError, match="mistake_step"):
        import_paths([whowhen_copy], warehouse)
    after = _files(Path(warehouse.root) / "runs") | _files(Path(warehouse.root) / "annotations")
    assert after == before
    assert warehouse.count("labels") == 12

    report = import_paths([whowhen_copy], warehouse, skip_invalid=True)
    assert sorted(Path(f).name for f, _ in report.invalid) == ["7.json", "8.json"]
    assert report.runs_written == 124 and report.runs_skipped == 12
    assert warehouse.count("labels") == 136


def test_parse_record_rejects_non_objects():
    with pytest.raises(InputError, match="expected a JSON object"):
        parse_record([1, 2], "x.json")
