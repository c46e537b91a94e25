"""Assertions that are false on their face: `assert 3 + 1/3 == 7/3` states an arithmetic identity that does not hold.

A tester that asserts such a line asserts something false whatever the code under test does, and a "fix" that
replaces one false identity with another is no correction. On the seed-43 slice (2026-12-03) MetaGPT on MATH-500
algebra/251 was labelled tester@2 by a fix that turned the tester's `assert 7 / (1 + 1/3) == 7 / 4` into
`assert 3 + 1/3 == 7/3`: both false, the replay wandered to the right answer by chance.

Only assertions made of number literals, `+ - * / // % **` and one comparison are judged, by exact rational
arithmetic (a decimal literal is the number it spells: `0.1 + 0.2 == 0.3` holds), with a relative tolerance of
1e-9 when a decimal literal is in it (`7/3 == 2.3333333333333335` holds). Nothing is run: the expression is read
from its syntax tree. Anything else (a name, a call, a string) is not judged.
"""

from __future__ import annotations

import ast
import operator
from fractions import Fraction
from typing import Callable

from ._program_output import python_program

_BINARY: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: lambda a, b: Fraction(a // b), ast.Mod: operator.mod,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Fraction, Fraction], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_MAX_EXPONENT = 64
_MAX_DIGITS = 200


class _NotJudged(Exception):
    """The expression is not one this module judges (a name, a call, a huge power, a division by zero)."""


def _value(node: ast.expr, decimals: list[bool]) -> Fraction:
    if isinstance(node, ast.Constant) and isinstance(node.value, float):
        decimals.append(True)
        return Fraction(repr(node.value))
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _value(node.operand, decimals)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, decimals), _value(node.right, decimals)
        if isinstance(node.op, ast.Pow):
            if right.denominator != 1 or abs(right) > _MAX_EXPONENT or (left == 0 and right < 0):
                raise _NotJudged
            result = left ** int(right)
        elif type(node.op) in _BINARY:
            if right == 0 and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
                raise _NotJudged
            result = _BINARY[type(node.op)](left, right)
        else:
            raise _NotJudged
        if len(str(result.numerator)) + len(str(result.denominator)) > _MAX_DIGITS:
            raise _NotJudged
        return result
    raise _NotJudged


def _holds(test: ast.expr) -> bool | None:
    """Whether a literal comparison holds; None when `test` is not one (`_NotJudged`)."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or type(test.ops[0]) not in _COMPARE:
        return None
    decimals: list[bool] = []
    try:
        left, right = _value(test.left, decimals), _value(test.comparators[0], decimals)
    except _NotJudged:
        return None
    op = type(test.ops[0])
    if decimals and op in (ast.Eq, ast.NotEq):
        close = abs(left - right) <= Fraction(1, 10**9) * max(abs(left), abs(right), Fraction(1))
        return close if op is ast.Eq else not close
    return _COMPARE[op](left, right)


def false_assertion(text: str) -> str | None:
    """The first `assert` of `text`'s Python program (`python_program`: its fenced or `<code>` blocks) that is a
    literal arithmetic comparison that does not hold, as written (`assert 3 + 1/3 == 7/3`); else None."""
    program = python_program(text)
    if program is None:
        return None
    tree = ast.parse(program)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and _holds(node.test) is False:
            return f"assert {ast.get_source_segment(program, node.test) or ast.unparse(node.test)}"
    return None
