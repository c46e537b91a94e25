"""The numeric verifier (GSM8K): extraction rules, tricky formats, and GSM8K's own reference answers."""

from __future__ import annotations

import pytest

from rootstep.benchmarks import extract_number, get_verifier, load_tasks, parse_number, verify
from rootstep.model import Task

numeric = get_verifier("numeric")


def task(truth: str) -> Task:
    return Task(benchmark="gsm8k", task_id="t", prompt="q", ground_truth=truth, verifier="numeric", kind="math")


@pytest.mark.parametrize(
    ("answer", "truth"),
    [
        ("1,000", "1000"),
        ("1000", "1,000"),
        ("The total is $1,450,000.", "1,450,000"),
        ("$18.00", "18"),
        ("She makes $18 every day.", "18"),
        ("18.", "18"),
        ("#### 18", "18"),
        ("So 9 * 2 = 18\n#### 18", "18"),
        ("We get \\boxed{18} as the result, checked with 3 methods.", "18"),
        ("The answer is 42 apples, because 6 * 7 = 42 and 2 more days pass.", "42"),
        ("Final answer: 7\n\nLet me double-check with 3 other numbers: 1, 2, 3.", "7"),
        ("The temperature is -3 degrees.", "-3"),
        ("It is 25%.", "25"),
        ("\\boxed{\\frac{1}{2}}", "0.5"),
        ("1/2", "0.5"),
        ("0.50", ".5"),
    ],
)
def test_equal_answers(answer: str, truth: str) -> None:
    verdict = numeric(answer, task(truth))
    assert verdict.success, verdict.details
    assert verdict.score == 1.0


@pytest.mark.parametrize(
    ("answer", "truth"),
    [
        ("17", "18"),
        ("1,0000", "1000"),  # not a thousands separator: the last number is 0000
        ("It is 0.25.", "25"),  # percentages are the number before the sign, not a fraction
        ("The answer is 42 apples", "24"),
        ("COVID-19", "-19"),  # a hyphen inside a word is not a minus sign
        ("no number here", "3"),
        ("", "3"),
    ],
)
def test_different_answers(answer: str, truth: str) -> None:
    verdict = numeric(answer, task(truth))
    assert not verdict.success
    assert verdict.score == 0.0


def test_details_say_what_was_compared() -> None:
    verdict = numeric("so the answer is $1,000.", task("1000"))
    assert verdict.details["method"] == "answer_phrase"
    assert verdict.details["extracted_value"] == "1000"
    assert verdict.details["expected_value"] == "1000"
    assert numeric("nothing", task("3")).details["reason"] == "no number in the answer"


def test_extraction_priority() -> None:
    assert extract_number("#### 5\nThe answer is 6")[2] == "####"
    assert extract_number("The answer is 6. \\boxed{7}")[0] == 7
    assert extract_number("3 then 4 then 5")[0] == 5
    assert parse_number("2,125") == 2125
    assert parse_number("no") is None


def test_abs_tol_option() -> None:
    assert not numeric("3.14159", task("3.1416")).success
    assert numeric("3.14159", task("3.1416"), abs_tol=1e-3).success


def test_gsm8k_reference_answers_all_pass() -> None:
    tasks = load_tasks("gsm8k")
    assert len(tasks) == 1319
    failed = [t.task_id for t in tasks if not verify(t, t.metadata["solution"]).success]
    assert failed == []
    # the final line alone also passes, and the reference answer of another task fails
    assert verify(tasks[0], f"The answer is {tasks[0].ground_truth}.").success
    wrong = next(t for t in tasks if parse_number(t.ground_truth) != parse_number(tasks[0].ground_truth))
    assert not verify(tasks[0], wrong.metadata["solution"]).success


def test_gsm8k_answers_with_commas_compare_as_numbers() -> None:
    with_commas = [t for t in load_tasks("gsm8k") if "," in t.ground_truth]
    assert len(with_commas) == 14
    for t in with_commas:
        assert verify(t, t.ground_truth.replace(",", "")).success
