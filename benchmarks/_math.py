"""MATH-style answers: the last `\\boxed{...}`, LaTeX normalisation, then sympy equivalence.

Decision order (the first that decides wins):
1. extract (`rootstep.benchmarks._answer`, shared with `numeric` and `qa`): the last `\\boxed{}` or
   `Answer:` line (whichever is written last), else the text after the last `the final answer is` /
   `final answer:`, else the whole answer when it is one short line, else a last line that is a bare value.
2. normalise both sides (`normalize_latex`): `\\left`/`\\right`, `\\dfrac`/`\\tfrac` -> `\\frac`, `\\frac12`
   -> `\\frac{1}{2}`, `\\text{..}`/`\\mathrm{..}` unwrapped, degrees, `\\%`, `$`, spaces, thousands commas,
   `x = ` prefixes of one-letter variables, a unit after a number
   (`10\\text{ m}` -> `10`, `10 cm` -> `10`; a bare single letter as in `2x` is kept: it may be a variable), and
   a whole number before a fraction read as the mixed number it is in MATH (`137 \\frac{1}{2}` and `2\\frac34`
   -> `(137+\\frac{1}{2})`, so `137.5` and `\\frac{275}{2}` equal it; not the product `137/2`).
   Equal normalised strings succeed.
3. comma-separated answers compare element by element (plain lists as multisets, bracketed tuples in order).
4. sympy: both sides are converted to sympy (a whitelist of names; no `eval` of arbitrary text) and succeed
   when `simplify(a - b) == 0` or both are numbers within relative 1e-9 (so `\\frac{1}{2}` == `0.5`, and
   `0.33` != `\\frac{1}{3}`), each attempt bounded by `timeout` seconds.
Intervals (`[1, 2)`) and anything sympy cannot read fall back to the normalised string comparison.
"""

from __future__ import annotations

import re
import signal
import threading
from typing import Any, Callable, TypeVar

from rootstep.model import Task, Verdict

from ._answer import braced, final_answer_span, last_boxed
from ._registry import verifier

T = TypeVar("T")


# ------------------------------------------------------------------------------------ extraction


def extract_math_answer(text: str) -> tuple[str | None, str]:
    """(answer, method): the strongest candidate of `answer_spans` (method `boxed`, `answer_line`,
    `answer_phrase`, `whole` or `last_line`), or (None, `none`)."""
    return final_answer_span(text)


# ------------------------------------------------------------------------------------ normalisation


def _replace_command_groups(text: str, command: str, fn: Callable[[list[str]], str], arity: int) -> str:
    """Replace `\\command{a}{b}...` (arity groups) by fn([a, b, ...]), innermost content handled by fn."""
    out, i = [], 0
    pattern = re.compile(r"\\" + command + r"(?![A-Za-z])\s*")
    while True:
        m = pattern.search(text, i)
        if m is None:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i : m.start()])
        at, args = m.end(), []
        for _ in range(arity):
            while at < len(text) and text[at] == " ":
                at += 1
            if at < len(text) and text[at] == "{":
                group = braced(text, at)
                if group is None:
                    break
                args.append(group[0])
                at = group[1]
            elif at < len(text):  # \frac12: one-character arguments
                args.append(text[at])
                at += 1
        if len(args) != arity:
            out.append(text[m.start() : at])
        else:
            out.append(fn(args))
        i = at


def _unwrap_text(text: str) -> str:
    for command in ("text", "textbf", "textit", "mathrm", "mathbf", "mbox", "operatorname"):
        text = _replace_command_groups(text, command, lambda a: a[0], 1)
    return text


_TEXT_UNIT = re.compile(r"(\d)\s*\\(?:text|mbox|mathrm)\{\s*[A-Za-z][A-Za-z ]*\}(?:\^\{?\d\}?)?\s*$")
"""A unit written as text after a number, at the end (`3\\text{ m}`, `5\\text{ cm}^2`): dropped."""
_UNIT_AFTER_NUMBER = re.compile(r"^(-?[\d.,/]+)\s*[A-Za-z]{2,}(?:\^\{?\d\}?)?(?:\s+[A-Za-z]{2,}(?:\^\{?\d\}?)?)*$")
"""A number followed by unit words of two letters or more (`10 cm`, `5 square units`, `15 cm^2`); a single letter
(`2x`, `3 m`) is never dropped, since it may be a variable."""
_SENTENCE = re.compile(r"^[A-Za-z][A-Za-z' ]*?\s(?:is|equals|are)\s+(?P<value>[^A-Za-z\s].*)$")
"""An answer written as a sentence whose words come before the value: `The area of the shaded triangle is 15 square
centimeters` (AG2's coder on MATH-500 prealgebra/1114, slice of 2026-11-28: the right 15 was read as the whole
sentence and the run stored as a failure); the value is what follows the verb."""


def _brace_arguments(s: str) -> str:
    """`\\frac12` -> `\\frac{1}{2}`, `\\sqrt2` -> `\\sqrt{2}`, at every depth."""
    s = _replace_command_groups(s, "frac", lambda a: "\\frac{%s}{%s}" % tuple(_brace_arguments(x) for x in a), 2)
    if "\\sqrt[" not in s:
        s = _replace_command_groups(s, "sqrt", lambda a: "\\sqrt{%s}" % _brace_arguments(a[0]), 1)
    return s


