"""GAIA quasi-exact match, as in the GAIA leaderboard's scorer.

- Ground truth is a number: the answer, with `$`, `%` and `,` removed, must parse as the same float
  (`$1,000` == `1000`; `1000 apples` does not parse and fails).
- Ground truth contains `,` or `;`: both sides are split on those; same length; each element compared
  as a number (when the truth element is one) or as a string with whitespace removed and lower-cased
  (punctuation kept).
- Otherwise: strings compared with all whitespace and punctuation removed, lower-cased.
Before scoring, the text after the last `FINAL ANSWER:` is taken when present (GAIA's prompt asks for
that line), else the whole answer.
"""

from __future__ import annotations

import re
import string

from rootstep.model import Task, Verdict

from ._registry import verifier

_FINAL = re.compile(r"final answer\s*:", re.IGNORECASE)


def _is_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _number(text: str) -> float:
    for ch in ("$", "%", ","):
        text = text.replace(ch, "")
    try:
        return float(text)
    except ValueError:
        return float("inf")


def _normalize_str(text: str, remove_punct: bool = True) -> str:
    text = re.sub(r"\s", "", text).lower()
    return text.translate(str.maketrans("", "", string.punctuation)) if remove_punct else text


def gaia_match(answer: str, truth: str) -> tuple[bool, str]:
    """(match, which rule decided)."""
    if _is_float(truth):
        return _number(answer) == float(truth), "number"
    if any(ch in truth for ch in ",;"):
        gt, ma = re.split(r"[,;]", truth), re.split(r"[,;]", answer)
        if len(gt) != len(ma):
            return False, f"list of {len(ma)} vs {len(gt)} elements"
        ok = all(
            _number(m) == float(g) if _is_float(g) else _normalize_str(m, False) == _normalize_str(g, False)
            for m, g in zip(ma, gt)
        )
        return ok, "list"
    return _normalize_str(answer) == _normalize_str(truth), "string"


def final_answer(text: str) -> str:
    parts = _FINAL.split(text)
    return parts[-1].strip() if len(parts) > 1 else text.strip()


@verifier("gaia")
def gaia(answer: str | None, task: Task) -> Verdict:
    """GAIA quasi-exact match of the `FINAL ANSWER:` (or the whole answer) against `task.ground_truth`.

    Edge cases: `17,000` vs truth `17000` is a number match (commas dropped); `a, b` vs `a;b` match
    (both split on `,`/`;`); `St. Petersburg` vs `Saint Petersburg` do not match.
    """
    if task.ground_truth is None:
        return Verdict(success=False, score=0.0, details={"error": "task has no ground truth"})
    extracted = final_answer(answer or "")
    ok, rule = gaia_match(extracted, task.ground_truth)
    return Verdict(
        success=ok, score=float(ok), details={"expected": task.ground_truth, "extracted": extracted, "rule": rule}
    )
