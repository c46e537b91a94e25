"""Programmatic perturbations: specific corruptions of one agent step that need no LLM.

Each is a pure function of the step (and a `random.Random` for the choice among several places) that
returns a `Perturbation` or None when it does not apply. They make fault injection work with a weak
perturber model, or none. In code they change the work (function bodies; in a script, every line but
its `assert` and `print` lines), never the team's own checks: flipping `print(f(x) == y)` to `!=` leaves
the solution right and teaches nothing. The perturbations:

* `drop_code_line`: remove one statement from a fenced code block;
* `change_constant`: change one numeric literal (inside code blocks when there are any);
* `flip_operator`: flip one comparison (`<` -> `>=`, `==` -> `!=`, ...) or arithmetic operator
  (`+` -> `-`, `*` -> `/`, ...), inside code blocks when there are any;
* `alter_tool_argument`: swap two arguments of a tool call, or change one;
* `drop_tool_call`, `repeat_tool_call`: a call not made, or made twice;
* `truncate_message`: cut the message at about 40-60 % of its length, on a word boundary.

`programmatic_perturbations(trajectory, seed)` lists the candidates for a run in an order fixed by the
seed: the same seed always yields the same list.
"""

from __future__ import annotations

import ast
import json
import random
import re
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict
from rootstep.benchmarks import code_blocks
from rootstep.model import Registry, Step, Trajectory

_NUMBER = re.compile(r"(?<![\w.])(-?\d+(?:\.\d+)?)(?![\w.])")
# comparison first (two-character operators before their one-character prefixes)
_COMPARISON = re.compile(r"(?<![<>=!])(<=|>=|==|!=|<|>)(?![<>=])")
_COMPARISON_FLIP = {"<": ">=", ">": "<=", "<=": ">", ">=": "<", "==": "!=", "!=": "=="}
# binary arithmetic with spaces around it (`a + b`), never `**`, `//`, `+=`, `->`, unary minus
_ARITHMETIC = re.compile(r"(?<=\s)([+\-*/])(?=\s)")
_ARITHMETIC_FLIP = {"+": "-", "-": "+", "*": "/", "/": "*"}


class Perturbation(BaseModel):
    """A corrupted version of one step: new content (and tool calls), and what exactly was changed."""

    model_config = ConfigDict(extra="forbid")

    name: str
    step: int
    agent: str
    content: str
    tool_calls: list[dict[str, Any]] | None = None
    """The corrupted tool calls; None leaves the recorded ones."""
    description: str


def _code_spans(text: str) -> list[tuple[int, int]]:
    """Where the code of each code block of `text` sits (markdown fences and smolagents' `<code>` blocks)."""
    return [block.code_at for block in code_blocks(text)]


def _codes(text: str) -> list[str]:
    return [text[a:b] for a, b in _code_spans(text)]


_CHECK_LINE = re.compile(r"^\s*(?:assert\b|print\s*\(|if\s+__name__\s*==)")


def _work_lines(code: str) -> set[int]:
    """The 1-based lines of a code block that hold the work, not the team's own checks.

    With function or class definitions, the work is their bodies (the calls, prints and asserts around
    them check it). Without, every line but `assert` / `print(...)` / `if __name__ ==` lines (and what
    such a block holds)."""
    lines = code.splitlines()
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        tree = None
    if tree is not None:
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        if defs:
            return {i for n in defs for i in range(n.lineno, (n.end_lineno or n.lineno) + 1)}
        checks = {i for n in tree.body
                  if isinstance(n, ast.Assert) or (isinstance(n, ast.If) and "__name__" in ast.unparse(n.test))
                  or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and ast.unparse(n.value.func) == "print")
                  for i in range(n.lineno, (n.end_lineno or n.lineno) + 1)}
        return {i for i in range(1, len(lines) + 1) if i not in checks}
    return {i for i, line in enumerate(lines, 1) if not _CHECK_LINE.match(line)}


