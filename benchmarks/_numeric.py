"""Numeric answers (GSM8K and any benchmark whose answer is one number).

Extraction looks for, in this order, and takes the LAST occurrence of the first kind found:
1. `#### x` (GSM8K's own answer format);
2. the candidates of `rootstep.benchmarks._answer.answer_spans` that hold a number: the last `\\boxed{x}`
   or `Answer: x` line (whichever is written last, markdown such as `**Answer:** x` allowed), then the
   text after `the final answer is`; then any answer phrase (`the answer would be`, `answer = `)
   followed by a number;
3. otherwise the last number of the text outside its code blocks: a number lifted from a program's text
   (`... / 60`) is not what the program prints (`rootstep.benchmarks._answer.program_answer` appends the
   output of the run's program to a code-only answer).

Numbers: `1,000` and `1,000,000` are thousands separators (`1,2` is two numbers); `$18.00` is 18; a
trailing full stop is punctuation (`18.` is 18); `a/b` written without spaces and `\\frac{a}{b}` are
fractions; a leading minus counts only at the start of a token (`COVID-19` is 19, not -19);
`25%` is 25, NOT 0.25: GSM8K states percentages as the number before the sign, so a model answering
`25%` to "what percent..." is right and one answering `0.25` is wrong. Comparison is exact (rational
arithmetic, so `0.1 + 0.2`-style float noise cannot occur) unless `abs_tol` is given.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from rootstep.model import Task, Verdict

from ._answer import answer_spans, without_code
from ._registry import verifier

_NUM = r"(?:\d{1,3}(?:,\d{3})+(?![\d])|\d+)(?:\.\d+)?|\.\d+"
_TOKEN = re.compile(
    rf"(?P<sign>(?<![\w.\-−])[-−])?\$?\s?(?P<num>{_NUM})(?:\s?/\s?(?P<den>{_NUM}))?",
)
_FRAC = re.compile(r"\\[dt]?frac\{\s*(-?[\d.,]+)\s*\}\{\s*(-?[\d.,]+)\s*\}")
_ANSWER_PHRASE = re.compile(r"(?:final answer|the answer|answer)\s*(?:is|:|=|would be|will be)?", re.IGNORECASE)


def _to_fraction(text: str) -> Fraction:
    return Fraction(text.replace(",", ""))


def _number_tokens(text: str) -> list[tuple[str, Fraction]]:
    """Every number in `text`, in order, as (the text matched, its exact value)."""
    text = _FRAC.sub(lambda m: f"{m.group(1)}/{m.group(2)}", text)
    found: list[tuple[str, Fraction]] = []
    for m in _TOKEN.finditer(text):
        value = _to_fraction(m.group("num"))
        if m.group("den") is not None:
            den = _to_fraction(m.group("den"))
            if den == 0:
                continue
            value = value / den
        if m.group("sign"):
            value = -value
        found.append((m.group(0).strip(), value))
    return found


def parse_number(text: str) -> Fraction | None:
    """The value of a text that should hold one number (`"1,000"`, `"$18.00"`, `"-3"`, `"25%"`)."""
    tokens = _number_tokens(text)
    return tokens[0][1] if tokens else None


def extract_number(text: str) -> tuple[Fraction | None, str, str]:
    """(value, the text it came from, method) — method is `####`, `boxed`, `answer_line`, `answer_phrase` or
    `last_number` (see the module docstring). Code blocks are left out: a number (or a `# Answer: 60`
    comment) in a program's text is not its answer; what it prints is."""
    text = without_code(text)
    if "####" in text:
        tail = text.rsplit("####", 1)[1].strip().splitlines()
        tokens = _number_tokens(tail[0]) if tail else []
        if tokens:
            return tokens[0][1], tokens[0][0], "####"
    for span, method in answer_spans(text):
        if method in ("boxed", "answer_line", "answer_phrase"):
            tokens = _number_tokens(span)
            if tokens:
                return tokens[0][1], span if method == "boxed" else tokens[0][0], method
    phrases = list(_ANSWER_PHRASE.finditer(text))
    if phrases:
        after = text[phrases[-1].end() :][:200]
        tokens = _number_tokens(after)
        if tokens:
            return tokens[0][1], tokens[0][0], "answer_phrase"
    tokens = _number_tokens(text)
    if tokens:
        return tokens[-1][1], tokens[-1][0], "last_number"
    return None, "", "none"


def _show(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value} (= {float(value):g})"


@verifier("numeric")
def numeric(answer: str | None, task: Task, *, abs_tol: float = 0.0) -> Verdict:
    """The final number of `answer` equals the number in `task.ground_truth`.

    Args:
        answer: free text from the agent system (the whole final message is fine).
        task: its `ground_truth` holds the reference number (`"18"`, `"2,125"`, or a full GSM8K
            solution ending in `#### 18`).
        abs_tol: accept |answer - truth| <= abs_tol (default 0: exact rational equality).

    Edge cases (see the module docstring): `1,000` == `1000`; `$18.00` == `18`; `25%` == `25`;
    `The answer is 18 apples.` == `18`; an answer with no number at all fails with `reason: no number`.
    """
    expected_value, expected_text, _ = extract_number(task.ground_truth or "")
    if expected_value is None:
        return Verdict(success=False, score=0.0, details={"error": f"ground truth {task.ground_truth!r} holds no number"})
    value, source, method = extract_number(answer or "")
    details: dict[str, Any] = {"expected": task.ground_truth, "expected_value": _show(expected_value), "method": method}
    if value is None:
        return Verdict(success=False, score=0.0, details=details | {"reason": "no number in the answer"})
    ok = value == expected_value if abs_tol == 0 else abs(float(value - expected_value)) <= abs_tol
    details |= {"extracted": source, "extracted_value": _show(value)}
    if abs_tol:
        details["abs_tol"] = abs_tol
    return Verdict(success=ok, score=1.0 if ok else 0.0, details=details)
