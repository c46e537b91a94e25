"""The golden-path matrix: every (framework, benchmark) cell the adapters support, and the real task each
cell runs, chosen on purpose.

A cell is a framework and a benchmark whose kind is in the adapter's `task_kinds`. Each cell names one
task of `../shared/data` and, for math and QA, a wrong answer a team could plausibly give (a wrong number,
a tuple with one wrong element, an interval with the wrong ends); code cells use the task's canonical
solution and, for the wrong team, the same program with the entry point's body replaced by `return None`.

Why these tasks: the MATH-500 cells cover the answer forms a prompt's `Answer: <...>` line must carry
(the issue's AG2 example, answer `1`; a tuple; a fraction; an interval; a polynomial; a union of
intervals), GSM8K answers written with thousands separators and a negative one; code cells cover
imports, helper functions, several definitions, typing imports (HumanEval's `from typing import List`),
tuple inputs and a float answer (MBPP+ decoding and tolerance) and EvalPlus's special oracles.

Benchmarks whose data cannot be fetched on the machines that run these tests (`LEFT_OUT`) have no cells:
a cell there could only ever be skipped. Their loaders and verifiers are tested on small files in
tests/fixtures/benchmarks instead.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from rootstep.model import Task


@dataclass(frozen=True)
class Cell:
    framework: str
    benchmark: str
    task_id: str
    wrong: str | None = None
    """The wrong team's answer (math, QA); None for code (the broken program is derived)."""
    why: str = ""

    @property
    def id(self) -> str:
        return f"{self.framework}-{self.benchmark}"


LEFT_OUT: dict[str, str] = {
    "kodcode": "KodCode-V1 (Hugging Face) cannot be fetched here; its loader and pytest harness are tested on "
               "tests/fixtures/benchmarks/kodcode.jsonl (test_benchmarks_loaders.py, test_benchmarks_code.py)",
    "gaia": "GAIA (a gated Hugging Face dataset) cannot be fetched here, and no framework runs agentic tasks; its "
            "loader and quasi-exact-match verifier are tested on tests/fixtures/benchmarks/gaia "
            "(test_benchmarks_loaders.py, test_benchmarks_qa.py)",
}
"""Built-in benchmarks without golden cells, and why. When one's data arrives, the guard test fails:
choose its cells below and take it off this list."""


def _cells(benchmark: str, rows: list[tuple[str, str, str | None, str]]) -> list[Cell]:
    return [Cell(framework, benchmark, task_id, wrong, why) for framework, task_id, wrong, why in rows]


CELLS: list[Cell] = [
    *_cells("math500", [
        ("ag2", "test/algebra/2023.json", "2", "the issue's example: f(x)=sqrt(x-1)/(x-2), answer 1"),
        ("smolagents", "test/precalculus/807.json", r"\left( 3, \pi \right)", "a tuple with LaTeX: (3, pi/2)"),
        ("metagpt", "test/algebra/2584.json", r"\frac{13}{3}", "a fraction"),
        ("owl", "test/algebra/2486.json", r"\left[\frac{3}{5},\frac{8}{3}\right)", "a half-open interval"),
        ("aflow", "test/intermediate_algebra/1217.json", "x^5 + x^4 + x^3 + x^2 + x + 1", "a polynomial"),
        ("agentprune", "test/algebra/2043.json", r"(-\infty, 2] \cup [3, \infty)", "a union of intervals"),
    ]),
    *_cells("gsm8k", [
        ("ag2", "test-0", "20", "Janet's ducks, 18"),
        ("smolagents", "test-2", "80,000", "a money answer (70000) among $80,000 and $50,000 in the question"),
        ("metagpt", "test-146", "2,152", "a reference written with a thousands separator (2,125)"),
        ("owl", "test-489", "10", "a negative reference (-10)"),
        ("aflow", "test-7", "120", "160"),
        ("agentprune", "test-201", "114,020", "a six-digit reference with a separator (114,200)"),
    ]),
    *_cells("hotpotqa", [
        ("aflow", "5a87bd4e5542994846c1cde0", "yes", "a comparison question, answer no"),
        ("agentprune", "5abe364e5542993f32c2a08e", "Teen Titans: Trouble in Tokyo",
         "a bridge question whose answer has punctuation (Teen Titans Go!)"),
    ]),
    *_cells("mbpp", [
        ("ag2", "3", None, "an import (math)"),
        ("smolagents", "2", None, "returns a tuple built from sets"),
        ("metagpt", "18", None, "four functions: helpers around the entry point"),
        ("owl", "7", None, "a regex `\\w{4,}` inside camel's JSON results (its clean-up dropped the comma)"),
        ("aflow", "6", None, "a helper function"),
        ("agentprune", "4", None, "an aliased import (heapq as hq)"),
    ]),
    *_cells("mbppplus", [
        ("ag2", "Mbpp/2", None, "tuple inputs (decoded) and EvalPlus's set oracle"),
        ("smolagents", "Mbpp/3", None, "an import (math)"),
        ("metagpt", "Mbpp/61", None, "collections.defaultdict"),
        ("owl", "Mbpp/4", None, "an aliased import (heapq as hq)"),
        ("aflow", "Mbpp/63", None, "lists of tuples as inputs"),
        ("agentprune", "Mbpp/82", None, "a float answer compared with a tolerance"),
    ]),
    *_cells("humaneval", [
        ("ag2", "HumanEval/10", None, "the prompt defines a helper the solution calls"),
        ("smolagents", "HumanEval/0", None, "from typing import List"),
        ("metagpt", "HumanEval/13", None, "a one-line body"),
        ("owl", "HumanEval/2", None, "a float result"),
        ("aflow", "HumanEval/31", None, "seven doctest examples"),
        ("agentprune", "HumanEval/12", None, "Optional in the signature"),
    ]),
    *_cells("humanevalplus", [
        ("ag2", "HumanEval/0", None, "from typing import List"),
        ("smolagents", "HumanEval/23", None, "a short body"),
        ("metagpt", "HumanEval/32", None, "EvalPlus's find_zero oracle, two functions"),
        ("owl", "HumanEval/12", None, "Optional in the signature"),
        ("aflow", "HumanEval/10", None, "the prompt defines a helper the solution calls"),
        ("agentprune", "HumanEval/13", None, "gcd"),
    ]),
]


def broken_program(program: str, entry_point: str) -> str:
    """`program` with the body of `entry_point` replaced by `return None` (its docstring kept): the
    same imports and helpers, a function that is wrong on every example."""
    tree = ast.parse(program)
    found = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry_point:
            docstring = node.body[:1] if ast.get_docstring(node) is not None else []
            node.body = [*docstring, ast.Return(value=ast.Constant(None))]
            found = True
    if not found:
        raise ValueError(f"the program does not define {entry_point!r}")
    return ast.unparse(tree) + "\n"


def answer_of(cell: Cell, task: Task, right: bool) -> str:
    """What the team hands in: the reference answer or the canonical program (right), the cell's wrong
    answer or the broken program (wrong)."""
    if task.kind == "coding":
        program = task.metadata["reference_solution"]
        return program if right else broken_program(program, task.metadata["entry_point"])
    if right:
        assert task.ground_truth is not None, f"{cell.id}: task {task.task_id} has no reference answer"
        return task.ground_truth
    assert cell.wrong is not None, f"{cell.id}: no wrong answer chosen"
    return cell.wrong