def _work_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the work lines inside the fenced code blocks of `text` (`_work_lines`)."""
    spans: list[tuple[int, int]] = []
    for start, end in _code_spans(text):
        work = _work_lines(text[start:end])
        position = start
        for number, line in enumerate(text[start:end].splitlines(keepends=True), 1):
            if number in work:
                spans.append((position, position + len(line)))
            position += len(line)
    return spans


def _in_spans(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= position < b for a, b in spans)


def _line_at(text: str, position: int) -> str:
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    return text[start : end if end >= 0 else len(text)].strip()


def _matches(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """Matches on the work lines of fenced code (`_work_spans`) when the text has code blocks, else anywhere."""
    if not _code_spans(text):
        return list(pattern.finditer(text))
    spans = _work_spans(text)
    return [m for m in pattern.finditer(text) if _in_spans(m.start(), spans)]


def _compiles(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def drop_code_line(step: Step, rng: random.Random) -> Perturbation | None:
    """Remove one statement line (not blank, not a comment, not a lone bracket, not a `def` or `class`
    line, not a block's header such as `for x in xs:`) from the work of a code block (`_work_spans`: never
    the team's own checks), so that the code still compiles when it did: a silent missing step, not a
    syntax error (dropping `for number in numbers:` left an IndentationError that any run shows)."""
    text = step.content
    compiled = [_compiles(block) for block in _codes(text)]
    candidates: list[tuple[int, int]] = []
    for a, b in _work_spans(text):
        stripped = text[a:b].strip()
        if (not stripped or stripped.startswith(("#", "//", "def ", "async def ", "class ", "@"))
                or stripped in ("}", ")", "]", "{", "end") or stripped.split("#")[0].rstrip().endswith(":")):
            continue
        after = [_compiles(block) for block in _codes(text[:a] + text[b:])]
        if any(was and not now for was, now in zip(compiled, after)):
            continue
        candidates.append((a, b))
    if len(candidates) < 2:  # dropping the only line empties the block: not a plausible mistake
        return None
    a, b = rng.choice(candidates)
    dropped = text[a:b].strip()
    return Perturbation(name="drop_code_line", step=step.index, agent=step.agent, content=text[:a] + text[b:],
                        description=f"dropped the line `{dropped}` from the code")


def _changed_number(literal: str, rng: random.Random) -> str:
    if "." in literal:
        value = float(literal)
        decimals = len(literal.split(".")[1])
        new = value * rng.choice([0.5, 2.0, 1.1]) if value else 1.0
        out = f"{new:.{decimals}f}"
        return out if out != literal else f"{value + 1:.{decimals}f}"
    value = int(literal)
    delta = rng.choice([1, -1, 2]) if abs(value) > 2 else rng.choice([1, 2])
    return str(value + delta)


def change_constant(step: Step, rng: random.Random) -> Perturbation | None:
    """Change one numeric literal: integers by +-1 or +2, decimals scaled (digits after the point kept)."""
    found = _matches(_NUMBER, step.content)
    if not found:
        return None
    m = rng.choice(found)
    old = m.group(1)
    new = _changed_number(old, rng)
    content = step.content[: m.start(1)] + new + step.content[m.end(1) :]
    return Perturbation(name="change_constant", step=step.index, agent=step.agent, content=content,
                        description=f"changed the constant {old} to {new} in `{_line_at(step.content, m.start(1))}`")


def _binary(text: str, start: int, end: int, numeric: bool) -> bool:
    """An operator between two operands on one line: not a bullet (`- item`), a quote (`> text`), an
    arrow (`->`, `=>`) or a tag. With `numeric` (prose, where ` - ` is mostly a dash), one operand
    next to it must be a number."""
    before = text[:start].rstrip(" ")
    after = text[end:].lstrip(" ")
    if not before or not after or before.endswith("\n") or after.startswith("\n"):
        return False
    if text[start] == ">" and start > 0 and text[start - 1] in "-=":
        return False
    if numeric and not (before[-1].isdigit() or after[0].isdigit()):
        return False
    return bool(re.match(r"[\w)\]'\"]", before[-1]) and re.match(r"[\w(\['\"\-.]", after[0]))


def flip_operator(step: Step, rng: random.Random) -> Perturbation | None:
    """Flip one comparison (to its negation) or spaced binary arithmetic operator (to its opposite).

    Only operators between two operands count (markdown bullets, quotes and arrows are left alone).
    Inside code blocks any operands do; in prose (a message without code blocks) one operand must be a
    number, so `x < 10` and `6 * 7` flip but the dash of `Title - Search` does not.
    """
    numeric = not _code_spans(step.content)
    found = [(m, _COMPARISON_FLIP) for m in _matches(_COMPARISON, step.content)]
    found += [(m, _ARITHMETIC_FLIP) for m in _matches(_ARITHMETIC, step.content)]
    found = [(m, table) for m, table in found if _binary(step.content, m.start(1), m.end(1), numeric)]
    if not found:
        return None
    m, table = rng.choice(sorted(found, key=lambda item: item[0].start()))
    old = m.group(1)
    new = table[old]
    content = step.content[: m.start(1)] + new + step.content[m.end(1) :]
    return Perturbation(name="flip_operator", step=step.index, agent=step.agent, content=content,
                        description=f"flipped the operator `{old}` to `{new}` in `{_line_at(step.content, m.start(1))}`")


def _arguments(call: dict[str, Any]) -> tuple[dict[str, Any], bool] | None:
    """A tool call's arguments as a dict, and whether they were a JSON string (OpenAI form)."""
    function = call.get("function", call)
    raw = function.get("arguments")
    if isinstance(raw, dict):
        return dict(raw), False
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return None
        return (value, True) if isinstance(value, dict) else None
    return None


def _with_arguments(call: dict[str, Any], arguments: dict[str, Any], as_string: bool) -> dict[str, Any]:
    encoded: Any = json.dumps(arguments) if as_string else arguments
    if "function" in call:
        return {**call, "function": {**call["function"], "arguments": encoded}}
    return {**call, "arguments": encoded}


def _altered(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return int(_changed_number(str(value), rng))
    if isinstance(value, float):
        return value * rng.choice([0.5, 2.0]) if value else 1.0
    if isinstance(value, str):
        numbers = list(_NUMBER.finditer(value))
        if numbers:
            m = rng.choice(numbers)
            return value[: m.start(1)] + _changed_number(m.group(1), rng) + value[m.end(1) :]
        words = value.split()
        if len(words) > 1:
            return " ".join(words[: max(1, len(words) // 2)])
        return value[:-1] if len(value) > 1 else value + value
    return None


def alter_tool_argument(step: Step, rng: random.Random) -> Perturbation | None:
    """Swap the values of two same-typed arguments of one tool call, or change one argument's value
    (numbers shifted, booleans negated, strings shortened or their numbers changed)."""
    usable = [(i, call, parsed) for i, call in enumerate(step.tool_calls) if (parsed := _arguments(call)) and parsed[0]]
    if not usable:
        return None
    i, call, (arguments, as_string) = rng.choice(usable)
    name = _call_name(call)
    keys = sorted(arguments)
    pairs = [(a, b) for x, a in enumerate(keys) for b in keys[x + 1 :]
             if type(arguments[a]) is type(arguments[b]) and arguments[a] != arguments[b]]
    if pairs and rng.random() < 0.5:
        a, b = rng.choice(pairs)
        new_args = {**arguments, a: arguments[b], b: arguments[a]}
        description = f"swapped the arguments {a!r} and {b!r} of the call to {name}"
    else:
        changeable = [k for k in keys if _altered(arguments[k], random.Random(0)) not in (None, arguments[k])]
        if not changeable:
            return None
        key = rng.choice(changeable)
        new_value = _altered(arguments[key], rng)
        if new_value == arguments[key]:
            return None
        new_args = {**arguments, key: new_value}
        description = f"changed the argument {key!r} of the call to {name} from {arguments[key]!r} to {new_value!r}"
    calls = list(step.tool_calls)
    calls[i] = _with_arguments(call, new_args, as_string)
    return Perturbation(name="alter_tool_argument", step=step.index, agent=step.agent, content=step.content,
                        tool_calls=calls, description=description)


def _call_name(call: dict[str, Any]) -> str:
    return str(call.get("function", call).get("name", "tool"))


def drop_tool_call(step: Step, rng: random.Random) -> Perturbation | None:
    """Drop one of the step's tool calls: a call the task needed is not made. A step left with no call and no
    text says "Done." (the message of a call-only step that made none; the 1.5B's own mistake on BFCL was such a
    step, "Got it! Removed NVDA from the watchlist." with no call)."""
    if not step.tool_calls:
        return None
    i = rng.randrange(len(step.tool_calls))
    calls = step.tool_calls[:i] + step.tool_calls[i + 1:]
    content = step.content if step.content.strip() or calls else "Done."
    return Perturbation(name="drop_tool_call", step=step.index, agent=step.agent, content=content, tool_calls=calls,
                        description=f"dropped the call to {_call_name(step.tool_calls[i])} (call {i + 1} of "
                                    f"{len(step.tool_calls)})")


def repeat_tool_call(step: Step, rng: random.Random) -> Perturbation | None:
    """Make one of the step's tool calls twice in a row (a state-changing call repeated: a second order, a second
    transfer, a file moved twice); the copy's id gets a `-again` suffix so that each call keeps its own result."""
    if not step.tool_calls:
        return None
    i = rng.randrange(len(step.tool_calls))
    call = step.tool_calls[i]
    copy = {**call, "id": f"{call['id']}-again"} if call.get("id") else dict(call)
    calls = step.tool_calls[:i + 1] + [copy] + step.tool_calls[i + 1:]
    return Perturbation(name="repeat_tool_call", step=step.index, agent=step.agent, content=step.content,
                        tool_calls=calls, description=f"made the call to {_call_name(call)} twice")


def truncate_message(step: Step, rng: random.Random) -> Perturbation | None:
    """Cut the message at 40-60 % of its length, at a word boundary (at least 8 words are needed). In a
    message with code the cut falls inside the work (`_work_spans`), the word closest to that share:
    cutting off only the trailing checks would leave the work whole."""
    words = list(re.finditer(r"\S+", step.content))
    if len(words) < 8:
        return None
    keep = max(1, round(len(words) * rng.uniform(0.4, 0.6)))
    if _code_spans(step.content):
        spans = _work_spans(step.content)
        inside = [k for k, w in enumerate(words, 1)  # some of the work must be cut off: the next word is work too
                  if k < len(words) and _in_spans(w.end() - 1, spans) and _in_spans(words[k].start(), spans)]
        if not inside:
            return None
        keep = min(inside, key=lambda k: abs(k - keep))
    cut = words[keep - 1].end()
    return Perturbation(name="truncate_message", step=step.index, agent=step.agent, content=step.content[:cut],
                        description=f"truncated the message after {keep} of {len(words)} words")


PerturbationFn = Callable[[Step, random.Random], "Perturbation | None"]

PERTURBATIONS: Registry[PerturbationFn] = Registry("perturbation", group="rootstep.perturbations")
"""Every programmatic perturbation by name: the built-ins below, pip-installed plugins (entry point
`rootstep.perturbations`: a function `fn(step, rng) -> Perturbation | None`) and ones registered in code
(`PERTURBATIONS.register(name, fn)`). The default set of `programmatic_perturbations` is all of them."""
for _fn in (drop_code_line, change_constant, flip_operator, alter_tool_argument, drop_tool_call, repeat_tool_call,
            truncate_message):
    PERTURBATIONS.register(_fn.__name__, _fn)


def programmatic_perturbations(
    trajectory: Trajectory,
    seed: int = 0,
    *,
    names: list[str] | None = None,
    steps: list[int] | None = None,
) -> list[Perturbation]:
    """Every applicable perturbation of the run's agent steps, in an order fixed by `seed`.

    Steps are visited in a seeded shuffle and each step's perturbations in a seeded order, so candidate
    k is spread across the run rather than piled on step 0. `names` restricts the kinds; `steps` the
    steps. Only agent steps are perturbed (the others are not LLM-produced).
    """
    rng = random.Random(seed)
    known = PERTURBATIONS.names()
    chosen = names or known
    unknown = set(chosen) - set(known)
    if unknown:
        raise ValueError(f"unknown perturbations {sorted(unknown)}; known: {sorted(known)}")
    agent_steps = [s for s in trajectory.steps if s.kind == "agent" and (steps is None or s.index in steps)]
    rng.shuffle(agent_steps)
    per_step: list[list[Perturbation]] = []
    for step in agent_steps:
        order = list(chosen)
        rng.shuffle(order)
        found = []
        for name in order:
            p = PERTURBATIONS[name](step, random.Random(f"{seed}:{step.index}:{name}"))
            if p is not None and (p.content != step.content or p.tool_calls is not None):
                found.append(p)
        per_step.append(found)
    out: list[Perturbation] = []
    for k in range(max((len(f) for f in per_step), default=0)):  # round-robin over steps
        out.extend(f[k] for f in per_step if k < len(f))
    return out
