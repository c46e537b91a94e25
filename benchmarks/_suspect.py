"""Suspect verdicts: failures that may be the check's fault, not an agent's, and fixes that only re-format.

A counterfactual label says an agent's content was wrong. When the verifier could not read a right answer
(a format it does not know, a report wrapped around the answer), the search still finds a "fix" (the same
answer, re-formatted) and verifies a false label. Two checks stop that, both pure functions of the task,
the texts and the verifier (`verify(task, text) -> Verdict`):

* `suspect_reason(task, final_answer, steps, verdict, verify)`, for a failed run, only with evidence: the
  final answer (or the last agent step, which gives it) states the reference answer in a final-answer
  position (`Answer:` line, box, answer phrase, bare last line; with no answer read, its last number)
  that the verifier did not take, or (code) the last agent step holds another program that passes. The
  reason is kept in `verdict.details["suspect"]`; such failures are not sent to counterfactual search
  unless asked. No answer, no code, or code that does not compile is a plain failure
  (`plain_failure`, kept in `verdict.details["failure"]`) and searched like any other.
* `same_answer(task, original, fix, verify)`, for a fix: the fix states the same answer (or, for code, the
  same program) as the step it replaces, so a replay that succeeds with it proves the check, not an
  agent, was wrong.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable, Sequence

from rootstep.model import Step, Task, Verdict

from ._answer import _bare_answer_line, answer_spans
from ._code import extract_code, writes
from ._program_output import RunProgram, program_output

Verify = Callable[[Task, "str | None"], Verdict]

_NO_ANSWER_REASONS = ("no answer found", "no number in the answer")
_LAST_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?")


def _is_code(task: Task) -> bool:
    return task.verifier == "code_tests" or task.kind == "coding"


def answer_candidates(text: str) -> list[str]:
    """Every span of `text` that may be meant as its final answer: `answer_spans`, then, only when the text
    marks no answer (no box, `Answer:` line or answer phrase), its last number. A marked answer is the
    answer: the `2` that ends `Answer: (1+\\sqrt{5})/2` is not another candidate."""
    found = answer_spans(text)
    spans = [span for span, _ in found]
    if any(method in ("boxed", "answer_line", "answer_phrase") for _, method in found):
        return spans
    numbers = _LAST_NUMBER.findall(text)
    if numbers and numbers[-1] not in spans:
        spans.append(numbers[-1])
    return spans


def code_key(text: str, entry_point: str | None) -> str | None:
    """The program `text` holds, as a layout-free key: the AST of the entry point's definition when it
    defines one (test prints around it are not the work), else of the whole extracted code."""
    code, how = extract_code(text, entry_point)
    if how.startswith("raw text") and "def " not in code:
        return None
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == entry_point:
            return ast.dump(node)
    return ast.dump(tree)


def verify_quietly(verify: Verify, task: Task, text: str) -> Verdict | None:
    """`verify(task, text)`, or None when the verifier cannot read `text` (it raised)."""
    try:
        return verify(task, text)
    except Exception:  # noqa: BLE001 - a check that cannot run says nothing about the verdict
        return None


_FUNCTION_OBJECT = re.compile(r"<function [\w.<>]+ at 0x[0-9a-f]+>")
"""The repr of a function a team handed back as its answer (smolagents' `final_answer(f)` on a coding task):
the program was right there, only not as text."""


def plain_failure(task: Task, final_answer: str | None, verdict: Verdict) -> str | None:
    """Why a failed verdict is a plain failure of the team's output, or None: no answer at all, no code, or
    code that does not compile. Such a failure is searched like any other (it is not the verifier's
    misreading unless the run holds an accepted answer elsewhere: `suspect_reason`)."""
    if verdict.success:
        return None
    text = final_answer or ""
    if not text.strip():
        return "the final answer is empty"
    if _is_code(task):
        if code_key(text, task.metadata.get("entry_point")) is not None:
            return None
        code, how = extract_code(text, task.metadata.get("entry_point"))
        if how.startswith("raw text") and "def " not in code:
            return "no code in the final answer"
        return "the code in the final answer does not compile"
    details = verdict.details or {}
    if str(details.get("reason") or "") in _NO_ANSWER_REASONS or details.get("method") == "none":
        return f"no answer in the final answer ({details.get('reason') or 'method none'})"
    return None


def suspect_reason(task: Task, final_answer: str | None, steps: Sequence[Step], verdict: Verdict,
                   verify: Verify) -> str | None:
    """Why the failed `verdict` may be the verifier's misreading of a right answer, or None.

    Suspect only with evidence: the run holds an answer the verifier accepts in another place or form.
    Code tasks: the last agent step holds a program that passes and the final answer another program or the
    function object itself (a computed value instead of the program, as smolagents' `final_answer(f(1, 2))`,
    is the team's failure: plain, searched). Other tasks: a candidate final
    answer of the final answer or of the last agent step (with no answer found: their last number too) is
    judged right by the verifier itself, so a right answer was there and another span, or none, was taken.
    No answer, no code, or code that does not compile is a plain failure (`plain_failure`), not suspect.
    """
    if verdict.success or not (final_answer or "").strip():
        return None
    details = verdict.details or {}
    last_agent = next((s for s in reversed(steps) if s.kind == "agent" and s.content.strip()), None)
    if _is_code(task):
        entry_point = task.metadata.get("entry_point")
        if last_agent is not None:
            mine, theirs = code_key(last_agent.content, entry_point), code_key(final_answer or "", entry_point)
            handed = _FUNCTION_OBJECT.fullmatch((final_answer or "").strip())
            if mine is not None and mine != theirs and (theirs is not None or handed):
                passed = verify_quietly(verify, task, last_agent.content)
                if passed is not None and passed.success:
                    return (f"step {last_agent.index} ({last_agent.agent}) holds a program that passes the tests, "
                            f"but the final answer holds {'another one' if theirs is not None else 'the function object'}")
        return None
    unread = str(details.get("reason") or "") in _NO_ANSWER_REASONS or details.get("method") == "none"
    places = [("the final answer", final_answer or "")]
    if last_agent is not None and last_agent.content.strip() != (final_answer or "").strip():
        places.append((f"step {last_agent.index} ({last_agent.agent})", last_agent.content))
    taken = str(details.get("extracted") or "")
    for where, text in places:
        found = right_answer_in(task, text, verify, skip=taken, last_number=unread)
        if found is not None:
            if unread:
                return f"the verifier found no answer, but {where} states the reference answer ({found})"
            return (f"{where} states the reference answer in a final-answer position ({found})"
                    + (f", but the verifier took {taken!r}" if taken else ""))
    return None


def right_answer_in(task: Task, text: str, verify: Verify, *, skip: str | None = None,
                    last_number: bool = False) -> str | None:
    """Where `text` states a right answer, as `method: 'span'` (code: the program passes), or None.

    Every candidate final answer (`answer_spans`; with `last_number`, also the text's last number) is
    judged by the task's verifier itself, so "right" means what Omega would accept had it read that span."""
    if _is_code(task):
        if code_key(text, task.metadata.get("entry_point")) is None:
            return None
        judged = verify_quietly(verify, task, text)
        return "a program that passes the tests" if judged is not None and judged.success else None
    spans: list[tuple[str, str]] = list(answer_spans(text))
    if last_number:
        spans += [(n, "last_number") for n in answer_candidates(text) if n not in {s for s, _ in spans}]
    for span, method in spans:
        if span == skip:
            continue
        judged = verify_quietly(verify, task, span)
        if judged is not None and judged.success:
            return f"{method}: {span!r}"
    return None


def same_answer(task: Task, original: str, fix: str, verify: Verify,
                run_program: RunProgram | None = None) -> str | None:
    """Why `fix` states the same answer as `original` (so it only re-formats), or None when it changes it
    or either has no answer to compare.

    Code: the same program (the entry point's AST, layout and comments ignored). Other tasks: the fix's
    strongest answer equals one of the original's candidate answers, as the task's verifier compares them.
    With `run_program` (math and QA), a text whose fenced Python prints something states what it prints,
    not what its prose claims it prints: a retake whose code computes 5 while its text says "output 12.5"
    changed the answer (to 5), and the step's own program output is one of its candidates too.
    """
    if _is_code(task):
        entry_point = task.metadata.get("entry_point")
        a, b = code_key(original, entry_point), code_key(fix, entry_point)
        if a is not None and a == b:
            return "the fix holds the same program as the step (only its presentation changed)"
        return None
    printed = program_output(fix, run_program)
    if printed is not None:
        fix_answer = printed.splitlines()[-1].strip()  # the last line, whole: a point `(15, -29)` is one answer
        stated = f"the fix's program prints {fix_answer!r}"
    else:
        fixed = answer_spans(fix)
        if not fixed:
            return None
        fix_answer = fixed[0][0]
        stated = f"the fix states the answer {fix_answer!r}"
    candidates = answer_candidates(original)
    own = program_output(original, run_program) if printed is not None else None
    if own is not None:
        candidates.append(own.splitlines()[-1].strip())
    for candidate in dict.fromkeys(candidates):
        judged = verify_quietly(verify, task.model_copy(update={"ground_truth": candidate}), fix_answer)
        if judged is not None and judged.success:
            return f"{stated}, which the step already gave as {candidate!r} (only its presentation changed)"
    return None


def gives_answer(task: Task, text: str, run_program: RunProgram | None = None) -> bool:
    """Whether `text` states an answer to the task: code (code tasks), or a final-answer span (a box, an
    `Answer:` line, an answer phrase, GSM8K's `####`, a bare value as the last line). A plan, a delegation,
    a review or a partial computation states none. With `run_program` (math and QA), a text whose fenced
    Python prints something gives an answer too: what it prints (`program_output`). Code tasks: a program, or
    the task's function written out in pseudo-code (`writes`: `function make_a_pile(n):` in a ```plaintext
    block), a wrong version of it, as the searches' `failing_code` reads it; on the seed-53 slice (2026-12-04)
    AgentPrune's analyst designed HumanEval/100 so, with the wrong rule, and its correction to the reference
    solution was refused as handing the answer over, leaving the first step open."""
    if _is_code(task):
        entry = task.metadata.get("entry_point")
        return code_key(text, entry) is not None or writes(extract_code(text, entry)[0], entry)
    if "####" in text or any(method != "whole" or _bare_answer_line(span) for span, method in answer_spans(text)):
        return True
    return program_output(text, run_program) is not None


def _printed_right(task: Task, text: str, verify: Verify, run_program: RunProgram | None) -> str | None:
    """Where what `text`'s program prints (math and QA) states a right answer, read as `Program output:` is
    read in a team's answer (`right_answer_in` with its last number), naming what it printed; or None."""
    printed = None if _is_code(task) else program_output(text, run_program)
    if printed is None:
        return None
    found = right_answer_in(task, f"Program output:\n{printed}", verify, last_number=True)
    if found is None:
        return None
    shown = printed if len(printed) <= 200 else "..." + printed[-200:]
    return f"its program prints {shown!r}, {found}"


def answer_leak(task: Task, original: str, fix: str, verify: Verify,
                run_program: RunProgram | None = None) -> str | None:
    """Why `fix` hands over the answer, or None: the step it replaces states no answer to the task (see
    `gives_answer`), but the fix states the reference answer, as the task's verifier reads it (any
    candidate span or the last number; code: a program that passes the tests). Correcting a step that
    itself gave a (wrong) answer is legitimate and never a leak.

    `run_program` (math and QA): what a text's fenced Python prints is stated by that text. A step whose
    program prints something gave an answer; a fix whose program prints the reference answer at a step that
    gave none states it (the reason names what it printed). A program that fails or prints nothing states
    nothing. The step's program is run only when the fix would otherwise be a leak."""
    last_number = not _is_code(task)
    if gives_answer(task, original) or right_answer_in(task, original, verify, last_number=last_number) is not None:
        return None  # it gave an answer (correcting it is legitimate), or the right one already (re-formatting)
    if last_number and corrects_a_result(original, fix):
        return None
    found = (right_answer_in(task, fix, verify, last_number=last_number)
             or _printed_right(task, fix, verify, run_program))
    if found is None:
        return None
    if last_number and program_output(original, run_program) is not None:
        return None  # the step's program printed an answer: correcting it is legitimate
    return (f"the step states no answer to the task (a plan, a delegation, a partial computation or a review), but "
            f"the fix states the reference answer ({found}): a fix must correct the step's own work, not hand over "
            "the answer")


def corrects_a_result(original: str, fix: str, min_similarity: float = 0.6) -> bool:
    """Whether `fix` is the same computation as `original` with its numbers corrected: the step worked out a
    result in its own words (`Result: $16. Handing off to the reviewer.`, no answer line), and the fix keeps
    the text and changes the numbers. That corrects the step's own (wrong) result; a plan or a delegation
    rewritten into a statement of the answer shares little of its text and stays a leak."""
    from difflib import SequenceMatcher

    if not re.search(r"\d", original):
        return False
    return SequenceMatcher(None, original, fix, autojunk=False).ratio() >= min_similarity


def planted_answer(task: Task, original: str, corruption: str, verify: Verify,
                   run_program: RunProgram | None = None) -> str | None:
    """The mirror of `answer_leak` for fault injection: why `corruption` writes a wrong final answer into a
    step that gave none (so the flip would come from a planted answer, not from a mistake in the step's
    own work), or None. With `run_program` (math and QA), a program that prints something is an answer
    (`gives_answer`): a corruption whose program prints a wrong answer into a step that gave none plants it."""
    if gives_answer(task, original, run_program) or not gives_answer(task, corruption, run_program):
        return None
    if right_answer_in(task, corruption, verify) is not None or _printed_right(task, corruption, verify, run_program):
        return None
    what = "a program" if _is_code(task) else "a final answer"
    return (f"the step states no answer to the task, but the corruption writes {what} into it: corrupt the step's "
            "own work instead")


def mark_suspect(task: Task, final_answer: str | None, steps: Sequence[Step], verdict: Verdict,
                 verify: Verify) -> Verdict:
    """`verdict` with `details["suspect"]` set when `suspect_reason` finds one, else `details["failure"]` when
    `plain_failure` names one (a success is returned as is)."""
    if verdict.success:
        return verdict
    reason = suspect_reason(task, final_answer, steps, verdict, verify)
    if reason is None:
        failure = plain_failure(task, final_answer, verdict)
        if failure is None:
            return verdict
        return verdict.model_copy(update={"details": {**verdict.details, "failure": failure}})
    return verdict.model_copy(update={"details": {**verdict.details, "suspect": reason}})


def is_suspect(verdict: Verdict | None) -> str | None:
    """The suspect reason a stored verdict carries, or None."""
    if verdict is None or verdict.success:
        return None
    reason: Any = (verdict.details or {}).get("suspect")
    return str(reason) if reason else None
