"""Benchmark loaders: real data (GSM8K, MBPP, MBPP+, HumanEval), fixtures for the missing sets,
limit / seed / slice, the data-dir setting and the registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from rootstep.benchmarks import BenchmarkError, count_tasks, get_benchmark, list_benchmarks, load_tasks, select
from rootstep.model import InputError

FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"


def test_builtin_benchmarks_are_registered_with_licences() -> None:
    names = {b.name: b for b in list_benchmarks()}
    assert {"gsm8k", "math500", "mbpp", "mbppplus", "humaneval", "humanevalplus", "kodcode", "hotpotqa", "gaia"} <= set(names)
    for info in names.values():
        assert info.licence and info.source and info.verifier


def test_real_data_counts() -> None:
    assert count_tasks("gsm8k") == 1319
    assert count_tasks("mbpp") == 427
    assert count_tasks("mbppplus") == 399
    assert count_tasks("humaneval") == 164


def test_task_fields() -> None:
    gsm = load_tasks("gsm8k", limit=1)[0]
    assert (gsm.benchmark, gsm.task_id, gsm.ground_truth, gsm.verifier, gsm.kind) == ("gsm8k", "test-0", "18", "numeric", "math")
    assert gsm.prompt.startswith("Janet")
    mbpp = load_tasks("mbpp", limit=1)[0]
    assert mbpp.task_id == "2" and mbpp.metadata["entry_point"] == "similar_elements"
    assert mbpp.metadata["harness"] == "asserts" and len(mbpp.metadata["tests"]) == 3
    assert "assert set(similar_elements" in mbpp.prompt
    plus = load_tasks("mbppplus", limit=1)[0]
    assert plus.task_id == "Mbpp/2" and plus.metadata["decode"] == "args_tuple" and plus.metadata["oracle"] == "set"
    he = load_tasks("humaneval", limit=1)[0]
    assert he.task_id == "HumanEval/0" and he.metadata["entry_point"] == "has_close_elements"
    assert he.metadata["prefix"] == he.prompt


def test_mbppplus_dict_plus_input_is_read_as_empty() -> None:
    task = next(t for t in load_tasks("mbppplus") if t.task_id == "Mbpp/793")
    assert task.metadata["plus_input"] == []


def test_limit_seed_slice() -> None:
    all_ids = [t.task_id for t in load_tasks("gsm8k")]
    assert [t.task_id for t in load_tasks("gsm8k", limit=3)] == all_ids[:3]
    assert [t.task_id for t in load_tasks("gsm8k", start=10, stop=13)] == all_ids[10:13]
    shuffled = [t.task_id for t in load_tasks("gsm8k", seed=7, limit=5)]
    assert shuffled == [t.task_id for t in load_tasks("gsm8k", seed=7, limit=5)]
    assert shuffled != all_ids[:5]
    assert shuffled != [t.task_id for t in load_tasks("gsm8k", seed=8, limit=5)]
    # order: shuffle, then slice, then limit
    assert [t.task_id for t in load_tasks("gsm8k", seed=7, start=2, limit=2)] == [
        t.task_id for t in load_tasks("gsm8k", seed=7, limit=4)
    ][2:4]
    assert load_tasks("gsm8k", limit=0) == []
    with pytest.raises(BenchmarkError):
        select([], limit=-1)


def test_missing_data_is_reported_not_faked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ROOTSTEP_SHARED_DATA", str(tmp_path))
    assert count_tasks("gsm8k") is None
    assert not get_benchmark("gsm8k").available()
    with pytest.raises(BenchmarkError, match="data file"):
        load_tasks("gsm8k")
    with pytest.raises(BenchmarkError, match="unknown benchmark"):
        load_tasks("nope")


def test_data_dir_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "math500").mkdir()
    (tmp_path / "math500" / "test.jsonl").write_bytes((FIXTURES / "math500.jsonl").read_bytes())
    monkeypatch.setenv("ROOTSTEP_SHARED_DATA", str(tmp_path))
    assert count_tasks("math500") == 5


def test_math500_fixture() -> None:
    tasks = load_tasks("math500", paths=[FIXTURES / "math500.jsonl"], seed=1, limit=2)
    assert len(tasks) == 2 and all(t.verifier == "math" for t in tasks)


def test_gaia_fixture() -> None:
    tasks = load_tasks("gaia", paths=[FIXTURES / "gaia" / "metadata.jsonl"])
    assert len(tasks) == 4
    first = tasks[0]
    assert first.kind == "agentic" and first.verifier == "gaia" and first.ground_truth == "3"
    assert Path(first.metadata["file_path"]).read_text().count("\n") == 4
    assert first.metadata["annotator_metadata"]["Number of steps"] == "1"
    assert "file_path" not in tasks[1].metadata
    assert tasks[3].ground_truth is None  # "?" in the hidden test split


def test_gaia_missing_attachment(tmp_path: Path) -> None:
    meta = tmp_path / "metadata.jsonl"
    meta.write_text('{"task_id": "a", "Question": "q", "Final answer": "1", "file_name": "gone.pdf"}\n')
    with pytest.raises(InputError, match="line 1: file_name"):
        load_tasks("gaia", paths=[meta])


def test_hotpotqa_jsonl_and_errors(tmp_path: Path) -> None:
    bad = tmp_path / "h.jsonl"
    bad.write_text('{"_id": "1", "question": "q", "answer": "a", "context": [["t", "not a list"]]}\n')
    with pytest.raises(InputError, match=r"context\[0\]"):
        load_tasks("hotpotqa", paths=[bad])


def test_kodcode_fixture() -> None:
    tasks = load_tasks("kodcode", paths=[FIXTURES / "kodcode.jsonl"])
    assert [t.task_id for t in tasks] == ["Leetcode_0001_I", "Apps_0002_I"]
    assert tasks[0].metadata["harness"] == "pytest" and tasks[0].metadata["entry_point"] == "safe_divide"
    assert tasks[0].prompt.endswith("Note that the output function should be def safe_divide(a, b):.")


def test_humanevalplus_fixture() -> None:
    tasks = load_tasks("humanevalplus", paths=[FIXTURES / "humanevalplus.jsonl"])
    assert [t.task_id for t in tasks] == ["HumanEval/0", "HumanEval/2", "HumanEval/32"]
    assert tasks[2].metadata["oracle"] == "find_zero"
    assert tasks[0].metadata["canonical_solution"].startswith("from typing import List")


def test_bad_jsonl_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "test.jsonl"
    bad.write_text('{"question": "q", "answer": "#### 1"}\n{"question": "q2"\n')
    with pytest.raises(InputError, match=r"test.jsonl: line 2"):
        load_tasks("gsm8k", paths=[bad])
    bad.write_text('{"question": "q", "answer": "no final line"}\n')
    with pytest.raises(InputError, match=r"line 1: answer"):
        load_tasks("gsm8k", paths=[bad])
