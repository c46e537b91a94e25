"""QA exact match / F1 (HotpotQA), plain exact match, GAIA quasi-exact match, and the offline search tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from rootstep.benchmarks import f1_score, gaia_match, get_verifier, load_tasks, normalize_answer, search, task_search, verify
from rootstep.model import Task

FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"


def task(truth: str | None, verifier: str, **metadata) -> Task:
    return Task(benchmark="x", task_id="t", prompt="q", ground_truth=truth, verifier=verifier, kind="qa", metadata=metadata)


def test_squad_normalisation() -> None:
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple, a pear and the fig.") == "apple pear and fig"


def test_qa_exact_match_and_f1() -> None:
    qa = get_verifier("qa")
    good = qa("The Norrström.", task("Norrström", "qa"))
    assert good.success and good.score == 1.0 and good.details["exact_match"]
    partial = qa("the Norrström river", task("Norrström", "qa"))
    assert not partial.success
    assert partial.score == pytest.approx(2 * (1 / 2) * 1 / (1 / 2 + 1))
    assert qa("the Norrström river", task("Norrström", "qa"), success_on="f1", f1_threshold=0.6).success
    assert not qa("Oslo", task("Norrström", "qa")).success


def test_qa_yes_no_rule_and_aliases() -> None:
    assert f1_score("yes it is", "yes") == 0.0
    assert f1_score("yes", "yes") == 1.0
    qa = get_verifier("qa")
    assert qa("NYC", task("New York City", "qa", aliases=["NYC"])).success
    assert not qa(None, task("x", "qa")).success
    assert qa("x", task(None, "qa")).details["error"] == "task has no ground truth"


def test_exact_verifier() -> None:
    exact = get_verifier("exact")
    assert exact("  Paris \n", task("Paris", "exact")).success
    assert not exact("paris", task("Paris", "exact")).success
    assert exact("paris", task("Paris", "exact"), ignore_case=True).success
    assert not exact(" Paris", task("Paris", "exact"), strip=False).success


@pytest.mark.parametrize(
    ("answer", "truth", "ok"),
    [
        ("17000", "17000", True),
        ("17,000", "17000", True),
        ("$17,000", "17000", True),
        ("17000 apples", "17000", False),
        ("2, 3, 5", "2, 3, 5", True),
        ("2;3;5", "2, 3, 5", True),
        ("2, 3", "2, 3, 5", False),
        ("apple, Banana", "apple, banana", True),
        ("St. Petersburg", "Saint Petersburg", False),
        ("saint-petersburg", "Saint Petersburg", True),
        ("FINAL ANSWER: 3", "3", True),
        ("Thinking... 4 rows? No.\nFINAL ANSWER: 3", "3", True),
    ],
)
def test_gaia_quasi_exact_match(answer: str, truth: str, ok: bool) -> None:
    verdict = get_verifier("gaia")(answer, task(truth, "gaia"))
    assert verdict.success is ok, verdict.details


def test_gaia_rules_named() -> None:
    assert gaia_match("3", "3") == (True, "number")
    assert gaia_match("a,b", "a,b")[1] == "list"
    assert gaia_match("x", "y")[1] == "string"


def test_search_ranks_the_paragraph_that_holds_the_answer() -> None:
    tasks = load_tasks("hotpotqa", paths=[FIXTURES / "hotpotqa_distractor.json"])
    first = tasks[0]
    hits = task_search(first, "river flows through Stockholm", k=2)
    assert len(hits) == 2 and hits[0].title == "Stockholm"
    assert hits[0].rank == 0 and hits[0].score > hits[1].score
    assert "Norrström" in hits[0].text
    assert search(first.metadata["paragraphs"], "Vasa warship", k=1)[0].title == "Vasa Museum"
    assert search(first.metadata["paragraphs"], "zzz unknown words", k=3) == []
    assert search([], "anything") == []
    assert search(first.metadata["paragraphs"], "Stockholm", k=0) == []


def test_hotpotqa_fixture_answers() -> None:
    tasks = load_tasks("hotpotqa", paths=[FIXTURES / "hotpotqa_distractor.json"])
    assert [t.ground_truth for t in tasks] == ["Norrström", "yes"]
    assert tasks[0].metadata["supporting_facts"] == [["Vasa Museum", 0], ["Stockholm", 1]]
    assert tasks[0].metadata["paragraphs"][1]["sentences"][1].strip().startswith("The Norrström")
    assert verify(tasks[0], "Norrström").success
    assert verify(tasks[1], "Yes.").success
    assert not verify(tasks[1], "no").success
