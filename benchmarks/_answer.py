"""Where the final answer sits in free text, as real models write it, and the contract prompts state.

Models asked to "end with `Answer: <x>`" write `Answer: 1`, `**Answer:** 1`, `**Final Answer**: $1$`,
`Answer (exact): S = 2`, `The final answer is $\\boxed{1}$`, or a last line that is only `1`. One
extraction serves every verifier of short answers (`numeric`, `math`, `qa`), so a format the prompts ask
for is a format the verifiers read.

`answer_spans(text)` lists every candidate, strongest first:

1. `boxed`: the last `\\boxed{...}` / `\\fbox{...}`;
2. `answer_line`: the last line that starts with `Answer:` / `Final answer:` (markdown bold, list
   markers, a parenthesised qualifier such as `(exact)` allowed); when both a box and an answer line exist,
   the one written LAST wins (a model that boxes its work and then states `Answer: 2` means 2);
3. `answer_phrase`: the text after the last `the final answer is` / `the answer is` / `final answer:`
   outside code blocks (a phrase needs `is` or `:` after it: `the final answer from your managed agent` is
   not one; `print("Answer: ", x)` in a program is not one); also a text that ends `... is \\( x = 3 \\).`, its value
   in inline math and bare (`_CONCLUSION`), or whose last line ends `... is 3.` with a bare value holding a digit or
   a LaTeX command (`_STATED`: `The number is 3.`);
4. `whole`: the whole text, when it is one short line; `last_line`: the last line of a longer text when it
   is a bare value (no word of three letters or more outside LaTeX commands: `\\frac{1}{2}`, not `Thus 5`).

`AnswerContract` is what an adapter's prompts ask for, per task (`answer_contract(task)`): the verifier's
answer form (a number, a math expression, a short span, a code block), the exact line to end with, and
`format(value)` that writes a value in that form (what the golden-path tests script agents to say).
"""

from __future__ import annotations

import re
from typing import Collection, Literal, Sequence

from pydantic import BaseModel, ConfigDict

from rootstep.model import Step, Task

