"""The math verifier (MATH-500 style): boxed extraction, normalisation, sympy equivalence."""

from __future__ import annotations

from pathlib import Path

import pytest

from rootstep.benchmarks import extract_math_answer, get_verifier, last_boxed, load_tasks, normalize_latex, verify
from rootstep.benchmarks._math import call_with_timeout, math_equal, sympy_equal, to_sympy
from rootstep.model import Task

FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"
math = get_verifier("math")


def task(truth: str) -> Task:
    return Task(benchmark="math500", task_id="t", prompt="q", ground_truth=truth, verifier="math", kind="math")


def test_last_boxed_handles_nested_braces() -> None:
    text = "First \\boxed{1}, then \\boxed{\\frac{\\sqrt{2}}{2}} is final."
    assert last_boxed(text) == "\\frac{\\sqrt{2}}{2}"
    assert last_boxed("\\boxed 5$") == "5"
    assert last_boxed("\\fbox{x+1}") == "x+1"
    assert last_boxed("\\boxed{unbalanced") is None
    assert last_boxed("no box") is None


@pytest.mark.parametrize(
    ("answer", "truth"),
    [
        ("\\boxed{0.5}", "\\frac{1}{2}"),
        ("\\boxed{\\dfrac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{\\frac12}", "\\frac{1}{2}"),
        ("\\boxed{\\tfrac{2}{4}}", "0.5"),
        ("So the answer is \\boxed{\\left( 1, \\sqrt{2} \\right)}.", "(1,\\sqrt{2})"),
        ("\\boxed{90^\\circ}", "90"),
        ("\\boxed{90}", "90^{\\circ}"),
        ("\\boxed{10\\text{ cm}}", "10"),
        ("\\boxed{3\\text{ m}}", "3"),
        ("\\boxed{12\\text{ cm}^2}", "12"),
        ("\\boxed{10 cm}", "10"),
        ("\\boxed{\\text{(C)}}", "(C)"),
        ("\\boxed{1,000}", "1000"),
        ("\\boxed{x = 3}", "3"),
        ("\\boxed{2\\sqrt{2}}", "\\sqrt{8}"),
        ("\\boxed{\\sqrt{2}/2}", "\\frac{\\sqrt{2}}{2}"),
        ("\\boxed{x^2+2x+1}", "(x+1)^2"),
        ("\\boxed{3, 1, 2}", "1, 2, 3"),
        ("\\boxed{\\pi}", "\\pi"),
        ("\\boxed{25\\%}", "25"),
        ("The final answer is $\\frac{3}{4}$.", "0.75"),
        ("7", "7"),
        ("\\boxed{\\frac{\\frac{1}{2}}{2}}", "\\frac{1}{4}"),
        ("\\boxed{2.50}", "\\frac{5}{2}"),
    ],
)
def test_equivalent(answer: str, truth: str) -> None:
    verdict = math(answer, task(truth))
    assert verdict.success, verdict.details


@pytest.mark.parametrize(
    ("answer", "truth"),
    [
        ("\\boxed{0.33}", "\\frac{1}{3}"),
        ("\\boxed{\\frac{1}{3}}", "\\frac{1}{2}"),
        ("\\boxed{(2, 1)}", "(1, 2)"),  # tuples are ordered
        ("\\boxed{1, 2}", "1, 2, 3"),
        ("\\boxed{x^2+1}", "(x+1)^2"),
        ("\\boxed{2x}", "2"),  # a single letter after a number is a variable, not a unit
        ("A long explanation\nwith several lines but no final answer marker 5", "5"),
        ("\\boxed{__import__('os').system('true')}", "0"),
        ("", "1"),
    ],
)
def test_not_equivalent(answer: str, truth: str) -> None:
    verdict = math(answer, task(truth))
    assert not verdict.success, verdict.details


def test_details_say_what_decided() -> None:
    verdict = math("\\boxed{0.5}", task("\\frac{1}{2}"))
    assert verdict.details["extracted"] == "0.5"
    assert verdict.details["method"] == "boxed"
    assert verdict.details["decided_by"].startswith("numeric")
    same = math("\\boxed{\\dfrac{1}{2}}", task("\\frac{1}{2}"))
    assert same.details["decided_by"] == "normalized string"


def test_normalize_latex_rules() -> None:
    assert normalize_latex("\\left( 1, 2 \\right)") == "(1,2)"
    assert normalize_latex("\\dfrac{1}{2}") == "\\frac{1}{2}"
    assert normalize_latex("\\frac12") == "\\frac{1}{2}"
    assert normalize_latex("5\\text{ inches}") == "5"
    assert normalize_latex("$1,234.50$") == "1234.5"
    assert normalize_latex(".5") == "0.5"


def test_extract_math_answer_methods() -> None:
    assert extract_math_answer("so \\boxed{4}") == ("4", "boxed")
    assert extract_math_answer("Final answer: $x^2$.") == ("x^2", "answer_line")
    assert extract_math_answer("so the final answer is $x^2$.") == ("x^2", "answer_phrase")
    assert extract_math_answer("12") == ("12", "whole")
    assert extract_math_answer("line one\nline two") == (None, "none")


