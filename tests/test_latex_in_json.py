"""An analyzer's JSON with LaTeX in it (`json_object`, `latex_escaped`): models write `\\boxed`, `\\frac`, `\\(` inside
JSON strings with one backslash, which JSON reads as a backspace, a form feed, or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rootstep.annotation._propose import json_object

REAL = json.loads((Path(__file__).parent / "fixtures" / "analyzer_replies" / "latex_in_json.json").read_text())


def test_the_1_5bs_boxed_answer_in_a_fix_is_read_as_latex_not_a_backspace():
    [reply] = {r for r in REAL["replies"] if "boxed{28}" in r}
    assert json.JSONDecoder().raw_decode(reply[reply.index("{"):])[0]["suggested_fix"].endswith("\x08oxed{28}\n")
    found, problem = json_object(reply)
    assert problem is None and found is not None
    assert found["suggested_fix"] == "The code output is correct. The number of miles Ahito ran is \\boxed{28}\n"
    assert found["mistake_agent"] == "coder"


@pytest.mark.parametrize(("raw", "expected"), [
    # LaTeX commands that start with a JSON escape letter, and escapes JSON does not have at all
    (r'{"suggested_fix": "\frac{3}{4} x = 60 \times 1, so \(x = 80\)"}', r"\frac{3}{4} x = 60 \times 1, so \(x = 80\)"),
    (r'{"suggested_fix": "x \neq y, \nu, \theta, \text{pads}, \sqrt{2}, \underline{a}"}',
     r"x \neq y, \nu, \theta, \text{pads}, \sqrt{2}, \underline{a}"),
    (r'{"suggested_fix": "\left( \binom{5}{2} \right) \to \beta"}', r"\left( \binom{5}{2} \right) \to \beta"),
    # what JSON means stays as it was: escaped backslashes, newlines, tabs, quotes, unicode
    (r'{"suggested_fix": "\\boxed{7}\nThe end\tof \"it\" \/ \u00e9"}', '\\boxed{7}\nThe end\tof "it" / \u00e9'),
    (r'{"suggested_fix": "line one\nnext: \nequal is not \neq\n"}', "line one\nnext: \nequal is not \\neq\n"),
])
def test_latex_in_a_json_string_is_read_as_written(raw: str, expected: str):
    found, problem = json_object(raw)
    assert problem is None and found == {"suggested_fix": expected}


def test_an_answer_with_no_object_is_still_refused():
    assert json_object("I think step 3 is wrong \\(x\\)")[0] is None
