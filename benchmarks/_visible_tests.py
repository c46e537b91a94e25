"""The tests a task's prompt itself shows (never the benchmark's hidden tests), for adapters whose
workflow runs them inside the episode (AFlow's Test operator, AgentPrune's programmer)."""

from __future__ import annotations

import ast
import doctest

from rootstep.model import Task


def _is_expression(source: str) -> bool:
    try:
        ast.parse(source, mode="eval")
        return True
    except SyntaxError:
        return False


def _compiles(source: str) -> bool:
    try:
        ast.parse(source)
        return True
    except SyntaxError:
        return False


def _doctest_examples(text: str) -> list[tuple[str, str]]:
    """(source, expected output) of the doctest examples in `text` (read as written, so escapes in a
    docstring stay as the code would see them); the closing quotes of a docstring that follow an
    expected output are not part of it. Malformed doctest markup gives no examples rather than an error."""
    try:
        examples = doctest.DocTestParser().get_examples(text)
    except ValueError:
        return []
    found = []
    for example in examples:
        want = [line for line in example.want.strip().splitlines()]
        while want and want[-1].strip() in ('"""', "'''"):
            want.pop()
        found.append((example.source.strip(), "\n".join(want).strip()))
    return found


def visible_tests(task: Task) -> list[str]:
    """The tests the task's prompt itself shows, as Python snippets that raise when they fail.

    - every line of the prompt that is an `assert` statement (MBPP, MBPP+ prompts);
    - every doctest example with an expected output (HumanEval docstrings), as `assert <call> == <output>`
      (or a comparison of `repr` when the output is not a Python expression); an example without output
      that is a comparison (`>>> f(x) == y`) is asserted as it is; other examples without output
      (`>>> x = 1`) are kept as set-up lines of the examples after them.
    Hidden tests in the task's metadata are never used.
    """
    tests: list[str] = []
    for line in task.prompt.splitlines():
        text = line.strip()
        if text.startswith("assert ") and _compiles(text):
            tests.append(text)
    setup: list[str] = []
    for source, want in _doctest_examples(task.prompt):
        if not want:
            expression = ast.parse(source, mode="eval").body if _is_expression(source) else None
            if isinstance(expression, ast.Compare):  # `>>> f(x) == y` with no output: the check itself
                tests.append("\n".join([*setup, f"assert {ast.unparse(expression)}"]))
            elif _compiles(source):
                setup.append(source)
            continue
        if not _is_expression(source):
            continue
        call = ast.unparse(ast.parse(source, mode="eval").body)  # drops comments after the call
        check = (f"assert {call} == {ast.unparse(ast.parse(want, mode='eval').body)}" if _is_expression(want)
                 else f"assert repr({call}) == {want!r}")
        if _compiles(check):
            tests.append("\n".join([*setup, check]))
    return list(dict.fromkeys(tests))