def test_unsafe_names_are_refused() -> None:
    with pytest.raises(ValueError):
        to_sympy("__import__('os')")
    with pytest.raises(ValueError):
        to_sympy("open(1)")
    ok, how = sympy_equal("exec(1)", "1")
    assert not ok and "not allowed" in how


def test_timeout_counts_as_not_equal() -> None:
    import time

    with pytest.raises(TimeoutError):
        call_with_timeout(lambda: time.sleep(2), 0.2)
    ok, how = sympy_equal("x**2", "x**2 + 0", timeout=0.000001)
    assert not ok and "timed out" in how


def test_timeout_off_the_main_thread() -> None:
    import threading
    import time

    errors: list[BaseException] = []

    def worker() -> None:
        try:
            call_with_timeout(lambda: time.sleep(2), 0.2)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert len(errors) == 1 and isinstance(errors[0], TimeoutError)


def test_math500_fixture_reference_answers_pass() -> None:
    tasks = load_tasks("math500", paths=[FIXTURES / "math500.jsonl"])
    assert [t.task_id for t in tasks][:2] == ["test/prealgebra/1.json", "test/algebra/2.json"]
    for t in tasks:
        assert verify(t, t.metadata["solution"]).success, t.task_id
        assert verify(t, f"\\boxed{{{t.ground_truth}}}").success, t.task_id
    assert not verify(tasks[0], "\\boxed{\\frac{1}{3}}").success
    assert tasks[0].metadata["subject"] == "Prealgebra"


def test_an_answer_line_written_as_a_sentence_is_read_for_its_value() -> None:
    """AG2's coder on MATH-500 prealgebra/1114 (the local 0.5B, slice of 2026-11-28, seed 5) answered with the
    right area in a sentence; it was read as the whole sentence and the run stored as a failure, then searched."""
    task = next(t for t in load_tasks("math500") if t.task_id == "test/prealgebra/1114.json")
    assert task.ground_truth == "15\\mbox{ cm}^2"
    said = "Answer: The area of the shaded triangle is 15 square centimeters."
    verdict = verify(task, said)
    assert verdict.success and verdict.details["normalized_answer"] == "15"
    assert verify(task, "Answer: 15 cm^2").success  # a unit with an exponent, as the truth's own
    assert not verify(task, "Answer: The area of the shaded triangle is 16 square centimeters.").success
    assert not verify(task, "Answer: the area is not 15").success  # words after the verb: not a value


SLOW_SYMPY_IMPORT = '''
import sys, time
from importlib.abc import MetaPathFinder

class SlowSympy(MetaPathFinder):
    """sympy's first import as slow as on a machine busy with other work."""
    def find_spec(self, name, path=None, target=None):
        if name == "sympy":
            time.sleep(12)
        return None

sys.meta_path.insert(0, SlowSympy())
from rootstep.benchmarks._math import sympy_equal
print(sympy_equal("0.5", "(1)/(2)", timeout=8.0))
'''


def test_a_slow_first_import_of_sympy_is_not_counted_against_the_comparison() -> None:
    """The timeout bounds the comparison only: before, the first comparison of a process (under load, where
    importing sympy took over 5 s) timed out and a right answer was judged wrong."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", SLOW_SYMPY_IMPORT], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("(True, 'numeric"), done.stdout


def test_a_mixed_number_is_read_as_its_value() -> None:
    """MATH-500 algebra/2470 ("Express your answer as a mixed number", `137 \\frac{1}{2}`): on the seed-31 slice
    (2026-12-01) AG2's and smolagents' right `137.5` were judged wrong, the fraction read as a product (68.5), so
    the counterfactual search would have hunted an error in a right run. A whole number before a fraction of whole
    numbers is the mixed number it is in MATH's answers (geometry/826's `1\\frac{4}{5}` too)."""
    tasks = {t.task_id: t for t in load_tasks("math500")}
    run = tasks["test/algebra/2470.json"]
    assert run.ground_truth == "137 \\frac{1}{2}"
    for right in ("Answer: 137.5", "\\boxed{137 \\frac{1}{2}}", "\\boxed{\\frac{275}{2}}", "\\boxed{137\\frac12}"):
        assert verify(run, right).success, right
    assert not verify(run, "\\boxed{68.5}").success and not verify(run, "\\boxed{137}").success
    assert verify(tasks["test/geometry/826.json"], "\\boxed{1.8}").success
    assert verify(task("-2\\frac{1}{2}"), "\\boxed{-2.5}").success
    assert normalize_latex("2 \\frac{x}{y}") == "2\\frac{x}{y}"  # not whole numbers: not a mixed number


@pytest.mark.parametrize("answer, truth, same", [
    ("[10]", "10", True),  # AG2's coder on MATH-500 intermediate_algebra/101 (seed-47 slice): `print(sp.solve(...))`
    ("[2, 5]", "2, 5", True),
    ("[5, 2]", "2, 5", True),
    ("[2, 5]", "2", False),
    ("[2, 5]", "[2, 5]", True),
    ("[2, 5]", "(2, 5)", False),  # an open interval is not the list of its ends
    ("[9]", "10", False),
])
def test_a_printed_list_of_solutions_is_its_solutions(answer, truth, same):
    assert math_equal(answer, truth)[0] is same
