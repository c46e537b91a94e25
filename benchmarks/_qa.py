"""Short-answer QA: SQuAD exact match and token F1 (HotpotQA), and plain exact match.

Normalisation is the official SQuAD / HotpotQA one: lower case, punctuation removed, the articles
`a`, `an`, `the` removed, whitespace collapsed. As in the HotpotQA evaluation, when either side
normalises to `yes`, `no` or `noanswer`, F1 is 0 unless both are identical.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Literal

from rootstep.model import Task, Verdict

from ._answer import final_answer_span
from ._registry import verifier

_SPECIAL = {"yes", "no", "noanswer"}


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower, drop punctuation, drop articles, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, truth: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(truth)


def f1_score(prediction: str, truth: str) -> float:
    """Token-level F1 between the normalised strings (HotpotQA's yes/no/noanswer rule applied)."""
    pred, gold = normalize_answer(prediction), normalize_answer(truth)
    if (pred in _SPECIAL or gold in _SPECIAL) and pred != gold:
        return 0.0
    pred_tokens, gold_tokens = pred.split(), gold.split()
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def marked_span(answer: str) -> tuple[str, str]:
    """The span a QA answer marks as its answer (`Answer: x`, `\\boxed{x}`, `the answer is x`), else the whole
    answer: a short span needs no marker, and an unmarked long text is judged as it is (it fails EM)."""
    span, method = final_answer_span(answer)
    if span is not None and method in ("boxed", "answer_line", "answer_phrase"):
        return span, method
    return answer, "whole"


def _truths(task: Task) -> list[str]:
    truths = [task.ground_truth] if task.ground_truth is not None else []
    aliases = task.metadata.get("aliases") or []
    return truths + [a for a in aliases if isinstance(a, str)]


@verifier("qa")
def qa(
    answer: str | None,
    task: Task,
    *,
    success_on: Literal["em", "f1"] = "em",
    f1_threshold: float = 0.8,
) -> Verdict:
    """SQuAD exact match decides success by default; score is always the token F1.

    Args:
        answer: the agent's final answer: a short span, or a text whose `Answer: x` line (or box, or `the
            answer is x`) marks the span (a long unmarked sentence scores low F1 and fails EM).
        task: `ground_truth` is the gold answer; `metadata["aliases"]` (optional) more accepted answers;
            the best over all of them counts.
        success_on: `em` (default): success iff normalised strings are equal. `f1`: success iff
            F1 >= `f1_threshold`.
        f1_threshold: used only with `success_on="f1"`.

    Edge cases: `The Eiffel Tower.` == `eiffel tower`; `yes` vs `yes, it is` fails EM and has F1 0.
    """
    truths = _truths(task)
    if not truths:
        return Verdict(success=False, score=0.0, details={"error": "task has no ground truth"})
    prediction, method = marked_span(answer or "")
    em = max(exact_match(prediction, t) for t in truths)
    f1 = max(f1_score(prediction, t) for t in truths)
    success = em if success_on == "em" else f1 >= f1_threshold
    return Verdict(
        success=success,
        score=f1,
        details={
            "expected": truths,
            "extracted": prediction,
            "method": method,
            "normalized_answer": normalize_answer(prediction),
            "exact_match": em,
            "f1": round(f1, 6),
            "success_on": success_on,
        },
    )


@verifier("exact")
def exact(answer: str | None, task: Task, *, ignore_case: bool = False, strip: bool = True) -> Verdict:
    """`answer` equals `task.ground_truth` character for character.

    Args:
        ignore_case: compare case-folded strings.
        strip: ignore leading/trailing whitespace (default True). Nothing else is normalised: use `qa`
            for SQuAD-style matching or `gaia` for numbers and lists.
    """
    if task.ground_truth is None:
        return Verdict(success=False, score=0.0, details={"error": "task has no ground truth"})
    a, t = answer or "", task.ground_truth
    if strip:
        a, t = a.strip(), t.strip()
    if ignore_case:
        a, t = a.casefold(), t.casefold()
    ok = a == t
    return Verdict(success=ok, score=float(ok), details={"expected": task.ground_truth, "compared": [a, t]})