SpanMethod = Literal["boxed", "answer_line", "answer_phrase", "whole", "last_line"]

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*")
_ANSWER_LINE = re.compile(
    r"^[ \t>*_#\-•]*(?:\*\*|__)?[ \t]*(?:final[ \t]+answer|answer)(?:[ \t]*\([^)\n]{0,30}\))?[ \t]*(?:\*\*|__)?[ \t]*[:：]"
    r"[ \t]*(?:\*\*|__)?[ \t]*(?P<rest>[^\n]*)$",
    re.IGNORECASE | re.MULTILINE,
)
_PHRASE = re.compile(r"(?:the\s+)?(?:final\s+answer|answer)\s*(?:is\s*:?|:)\s*", re.IGNORECASE)
_CONCLUSION = re.compile(r"\bis[ \t]+(?P<value>\\\(.+?\\\)|\$[^$\n]+\$)[ \t]*\.?[ \t]*\Z")
"""A text that ends by stating its value in inline math: `The smallest real number \\( x \\) in the domain of the
function ... is \\( x = 3 \\).` (the 0.5B as AgentPrune's programmer, MATH-500 algebra/1031, seed-43 slice)."""
_STATED = re.compile(r"^.*\bis[ \t]+(?P<value>[^\n]{1,40}?)[ \t]*\.?[ \t]*$")
"""A last line that states a bare value after its last `is`: `The number is 3.` (the 0.5B as the smolagents manager,
MATH-500 algebra/251, seed-43 slice: its final answer, read as prose, was not a statement of the run's wrong 3 and the
analyzer judged the step correct)."""
_WRAPPERS = (("**", "**"), ("__", "__"), ("`", "`"), ("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_QUOTES = ('"', "“", "”", "'", "‘", "’")
"""Quotes that may stand unbalanced at an edge of a span: the other one is outside it."""
_LABEL = re.compile(r"^(?:exact(?:ly)?|approx(?:imately)?|final|result|simplified)\s*[:：]\s*", re.IGNORECASE)


def braced(text: str, open_at: int) -> tuple[str, int] | None:
    """The content of the brace group opening at `open_at` and the index after it (None if unbalanced)."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i], i + 1
    return None


def _boxed_spans(text: str) -> list[tuple[int, str]]:
    """(position, content) of every `\\boxed{...}` / `\\fbox{...}` / `\\boxed 5`, in order."""
    found = []
    for m in _BOXED.finditer(text):
        rest_at = m.end()
        if rest_at < len(text) and text[rest_at] == "{":
            group = braced(text, rest_at)
            if group is not None:
                found.append((m.start(), group[0].strip()))
        else:
            word = re.match(r"[^\s$]+", text[rest_at:])
            if word:
                found.append((m.start(), word.group(0)))
    return found


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` or `\\fbox{...}` (`\\boxed 5` too), or None."""
    spans = _boxed_spans(text)
    return spans[-1][1] if spans else None


def clean_span(span: str) -> str:
    """An answer as written, without its decoration: markdown bold/code, `$...$`, `\\(...\\)`, a trailing
    full stop, a qualifier label (`exact: S = 2` -> `S = 2`), a quote whose partner is outside the span."""
    s = span.strip()
    changed = True
    while changed and s:
        changed = False
        s2 = s.rstrip().rstrip(".").rstrip()
        for left, right in _WRAPPERS:
            if len(s2) > len(left) + len(right) and s2.startswith(left) and s2.endswith(right):
                s2 = s2[len(left) : len(s2) - len(right)].strip()
                break
        s2 = _LABEL.sub("", s2)
        for quote in _QUOTES:  # a quote closed around the answer line it ends: `should be "Answer: 7".`
            if s2.endswith(quote) and s2.count(quote) % 2 == 1:
                s2 = s2[: -len(quote)].rstrip()
            if s2.startswith(quote) and s2.count(quote) % 2 == 1:
                s2 = s2[len(quote):].lstrip()
        if s2 != s:
            s, changed = s2, True
    return s


def _answer_lines(text: str) -> list[tuple[int, str]]:
    out = []
    for m in _ANSWER_LINE.finditer(text):
        rest = clean_span(m.group("rest"))
        if rest:
            out.append((m.start(), rest))
    return out


def _bare_answer_line(line: str) -> bool:
    """A short line that holds a value and no prose: no word of three letters or more outside LaTeX
    commands (`\\frac{1}{2}`, `(3, \\pi)`, `x = 5` are bare; `Thus x = 5` is not)."""
    span = clean_span(line)
    if not span or len(span) > 60 or span.endswith(":") or not re.search(r"[A-Za-z0-9]", span):
        return False  # a code fence's closing line (```) or punctuation holds no value
    return not re.search(r"(?<![\\A-Za-z])[A-Za-z]{3,}", span)


def answer_spans(text: str) -> list[tuple[str, SpanMethod]]:
    """Every candidate final answer of `text`, strongest first (see the module docstring)."""
    out: list[tuple[str, SpanMethod]] = []
    boxes, lines = _boxed_spans(text), _answer_lines(text)
    marked: list[tuple[int, str, SpanMethod]] = [(p, s, "boxed") for p, s in boxes[-1:]]
    for position, rest in lines[-1:]:
        inner = last_boxed(rest)
        marked.append((position, inner if inner is not None else rest, "answer_line"))
    for _, span, method in sorted(marked, key=lambda item: -item[0]):
        out.append((span, method))
    prose = without_code(_values_kept(text))  # `print("Answer: ", x)` in a program is not the phrase (MetaGPT 2735)
    phrases = list(_PHRASE.finditer(prose))
    if phrases:
        tail = prose[phrases[-1].end() :].strip().splitlines()
        span = clean_span(tail[0]) if tail else ""
        if span and span[0] not in ",;)]}":  # `"The answer is", x)`: the rest of a call, not an answer
            out.append((span, "answer_phrase"))
    concluded = _CONCLUSION.search(prose.rstrip())
    if concluded is not None and _bare_answer_line(concluded.group("value")):
        out.append((clean_span(concluded.group("value")), "answer_phrase"))
    elif prose.strip():
        stated = _STATED.match(prose.strip().splitlines()[-1])
        value = clean_span(stated.group("value")) if stated is not None else ""
        if value and _bare_answer_line(value) and re.search(r"[0-9\\]", value):
            out.append((value, "answer_phrase"))
    stripped = text.strip()
    if stripped and "\n" not in stripped and len(stripped) <= 100:
        out.append((clean_span(stripped), "whole"))
    elif stripped:
        last = stripped.splitlines()[-1]
        if _bare_answer_line(last):
            out.append((clean_span(last), "last_line"))
    seen: set[str] = set()
    unique = []
    for span, method in out:
        if span and span not in seen:
            seen.add(span)
            unique.append((span, method))
    return unique


def final_answer_span(text: str) -> tuple[str | None, SpanMethod | Literal["none"]]:
    """(the strongest candidate final answer, how it was found), or (None, "none")."""
    spans = answer_spans(text or "")
    return spans[0] if spans else (None, "none")


# ------------------------------------------------------------------------------------ code as an answer

_CODE_BLOCK = re.compile(r"```[^\n]*\n.*?(?:```|\Z)|<code>.*?(?:</code>|\Z)", re.DOTALL)
_EXIT_LINE = re.compile(r"^\s*exit\s*code\s*:?\s*-?\d+[^\n]*\n?", re.IGNORECASE)
_OUTPUT_LABEL = re.compile(r"^\s*code output\s*:[ \t]*", re.IGNORECASE)


def printed_output(run: str) -> str:
    """What a program printed, from an executor's report of its run: the report's leading `exit code N` line and
    the label before the output dropped. AG2's executor reports `exitcode: 0 (execution succeeded)` then
    `Code output: (15, -29)`: left in, the label made the MATH verifier read `Code output: (15, -29)` as the
    answer and fail a run that printed the right point (slice of 2026-11-27, MATH-500 precalculus/43)."""
    return _OUTPUT_LABEL.sub("", _EXIT_LINE.sub("", run.strip(), count=1).strip(), count=1).strip()


_VALUE_BLOCK = re.compile(r"```[^\n]*\n[ \t]*(?P<fenced>[^\n`]+?)[ \t]*\n[ \t]*```|<code>[ \t\n]*(?P<tagged>[^\n<]+?)[ \t\n]*</code>")


def _values_kept(text: str) -> str:
    """`text` with each code block that holds only a bare value (`_bare_answer_line`: `<code>196</code>`, a fence
    around `\\frac{1}{2}`) written as that value: a value, not a program. The 0.5B's smolagents manager ended
    MATH-500 number_theory/572 (seed-31 slice, 2026-12-02) with `Therefore, the final answer is:` and `<code>196</code>`
    on the next lines; with the block removed the phrase had nothing after it and the verifier found no answer."""
    def value(m: re.Match[str]) -> str:
        inner = m.group("fenced") if m.group("fenced") is not None else m.group("tagged")
        return inner if _bare_answer_line(inner) else m.group(0)

    return _VALUE_BLOCK.sub(value, text)


def without_code(text: str) -> str:
    """`text` with its fenced (```) and `<code>` blocks removed: the prose around the program."""
    return _CODE_BLOCK.sub("\n", text)


def program_answer(task: Task, final_answer: str | None, steps: Sequence[Step],
                   runs_with: Collection[str] = ()) -> str | None:
    """A code-writing team's answer to a math or QA task: what its program printed when the framework ran
    it, never a number lifted from the code's text.

    When `final_answer` holds a code block and states no answer outside it (no box, `Answer:` line or answer
    phrase in its prose), the output of the first tool step after the step that gave it (the runner, the
    executor: its content or observation, a leading `exit code N` line dropped) is appended as
    `Program output:`; the verifiers read the answer there. Coding tasks, answers without code and answers
    that state their answer are returned as they are.

    The step that gave the answer is the last one whose whole text it is, else the last one holding it (a
    reviewer that quotes the code back does not give it). `runs_with`: agents whose steps may come between
    that step and the run of its program because their work runs with it (MetaGPT's tester writes the tests
    its runner runs after the code); any other agent step in between ends the search (its program, not the
    answer's, may be the one that ran)."""
    text = final_answer or ""
    if task.kind == "coding" or not _CODE_BLOCK.search(text):
        return final_answer
    if _marked(text):
        return final_answer
    stripped = text.strip()
    if not stripped:
        return final_answer
    agent_steps = [s for s in reversed(steps) if s.kind == "agent"]
    gave = (next((s for s in agent_steps if s.content.strip() == stripped), None)
            or next((s for s in agent_steps if stripped in s.content.strip()), None))
    if gave is None:
        return final_answer
    for step in steps[gave.index + 1:]:
        if step.kind == "agent":
            if step.agent in runs_with:
                continue
            break
        if step.kind in ("tool", "environment"):
            output = printed_output(step.observation or step.content or "")
            if output:
                return f"{text.rstrip()}\n\nProgram output:\n{output}"
    return final_answer


_EXIT_CODE = re.compile(r"^\s*exit\s*code\s*:?\s*(-?\d+)", re.IGNORECASE)


def _marked(text: str) -> bool:
    """`text` states its answer where the prompts ask for it (a box, an `Answer:` line, `the answer is`)."""
    return any(method in ("boxed", "answer_line", "answer_phrase") for _, method in answer_spans(without_code(text)))


def _giving_step(final_answer: str, steps: Sequence[Step], agents: Collection[str] = ()) -> Step | None:
    stripped = final_answer.strip()
    agent_steps = [s for s in reversed(steps) if s.kind == "agent" and (not agents or s.agent in agents)]
    return (next((s for s in agent_steps if s.content.replace("TERMINATE", "").strip() == stripped), None)
            or next((s for s in agent_steps if stripped and stripped in s.content), None))


def team_answer(task: Task, final_answer: str | None, steps: Sequence[Step], answer_agents: Collection[str]) -> str | None:
    """The answer of a team whose coder writes programs that an executor runs (AG2), when its last message
    is not the answer the verifier should read.

    Real small models end such chats with an echo: the coder's last message is prose about the work
    ("Tom has 91 trees left after 10 years.") or code that never ran. Read, in this order:

    * a math or QA answer that states no marked answer (box, `Answer:` line, `the answer is`): with code,
      `program_answer` (the output of the run of that code); as prose without code, the output of the
      team's last program that ran without error before it, appended as `Program output:` (the numbers of
      the prose describe the work; "91 ... after 10 years" is not 10);
    * a coding answer without a code block: the code blocks of the last step of `answer_agents` that wrote
      any, appended as `Code (step N):` (the prose is about that code; the verifier reads code only);
    * anything else as it is."""
    text = final_answer or ""
    if not text.strip():
        return final_answer
    if task.kind == "coding":
        if _CODE_BLOCK.search(text):
            return final_answer
        gave = _giving_step(text, steps, answer_agents)
        before = steps[: gave.index] if gave is not None else steps
        for step in reversed(before):
            if step.kind == "agent" and step.agent in answer_agents and _CODE_BLOCK.search(step.content):
                code = "\n\n".join(m.group(0).strip() for m in _CODE_BLOCK.finditer(step.content))
                return f"{text.rstrip()}\n\nCode (step {step.index}):\n{code}"
        return final_answer
    if _CODE_BLOCK.search(text):
        return program_answer(task, final_answer, steps)
    if _marked(text):
        return final_answer
    gave = _giving_step(text, steps, answer_agents)
    before = steps[: gave.index] if gave is not None else steps
    for step in reversed(before):
        if step.kind not in ("tool", "environment"):
            continue
        raw = (step.observation or step.content or "").strip()
        exit_code = _EXIT_CODE.match(raw)
        if not exit_code or int(exit_code.group(1)) != 0:
            continue  # not a program's run (a reply such as "No code block was found"), or a run that failed
        output = printed_output(raw)
        if output:
            return f"{text.rstrip()}\n\nProgram output:\n{output}"
    return final_answer


# ------------------------------------------------------------------------------------ contracts

AnswerForm = Literal["number", "expression", "span", "code", "calls"]

_FORMS: dict[str, AnswerForm] = {"numeric": "number", "math": "expression", "qa": "span", "exact": "span",
                                 "gaia": "span", "code_tests": "code", "bfcl_multi_turn": "calls"}
"""Verifier -> the answer form it reads; `calls`: the function calls the run's tools executed (BFCL), no text."""


class AnswerContract(BaseModel):
    """The answer format an adapter's prompts ask for, and that the task's verifier reads."""

    model_config = ConfigDict(frozen=True)

    form: AnswerForm
    placeholder: str
    """What goes between the brackets of the answer line: `number`, `final answer`, `short answer`."""
    entry_point: str | None = None

    @property
    def line(self) -> str:
        """The line to end with, as prompts quote it: `Answer: <number>`."""
        return f"Answer: <{self.placeholder}>"

    @property
    def what(self) -> str:
        """What the answer is, in words: `the number alone, no units and no words`."""
        return {
            "number": "the number alone, no units and no words",
            "expression": "the answer alone, in the form the question asks for (a number, a fraction, an expression, "
                          "an interval or a tuple; LaTeX is fine), no words",
            "span": "the answer alone, as few words as possible, no sentence",
            "code": "the complete solution in one ```python code block",
            "calls": "the function calls your tools run, nothing written",
        }[self.form]

    @property
    def instruction(self) -> str:
        """One sentence a prompt includes to state the contract."""
        if self.form == "code":
            name = f" that defines `{self.entry_point}`" if self.entry_point else ""
            return f"Give the complete solution as one ```python code block{name}."
        if self.form == "calls":
            return "Do what is asked by calling the functions you have: the calls they run are the answer."
        return f"End your message with a line `{self.line}`: {self.what}."

    def format(self, value: str) -> str:
        """`value` written the way the contract asks (a code answer is fenced)."""
        if self.form == "code":
            return f"```python\n{value.strip()}\n```"
        if self.form == "calls":
            return value
        return f"Answer: {value}"


def answer_contract(task: Task) -> AnswerContract:
    """The contract for `task`: its verifier decides the answer form."""
    form = _FORMS.get(task.verifier, "span" if task.kind == "qa" else "number" if task.kind == "math" else "code")
    placeholder = {"number": "number", "expression": "final answer", "span": "short answer", "code": "code",
                   "calls": "calls"}[form]
    return AnswerContract(form=form, placeholder=placeholder, entry_point=task.metadata.get("entry_point"))