_MIXED = re.compile(r"(-?)(\d+)\s*\\frac\{(\d+)\}\{(\d+)\}")
"""A mixed number as MATH writes one: a whole number, then a fraction of whole numbers."""


def normalize_latex(text: str) -> str:
    """A canonical string for a MATH answer (see the module docstring for every rule)."""
    s = text.strip()
    s = s.replace("\n", " ").replace("\\!", "").replace("\\,", " ").replace("\\;", " ").replace("\\:", " ")
    s = re.sub(r"\\q?quad", " ", s)
    s = re.sub(r"\\(?:left|right|big|Big|bigg|Bigg)(?![A-Za-z])\s*", "", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("\\displaystyle", "")
    s = re.sub(r"\^\s*\{?\\circ\}?", "", s).replace("°", "").replace("\\degree", "")
    s = s.replace("\\%", "").replace("%", "").replace("\\$", "").replace("$", "")
    s = _TEXT_UNIT.sub(r"\1", s)
    s = _unwrap_text(s)
    s = s.replace("\\le ", "\\leq ").replace("\\ge ", "\\geq ")
    s = s.strip().rstrip(".").strip()
    if sentence := _SENTENCE.match(s):
        s = sentence.group("value").strip()
    m = _UNIT_AFTER_NUMBER.match(s)
    if m:
        s = m.group(1)
    if re.match(r"^[A-Za-z]\s*=", s) and s.count("=") == 1:
        s = s.split("=", 1)[1]
    s = _brace_arguments(s)
    mixed = _MIXED.fullmatch(s.strip())
    if mixed:  # MATH-500 algebra/2470 asks for `137 \frac{1}{2}`: AG2's and smolagents' 137.5 were judged wrong
        sign, whole, numerator, denominator = mixed.groups()
        s = f"{sign}({whole}+\\frac{{{numerator}}}{{{denominator}}})"
    s = re.sub(r"\s+", "", s)
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    s = re.sub(r"(?<![\d)}])\.(\d)", r"0.\1", s)
    if re.fullmatch(r"-?\d+\.\d*?0+", s):  # 2.50 -> 2.5, 3.0 -> 3
        s = s.rstrip("0").rstrip(".")
    return s


# ------------------------------------------------------------------------------------ sympy

_ALLOWED_NAMES = {
    "sqrt", "pi", "oo", "log", "ln", "exp", "sin", "cos", "tan", "cot", "sec", "csc",
    "asin", "acos", "atan", "sinh", "cosh", "tanh", "E", "I", "Abs", "root",
}


def _latex_to_python(s: str) -> str:
    s = _replace_command_groups(s, "frac", lambda a: "((%s)/(%s))" % tuple(_latex_to_python(x) for x in a), 2)
    s = re.sub(r"\\sqrt\[([^\]]+)\]\{([^{}]*)\}", r"root(\2,\1)", s)
    s = _replace_command_groups(s, "sqrt", lambda a: "sqrt(%s)" % _latex_to_python(a[0]), 1)
    replacements = {
        "\\cdot": "*", "\\times": "*", "\\div": "/", "\\pi": "pi", "\\infty": "oo", "\\ln": "log",
        "\\log": "log", "\\exp": "exp", "\\sin": "sin", "\\cos": "cos", "\\tan": "tan", "\\cot": "cot",
        "\\sec": "sec", "\\csc": "csc", "\\arcsin": "asin", "\\arccos": "acos", "\\arctan": "atan", "\\e": "E",
    }
    for old, new in sorted(replacements.items(), key=lambda kv: -len(kv[0])):
        s = s.replace(old, new)
    s = s.replace("{", "(").replace("}", ")").replace("^", "**")
    return s


def to_sympy(normalized: str) -> Any:
    """A sympy expression for a normalised answer; ValueError when it is not a plain expression."""
    from sympy.parsing.sympy_parser import (
        convert_xor,
        implicit_multiplication_application,
        parse_expr,
        standard_transformations,
    )

    code = _latex_to_python(normalized)
    if "\\" in code or "__" in code or not re.fullmatch(r"[\w\s+\-*/().,]*", code):
        raise ValueError(f"not a plain expression: {normalized!r}")
    for name in re.findall(r"[A-Za-z_]\w*", code):
        if len(name) > 1 and name not in _ALLOWED_NAMES:
            raise ValueError(f"name {name!r} is not allowed in a math answer")
    transformations = standard_transformations + (implicit_multiplication_application, convert_xor)
    return parse_expr(code, transformations=transformations, evaluate=True)


def call_with_timeout(fn: Callable[[], T], seconds: float) -> T:
    """fn() bounded by `seconds`: SIGALRM in the main thread; elsewhere a daemon thread that is
    abandoned (not killed) on timeout. Raises TimeoutError."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):

        def alarm(signum: int, frame: Any) -> None:
            raise TimeoutError(f"took longer than {seconds}s")

        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return fn()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TimeoutError(f"took longer than {seconds}s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def sympy_equal(a: str, b: str, *, timeout: float = 5.0, rel_tol: float = 1e-9) -> tuple[bool, str]:
    """(equal, how) for two normalised answers; `how` says what decided it. The timeout bounds the
    comparison, not sympy's import: the first import takes seconds on a loaded machine, and a right answer
    must not be judged wrong because the verifier was the first to need sympy."""
    import sympy
    import sympy.parsing.sympy_parser  # noqa: F401 - loaded here, outside the comparison's time limit

    def compare() -> tuple[bool, str]:
        ea, eb = to_sympy(a), to_sympy(b)
        if ea.is_number and eb.is_number:
            va, vb = complex(sympy.N(ea, 30)), complex(sympy.N(eb, 30))
            close = abs(va - vb) <= rel_tol * max(1.0, abs(vb))
            return close, f"numeric {va} vs {vb}"
        diff = sympy.simplify(ea - eb)
        return diff == 0, f"simplify(a - b) = {diff}"

    try:
        return call_with_timeout(compare, timeout)
    except TimeoutError:
        return False, f"sympy timed out after {timeout}s"
    except Exception as exc:  # noqa: BLE001 - any parse failure means "not shown equal"
        return False, f"sympy could not compare: {type(exc).__name__}: {str(exc)[:120]}"


def _split_top_level(s: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


_BRACKETED = re.compile(r"[(\[].*[)\]]")
"""A tuple, list or interval: `(1, 2)`, `[0, 3)`."""


def math_equal(answer: str, truth: str, *, timeout: float = 5.0) -> tuple[bool, dict[str, Any]]:
    """Are two MATH answers the same (after normalisation, element-wise, or by sympy)?"""
    na, nt = normalize_latex(answer), normalize_latex(truth)
    details: dict[str, Any] = {"normalized_answer": na, "normalized_truth": nt}
    if na == nt:
        return True, details | {"decided_by": "normalized string"}
    if re.fullmatch(r"\[[^\[\]]+\]", na) and not _BRACKETED.fullmatch(nt):
        na = na[1:-1]  # a list of solutions, as sympy's `solve` prints it (`[10]`), where the answer is no interval
        details["unwrapped_list"] = True
        if na == nt:
            return True, details | {"decided_by": "normalized string"}
    bracketed = bool(_BRACKETED.fullmatch(nt)) and bool(_BRACKETED.fullmatch(na))
    if bracketed and na[0] == nt[0] and na[-1] == nt[-1] and "," in nt:
        pa, pt = _split_top_level(na[1:-1]), _split_top_level(nt[1:-1])
        ordered = True
    else:
        pa, pt = _split_top_level(na), _split_top_level(nt)
        ordered = False
    if len(pt) > 1 or len(pa) > 1:
        if len(pa) != len(pt):
            return False, details | {"decided_by": f"{len(pa)} elements vs {len(pt)}"}
        if ordered:
            ok = all(x == y or sympy_equal(x, y, timeout=timeout)[0] for x, y in zip(pa, pt))
        else:
            remaining = list(pt)
            ok = True
            for x in pa:
                match = next((y for y in remaining if x == y or sympy_equal(x, y, timeout=timeout)[0]), None)
                if match is None:
                    ok = False
                    break
                remaining.remove(match)
        return ok, details | {"decided_by": "element-wise " + ("in order" if ordered else "as a multiset")}
    ok, how = sympy_equal(na, nt, timeout=timeout)
    return ok, details | {"decided_by": how}


@verifier("math")
def math(answer: str | None, task: Task, *, timeout: float = 5.0) -> Verdict:
    """The agent's final MATH answer is equivalent to `task.ground_truth`.

    Args:
        answer: free text; its last `\\boxed{}` is the answer (see `extract_math_answer`).
        task: `ground_truth` is the reference answer (a bare LaTeX answer, or a solution with a box).
        timeout: seconds allowed to each sympy comparison (a timeout counts as "not equal").

    Edge cases: `\\frac{1}{2}` == `0.5` == `\\dfrac12`; `\\left( 1, 2 \\right)` == `(1,2)`; `10\\text{ cm}` ==
    `10`; `15 cm^2` == `15`; `90^\\circ` == `90`; `1,000` == `1000`; an answer line written as a sentence is read
    for the value after its verb (`The area is 15 square centimeters` == `15`); a free-text answer without a box
    counts only through an answer phrase or when it is a single short line.
    """
    truth = task.ground_truth or ""
    boxed_truth = last_boxed(truth)
    truth = boxed_truth if boxed_truth is not None else truth
    extracted, method = extract_math_answer(answer or "")
    if extracted is None:
        return Verdict(success=False, score=0.0, details={"expected": truth, "method": method, "reason": "no answer found"})
    ok, details = math_equal(extracted, truth, timeout=timeout)
    details = {"expected": truth, "extracted": extracted, "method": method} | details
    return Verdict(success=ok, score=1.0 if ok else 0.0, details=details)
