"""Proposing: what an annotation search asks an LLM for, and how the answer becomes a fix or a corruption.

The first of the three phases of a search (propose, try: `_trial`, search: `_counterfactual`,
`_injection`). Asking with the re-ask protocol (`ask_valid`: an invalid answer is asked again with its
problem stated), the checks of a proposed step text (not the step itself, not a description of the change,
not the same work), the writing of a described change (`retake_step` in the agent's seat, `rewrite_step`),
and the two kinds of proposal: the analyzer's diagnosis of a failed run and its fix (`validate_diagnosis`,
`FixProposer`), and the perturber's corruption of a successful one (`validate_corruption`). Everything is
metered against the search's `Budget`; nothing here replays a run.
"""

from __future__ import annotations

import ast
import functools
import io
import json
import re
import textwrap
import tokenize
from contextlib import contextmanager
from typing import Any, Callable, Collection, Iterator, Literal, NamedTuple, Protocol, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict
from rootstep.benchmarks import (
    CallStep,
    RunProgram,
    Verify,
    answer_leak,
    calls_answer,
    executed_calls_answer,
    answer_spans,
    asserts_on,
    build_program,
    code_blocks,
    extract_code,
    false_assertion,
    is_suspect,
    matching,
    parse_call,
    printed_output,
    program_output,
    python_program,
    reads_calls,
    right_answer_in,
    same_answer,
    task_functions,
    verify_quietly,
    without_code,
    writes,
)
from rootstep.model import (Annotation, Asked, Step, Task, Trajectory, Usage, Verdict, collapse_loop, loop_period,
                            looping_tail, match_agent)
from rootstep.prompts import render, render_steps

from ._budget import Meter
from ._perturbations import Perturbation

T = TypeVar("T")
StepRequest = Callable[[Step], "list[dict[str, Any]] | None"]
"""`step -> the message list of the recorded request that produced it`, or None (no recording, or tools)."""
StepTools = Callable[[Step], "list[dict[str, Any]] | None"]
"""`step -> the tools (OpenAI function schemas) the recorded request that produced it offered`, or None."""


# ------------------------------------------------------------------------------------ asking


class ChatLike(Protocol):
    """`gateway.Chat` or anything called with one prompt that returns the answer text.

    When it has `usage` (a `Usage` that adds up its calls) and `model`, tokens, cost and the annotator's
    name are taken from them. Give each concurrent search its own instance: usage
    is read as a before/after difference.
    """

    def __call__(self, prompt: "str | list[dict[str, Any]]") -> str: ...
    """A list of messages (`retake_step`) is sent as the whole conversation."""


def with_transcript(annotation: Annotation, asked: Sequence[Asked], chat: Any) -> Annotation:
    """The annotation with the search's analyzer / perturber calls as evidence (`Evidence.transcript`), and
    the gateway run that journaled them when the chat went through one (`chat.gateway_run_id`)."""
    return annotation.model_copy(update={"evidence": annotation.evidence.model_copy(update={
        "transcript": list(asked), "transcript_run_id": getattr(chat, "gateway_run_id", None)})})


def model_name(chat: Any, default: str) -> str:
    return str(getattr(chat, "model", None) or default)


def call_llm(chat: ChatLike, prompt: "str | list[dict[str, Any]]", meter: Meter) -> str:
    """One metered call: counts the call, its tokens and cost (what `chat.usage` grew by, when it has one)."""
    before = getattr(chat, "usage", None)
    before = before.model_copy() if isinstance(before, Usage) else None
    try:
        answer = chat(prompt)
    finally:
        after = getattr(chat, "usage", None)
        spent = Usage(llm_calls=1)
        if before is not None and isinstance(after, Usage):
            spent = Usage(llm_calls=1, prompt_tokens=after.prompt_tokens - before.prompt_tokens,
                          completion_tokens=after.completion_tokens - before.completion_tokens, usd=after.usd - before.usd)
        meter.asked += spent
    return answer or ""


MAX_ANSWER_TOKENS = 16_384
"""The most room an analyzer / perturber answer is given when a cut answer is re-asked."""


def rewrite_budget(trajectory: Trajectory, floor: int = 1024, cap: int = 8192) -> int:
    """`max_tokens` for an answer that rewrites one step of `trajectory` (a fix or a corruption as JSON):
    room for the longest agent step twice over (JSON escaping, the reason) plus 512, between `floor` and
    `cap`. About 3.5 characters make a token in code and English."""
    longest = max((len(s.content) for s in trajectory.steps if s.kind == "agent"), default=0)
    return max(floor, min(cap, int(2 * longest / 3.5) + 512))


def _cut(chat: ChatLike) -> bool:
    """The last answer stopped at `max_tokens` (`finish_reason == "length"`)."""
    return getattr(chat, "finish_reason", None) == "length"


def _grow(chat: ChatLike) -> int | None:
    """Double the chat's `max_tokens` (up to `MAX_ANSWER_TOKENS`); the new value, or None when it cannot grow."""
    current = getattr(chat, "max_tokens", None)
    if not isinstance(current, int) or current >= MAX_ANSWER_TOKENS:
        return None
    chat.max_tokens = min(MAX_ANSWER_TOKENS, current * 2)  # type: ignore[attr-defined]
    return chat.max_tokens  # type: ignore[attr-defined]


REASK_TEMPERATURE = 0.7
"""The temperature of a re-ask when the first answer was greedy: a greedy model asked again mostly writes the
same rejected answer (seen with local/qwen2.5-coder-1.5b: the same already-tested fix of step 1, refused twice)."""


@contextmanager
def _temperature_given_back(chat: ChatLike) -> Iterator[None]:
    """The chat's temperature as it was before the block (its re-asks may have sampled: `_sample_reasks`)."""
    temperature = getattr(chat, "temperature", None)
    try:
        yield
    finally:
        if temperature is not None and getattr(chat, "temperature", None) != temperature:
            chat.temperature = temperature  # type: ignore[attr-defined]


def _sample_reasks(chat: ChatLike) -> None:
    """Re-asks of a greedy chat (`temperature == 0`) are sampled at `REASK_TEMPERATURE`; the caller's
    chat keeps it for the rest of this proposal's re-asks only when it has a settable `temperature`."""
    if getattr(chat, "temperature", None) == 0:
        try:
            chat.temperature = REASK_TEMPERATURE  # type: ignore[attr-defined]
        except AttributeError:
            pass


def ask_valid(
    chat: ChatLike,
    render_prompt: Callable[[str | None, str | None], "str | list[dict[str, Any]]"],
    validate: Callable[[str], "tuple[T | None, str | None]"],
    meter: Meter,
    log: list[Asked],
    prompt_name: str,
    *,
    grow: bool = True,
    reasks: int | None = None,
    reask_if: Callable[[str], bool] | None = None,
) -> tuple[T | None, str | None]:
    """Ask until `validate` accepts the answer, at most `max_reasks` re-asks, each stating the problem (and,
    for a greedy chat, sampled at `REASK_TEMPERATURE`).

    `render_prompt(previous_answer, problem)` builds the prompt (both None the first time).
    `validate(answer)` returns `(value, None)` or `(None, problem)`. An answer cut at the token limit
    (`finish_reason == "length"`) is never parsed: the same prompt is asked again with twice the room
    (`max_tokens` doubled, up to `MAX_ANSWER_TOKENS`; these re-asks count as LLM calls but not against
    `max_reasks`; with `grow=False` a cut answer ends the proposal instead: an answer that rewrites one step
    and runs past the room sized to that step is rambling, not a longer step). An answer cut because it loops
    (it ends by repeating one block, `loop_period`: the gateway's loop guard cuts it so) is not given more room,
    where greedy decoding would write the same loop again: it is a problem, re-asked (sampled) like any other.
    `reasks`: the re-asks allowed
    (default the budget's `max_reasks`); `reask_if(problem)`: whether this problem is re-asked at all (a refusal
    that the model is known not to mend ends the proposal at once). Returns `(value, None)`, or `(None, why)`
    when the answers stayed invalid, the call failed, or the budget ran out.
    """
    most = meter.budget.max_reasks if reasks is None else reasks
    with _temperature_given_back(chat):
        previous: str | None = None
        problem: str | None = None
        asked = 0
        while asked <= most:
            stop = meter.cannot_ask(f"a call of {prompt_name}")
            if stop:
                return None, stop
            try:
                answer = call_llm(chat, render_prompt(previous, problem), meter)
            except Exception as exc:  # a provider failure ends this proposal, not the search
                log.append(Asked(prompt_name=prompt_name, answer="", problem=f"call failed: {type(exc).__name__}: {exc}"))
                return None, f"{prompt_name}: call failed: {type(exc).__name__}: {str(exc)[:300]}"
            call_id = getattr(chat, "last_call_id", None)
            period = loop_period(answer) if _cut(chat) else None
            if period is None and _cut(chat):
                limit = getattr(chat, "max_tokens", "?")
                grown = _grow(chat) if grow else None
                cut = f"cut at max_tokens={limit} (finish_reason=length)"
                log.append(Asked(prompt_name=prompt_name, answer=answer, call_id=call_id,
                                 problem=cut + (f"; asked again with max_tokens={grown}" if grown else "")))
                if grown is None:
                    return None, f"{prompt_name}: the answer was {cut} and cannot be given more room"
                continue
            asked += 1
            if period is None:
                value, problem = validate(answer)
            else:  # more room would only buy more copies: the same prompt loops the same way
                value, problem = None, (f"the answer repeats the same {period}-character block back to back until it "
                                        "was cut; answer once, without repeating yourself")
            log.append(Asked(prompt_name=prompt_name, answer=answer, problem=problem, call_id=call_id))
            if problem is None:
                return value, None
            if reask_if is not None and not reask_if(problem):
                break
            previous = answer if period is None else collapse_loop(answer)
            _sample_reasks(chat)
        return None, f"{prompt_name}: no valid answer after {asked - 1} re-ask(s); last problem: {problem}"


_LATEX_AS_ESCAPE = re.compile(
    r"\\(\\"                                   # an escaped backslash: kept as it is
    r"|b(?:oxed\{|ar\{|eta\b|inom\{|egin\{|ig[lr]?\b)|f(?:rac\{|orall\b|lat\b)"
    r"|n(?:eq\b|e\b|u\b|abla\b|ot(?:in)?\b|ewline\b)|r(?:ight\b|ho\b|angle\b|floor\b|ceil\b)"
    r"|t(?:imes\b|ext(?:bf|it)?\{|heta\b|frac\{|au\b|an\b|o\b|riangle\b)"
    r"|u(?![0-9a-fA-F]{4})|[^\"\\/bfnrtu])")
"""A backslash in an answer's JSON that starts a LaTeX command (`\\boxed`, `\\frac`, `\\times`, `\\neq`: JSON would
read `\\b`, `\\f`, `\\t`, `\\n` as a backspace, form feed, tab or newline) or any escape JSON does not have (`\\(`,
`\\sqrt`, `\\underline`: the object would not parse at all)."""


def latex_escaped(text: str) -> str:
    """`text` with each backslash that `_LATEX_AS_ESCAPE` finds doubled, so that JSON reads the LaTeX the model
    wrote. Models write LaTeX in JSON strings with one backslash: on the main job of 2026-11-29 the 1.5B's fix
    `"... Ahito ran is \\boxed{28}\\n"` was read as `... is <backspace>oxed{28}` and replayed so."""
    return _LATEX_AS_ESCAPE.sub(lambda m: m.group(0) if m.group(1) == "\\" else "\\\\" + m.group(1), text)


def json_object(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The first JSON object in an answer (fenced or bare), or why there is none.

    Models wrap JSON in ```json fences, prose, or `<think>` blocks; the first `{` that starts a valid
    object wins. An answer with no such object is a problem, never guessed at.
    """
    text = latex_escaped(text)
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value, None
    return None, "no JSON object could be parsed from your answer; reply with one JSON object only"


def as_index(value: Any) -> int | None:
    """An integer step index from 3, "3", "step 3", 3.0; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(?:step\s*)?#?\s*(-?\d+)\s*", value, re.I)
        return int(m.group(1)) if m else None
    return None


def answer_step(trajectory: Trajectory, answer_agents: Sequence[str] = ()) -> Step | None:
    """The agent step that gives the run's final answer: the last agent step of one of `answer_agents`
    (the framework's, `Adapter.answer_agents`: AG2's coder, AFlow's sc_ensemble, ...) when given; else
    the last agent step whose content holds the final answer, else the last agent step."""
    agent_steps = [s for s in trajectory.steps if s.kind == "agent"]
    if answer_agents:
        theirs = [s for s in agent_steps if s.agent in answer_agents]
        if theirs:
            return theirs[-1]
    final = (trajectory.final_answer or "").strip()
    if final:
        for s in reversed(agent_steps):
            if s.content.strip() and (final in s.content or s.content.strip() in final):
                return s
    return agent_steps[-1] if agent_steps else None


def _claimed_output(text: str, output: str) -> str:
    """`text` (prose between or after a step's Python blocks) with each ```output block, the model's claim of what
    the program printed, made what the corrected program prints (`output`)."""
    kept, at = [], 0
    for block in code_blocks(text):
        if block.language == "output" and not block.tagged:
            kept.append(text[at:block.code_at[0]] + output.rstrip("\n") + "\n")
            at = block.code_at[1]
    return "".join(kept) + text[at:]


def same_text(a: str, b: str) -> bool:
    """Equal once whitespace is normalised: such a 'change' would replay the run unchanged."""
    return " ".join(a.split()) == " ".join(b.split())


class WorkForm(NamedTuple):
    """What a step's text does, read for a no-op change (`same_work`): its prose (whitespace normalised), each
    Python program in it as `ast.unparse` gives it back (comments and layout gone) and the comments apart."""
    prose: str
    code: tuple[str, ...]
    comments: frozenset[str]


def _program(code: str) -> tuple[str, frozenset[str]] | None:
    source = textwrap.dedent(code)
    try:
        canonical = ast.unparse(ast.parse(source))
        comments = frozenset(" ".join(t.string.lstrip("#").split())
                             for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT)
    except (SyntaxError, ValueError, tokenize.TokenError, RecursionError):
        return None
    return canonical, comments


def work_form(text: str) -> WorkForm:
    """`text` as a `WorkForm`: its fenced Python blocks (or the whole text, unfenced, when it parses) as programs,
    the rest as prose. A block that does not parse stays prose."""
    blocks = code_blocks(text)
    if not blocks:
        program = _program(text) if text.strip() else None
        if program is None:
            return WorkForm(" ".join(text.split()), (), frozenset())
        return WorkForm("", (program[0],), program[1])
    prose: list[str] = []
    code: list[str] = []
    comments: set[str] = set()
    end = 0
    for block in blocks:
        prose.append(text[end:block.start])
        end = block.end
        program = _program(block.code) if block.python else None
        if program is None:
            prose.append(text[block.start:block.end])
        else:
            code.append(program[0])
            comments |= program[1]
    prose.append(text[end:])
    return WorkForm(" ".join(" ".join(prose).split()), tuple(code), frozenset(comments))


def same_work(new: str, old: str) -> bool:
    """Whether `new` does what `old` does: the same prose and the same programs once comments, layout and code
    fences are set aside, and no comment that `old` lacks. Such a change replays the run with nothing changed
    for the team to act on: on the main job of 2026-11-28 the perturber's corruption of MBPP 66 was the coder's
    code without its fence (replayed twice, one-step and persistent, both still passing), and the analyzer's
    third fix of MBPP 310 was the step's `tuple(s)` without its comment."""
    if same_text(new, old):
        return True
    a, b = work_form(new), work_form(old)
    return a.prose == b.prose and a.code == b.code and a.comments <= b.comments


def work_key(text: str) -> str:
    """A key equal for texts that do the same work (`work_form`): what an already-tried set is keyed by."""
    form = work_form(text)
    return json.dumps([form.prose, list(form.code), sorted(form.comments)])


_PLACEHOLDER = re.compile(r"\s*<[^<>\n]{2,200}>\s*")
_NO_CHANGE = re.compile(r"^\W*no (?:changes?|corrections?|fix(?:es)?)(?: (?:is|are))? (?:needed|necessary|required)\b",
                        re.IGNORECASE)
_INSTRUCTION = re.compile(
    r"^\W*(?:(?:add|change|replace|remove|modify|update|correct|fix|use|include|insert|delete|move|swap)\s+"
    r"(?:the|a|an|this|that|it|its|step|line|code|value|calculation|variable|formula|function|checks?|tests?"
    r"|conditions?|handling|validation|logic)\b"
    # "The correct value should be ...", "The correct answer should be the radius that ..." (the 1.5B's fix of an
    # AG2 coder's step, slice of 2026-11-29, seed 7, MATH-500 geometry/456): what the work should be, not the work
    r"|the (?:correct(?:ed)?|right|proper)(?: \w+){1,3} (?:should|would|must) be\b"
    # "The suggested fix is to use the correct algorithm of exponentiation by squaring, ..." (the 1.5B's fix of an
    # AgentPrune inspector's code, slice of 2026-11-29, seed 7, HumanEval/49): the fix talked about, not written
    r"|(?:the |my |our )?(?:suggested|proposed|recommended) (?:fix|change|correction|solution) (?:is|would be)\b"
    # what the work should do instead, said of the work: "The function should return an empty list when ..."
    # (the 1.5B's whole fix of an AgentPrune programmer's code, slice of 2026-11-27, HumanEval/25)
    r"|(?:the|this|your) (?:function|code|program|solution|implementation|method|loop)"
    r" (?:should|must|needs? to|ought to)\b)", re.IGNORECASE)
_DESCRIBED = re.compile(
    r"^\W*(?:to (?:correct|fix) (?:this|the (?:mistake|error|step))\b"
    # "To correctly calculate the distance run by Ahito, we need to add ..." (the 1.5B's whole fix of an AG2 coder
    # step, main job of 2026-11-28, GSM8K test-1101): what the step should do, said before doing none of it
    r"|to correctly \w+\b[^.!?\n]{0,120}?,\s*(?:we|you|one|the \w+) (?:need|needs|should|must|have|has) to\b"
    r"|(?:the |this )?(?P<who>[\w .-]{1,40}?) "
    r"(?:should|must|needs? to|ought to) (?:have |instead |rather )?\w+)", re.IGNORECASE)
_POSSESSIVE = re.compile(
    r"^\W*(?:the |this )?(?P<who>[\w .-]{1,40}?)['\u2019]s\b[^.!?\n]{0,60}?\b(?:should|must|needs? to|ought to)\b",
    re.IGNORECASE)
"""The agent's own work named in the third person: "The critic's code output should be the solution to the
equation" (the 1.5B's fix of an AG2 critic step, slice of 2026-11-28, seed 5), which was replayed as the critic's
message at steps 3 and 6: an agent does not speak of its own output as the critic's."""


def described_change(text: str, agent: str) -> str | None:
    """The first sentence of `text` when it describes a change to a step by `agent` instead of being the
    message: in the third person ("The coder should have calculated ...", "To correct this, ...") or as an
    instruction ("Add the calculation of ...", "Change 900 to 300"); else None."""
    first = re.split(r"(?<=[.!?:])\s|\n", text.strip(), maxsplit=1)[0]
    if _INSTRUCTION.match(first):
        return first
    match = _DESCRIBED.match(first)
    if match and (match.group("who") is None or match_agent(match.group("who"), [agent]) is not None
                  or match.group("who").lower() in ("agent", "the agent")):
        return first
    owner = _POSSESSIVE.match(first)
    if owner and match_agent(owner.group("who"), [agent]) is not None:
        return first
    return None


def not_the_step_itself(text: str, agent: str, field: str) -> str | None:
    """Why `text`, offered as the replacement of a step by `agent`, is not a message that agent could have
    written: the prompt's own placeholder copied back (a 1.5B model answered `"<the full corrupted text of
    step 7>"`), "No changes needed.", or a description of the change (`described_change`), which the
    replay would hand to the next agent as the agent's words. None when it reads as the message itself."""
    if _PLACEHOLDER.fullmatch(text):
        return f"{field} is the prompt's placeholder {text.strip()!r}, not the text of the step; write the step itself"
    if _NO_CHANGE.match(text):
        return (f"{field} says no change is needed ({text.strip()[:60]!r}): a replacement must change the step; when "
                "the step is correct, say so in the form the prompt gives, or name another step")
    first = described_change(text, agent)
    if first is not None:
        return (f"{field} describes a change ({first[:80]!r}) instead of being the message: write the corrected step "
                f"itself, in {agent}'s own words and format, as the replay will hand it to the next agent")
    return None


def step_room(step: Step, floor: int = 256) -> int:
    """`max_tokens` for an answer that is one step written again (a retake, a rewrite): twice the step's own
    length (about 3.5 characters a token) plus 128, at least `floor`. A 1.5B model retaking a coder's step
    once wrote 1,240 tokens of LaTeX where the coder had written 60 of code (259 s on 2 cores), was cut, and
    was asked again with twice the room."""
    return max(floor, int(2 * len(step.content) / 3.5) + 128)


@contextmanager
def room(chat: ChatLike, tokens: int) -> Iterator[None]:
    """The chat's `max_tokens` at most `tokens` for the block (given back after)."""
    current = getattr(chat, "max_tokens", None)
    if not isinstance(current, int) or current <= tokens:
        yield
        return
    chat.max_tokens = tokens  # type: ignore[attr-defined]
    try:
        yield
    finally:
        chat.max_tokens = current  # type: ignore[attr-defined]


def retake_step(chat: ChatLike, messages: list[dict[str, Any]], step: Step, meter: Meter,
                log: list[Asked], check: Callable[[str], str | None] | None = None) -> tuple[str | None, str | None]:
    """Step `step` taken again by `chat` in the agent's seat: the request the agent received at that step, as
    recorded (its system prompt and the conversation so far), answered by the analyzer's model in plain text.
    Where the analyzer found a mistake at the step but could not write the corrected message (it described
    the change, or its rewrite left the message unchanged), the stronger model doing the agent's own work is
    the correction; the reference answer is never in the request. A retake equal to the step is re-asked
    (sampled). `check` (the caller's `check_fix`) is asked of every answer: a retake it refuses is re-asked
    (`Budget.max_write_reasks` times, none by default: the 1.5B's 8 re-asked refused retakes of 2026-11-29 were
    all refused again) with the problem stated, as an agent is told its code failed (`wrong_code: ... got ...,
    expected ...`) or its answer is wrong; what the re-ask does not fix is refused (a retake that hands over the answer at a step that
    gave none stays an `answer_leak`). On the main job of 2026-11-28 (MBPP 310) the 1.5B's retake returned the
    coder's `tuple(s)`, which keeps the space the tests drop; it was refused unseen by the model, and the step
    stayed open with no replay.

    A retake is asked for the form the agent's instructions ask for: when its system prompt asks for a Python
    code block (`asks_for_code`) and the retake has none, it is re-asked once for it, whatever `max_write_reasks`
    says. The main job of 2026-11-28
    (GSM8K test-474): the 1.5B in the AG2 coder's seat worked out the right 80 in prose; the executor found no
    code block, the critic wrote code printing another quantity (20), and the replay failed: a correction the
    team could not run. Prose is not refused: when the re-ask brings no code either, the first prose answer is
    taken (on test-120, 2026-11-25, a prose retake flipped the run), not the re-ask's, which the 1.5B made an
    echo of the complaint on test-1101 ("Please provide the correct answer so that I can assist you with a code
    block") and a restatement of the question on test-474."""
    code_form = code_form_asked(messages)
    no_code_block = _no_code_block(code_form or "")
    prose: list[str] = []  # the first answer that passed every check but had no code block

    def render(previous: str | None, problem: str | None) -> list[dict[str, Any]]:
        if problem is None:
            return list(messages)
        return [*messages, {"role": "assistant", "content": previous or ""},
                {"role": "user", "content": f"{problem}. Answer the request above again."}]

    def validate(answer: str) -> tuple[str | None, str | None]:
        text = answer.strip()
        if not text:
            return None, "the answer is empty"
        if same_work(text, step.content):
            return None, "that is the answer already given; take the step in another way"
        problem = check(text) if check is not None else None
        if problem is not None:
            return None, problem
        if code_form and not code_blocks(text):
            if not prose:
                prose.append(text)
            return None, no_code_block
        return text, None

    refused: list[str] = []

    def reask(problem: str) -> bool:
        if problem == no_code_block:
            return True  # asked for the form its instructions ask for, once: on GSM8K test-1101 that retake flipped
        refused.append(problem)
        return len(refused) <= meter.budget.max_write_reasks

    with plain_text(chat), room(chat, step_room(step)):
        text, why = ask_valid(chat, render, validate, meter, log, "retake_step", grow=False,
                              reasks=max(meter.budget.max_write_reasks, 1 if code_form else 0), reask_if=reask)
    if text is None and prose:
        return prose[0], None  # asked for its code block and not given it: the agent's work as first written
    return text, why


def _no_code_block(form: str) -> str:
    return f"your instructions ask for a Python code block ({form}) and the answer has none; write the message as they ask"


_ASKS_FOR_CODE = re.compile(r"(?P<fenced>```python|\bpython code block\b)|(?P<tagged>\bopened with '<code>')", re.IGNORECASE)
"""AG2's coder: "Write a short Python code block (```python ... ```) that computes the answer and prints it"; smolagents'
CodeAgent (1.26): "The code sequence must be opened with '<code>', and closed with '</code>'"."""


def code_form_asked(messages: Sequence[dict[str, Any]]) -> str | None:
    """The code block form the agent's system prompt in `messages` asks its work in (`_ASKS_FOR_CODE`): "```python
    ... ```" or "<code> ... </code>"; None when it asks for none."""
    for m in messages:
        found = _ASKS_FOR_CODE.search(m["content"]) if m.get("role") == "system" and isinstance(m.get("content"), str) else None
        if found is not None:
            return "<code> ... </code>" if found.lastgroup == "tagged" else "```python ... ```"
    return None


def asks_for_code(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether the agent's system prompt in `messages` asks for its work as a Python code block (`code_form_asked`)."""
    return code_form_asked(messages) is not None


_PREFACE = re.compile(r"^\s*(?:(?:sure|certainly|okay|ok)\b[^\n]*\n+)?(?:here(?:'s| is)|below is|the (?:corrected|rewritten) "
                      r"(?:message|step|version))[^\n]{0,80}:\s*\n", re.IGNORECASE)


@contextmanager
def plain_text(chat: ChatLike) -> Iterator[None]:
    """The chat without its JSON mode (`extra["response_format"]`) for the block: a rewritten step is text."""
    extra = getattr(chat, "extra", None)
    mode = extra.pop("response_format", None) if isinstance(extra, dict) else None
    try:
        yield
    finally:
        if mode is not None:
            extra["response_format"] = mode  # type: ignore[index]


def rewrite_step(chat: ChatLike, step: Step, instruction: str, reason: str, question: str, meter: Meter,
                 log: list[Asked]) -> tuple[str | None, str | None]:
    """The step rewritten by `chat` with the described correction made (`rewrite_step.j2`, plain text), or
    (None, why). Small analyzers mostly say what to change ("The coder should have calculated 300 sheets")
    rather than write the step, and write code badly inside a JSON string; asked to edit the message itself,
    they do. The rewrite is held to what a fix is held to: the step's own text, changed."""
    from rootstep.prompts import render

    def validate(answer: str) -> tuple[str | None, str | None]:
        text = _PREFACE.sub("", answer, count=1).strip()
        if text.startswith("<<<") and text.endswith(">>>"):
            text = text[3:-3].strip()
        if not text:
            return None, "the answer is empty; reply with the corrected message"
        problem = not_the_step_itself(text, step.agent, "the answer")
        if problem is None and same_work(text, step.content):
            problem = "the answer is the message unchanged (comments and layout aside); make the correction"
        return (None, problem) if problem else (text, None)

    with plain_text(chat), room(chat, step_room(step)):
        shown = step.model_copy(update={"content": collapse_loop(step.content)})  # a loop shown once, not copied
        return ask_valid(chat, lambda previous, problem: render(
            "rewrite_step.j2", question=question, step=shown, instruction=instruction, reason=reason,
            previous_answer=previous, problem=problem), validate, meter, log, "rewrite_step.j2", grow=False,
            reasks=meter.budget.max_write_reasks)



def verdict_feedback(verdict: Verdict | None, max_chars: int = 3000) -> str:
    """Omega's verdict as the analyzer reads it: score and details (test output, expected vs got)."""
    if verdict is None:
        return "(no verdict)"
    text = f"success: {verdict.success}; score: {verdict.score:g}"
    if verdict.details:
        details = json.dumps(verdict.details, indent=1, sort_keys=True, default=str)
        text += "\n" + (details if len(details) <= max_chars else details[:max_chars] + " ...")
    return text


_MISSING_MODULE = re.compile(
    r"(?:ModuleNotFoundError|ImportError): No module named '?(?P<a>[\w.]+)'?"
    r"|Import of (?P<b>[\w.]+) is not allowed")


def environment_limits(trajectory: Trajectory) -> list[str]:
    """What the run's environment lacked, read from its steps and observations: a module the code imported that
    the sandbox does not have (`ModuleNotFoundError`), or one the framework does not allow (smolagents'
    "Import of x is not allowed"), each once, with the first step that hit it. Shown to the analyzer as an
    environment limit, not an agent's judgement: the run died on the import, not on the agent's reasoning,
    and a fix of the step that imported it must do without it."""
    found: dict[str, str] = {}
    for s in trajectory.steps:
        for text in (s.content, s.observation or ""):
            for m in _MISSING_MODULE.finditer(text or ""):
                module = (m.group("a") or m.group("b") or "").split(".")[0]
                if module and module not in found:
                    why = "is not allowed by the framework" if m.group("b") else "is not installed in the sandbox"
                    found[module] = f"module {module!r} {why} (step {s.index}, {s.agent}: {m.group(0)[:120]})"
    return list(found.values())


def answer_leaks(asked: Sequence[Asked]) -> list[Asked]:
    """The answers refused for handing over the reference answer (`answer_leak`), among a search's calls."""
    return [x for x in asked if (x.problem or "").startswith("answer_leak:")]


# ------------------------------------------------------------------------------------ a diagnosis


class TaskContext(BaseModel):
    """What the analyzer is told besides the run: the task, its ground truth, environment feedback."""

    model_config = ConfigDict(extra="forbid")

    question: str = ""
    ground_truth: str | None = None
    feedback: str | None = None
    """Environment feedback beyond Omega's verdict (test output, tool errors); appended to it."""
    task: Task | None = None
    """The benchmark task (its verifier compares a fix's answer with the step's); a collected run's own
    `recording.task` by default."""

    @classmethod
    def of(cls, trajectory: Trajectory) -> "TaskContext":
        return cls(question=trajectory.question, ground_truth=trajectory.ground_truth,
                   task=None if trajectory.recording is None else trajectory.recording.task)


class Diagnosis(BaseModel):
    """One analyzer proposal that passed validation."""

    model_config = ConfigDict(extra="forbid")

    step: int
    agent: str
    reason: str = ""
    fix: str = ""
    tool_calls: list[dict[str, Any]] | None = None
    declined: bool = False
    """Step-specific prompt only: the analyzer judged the step correct (nothing to replay)."""
    instruction: str | None = None
    """The analyzer's description of the change when it described the fix instead of writing it; `fix` is
    then the step written for it (`written`)."""
    written: Literal["retake", "rewrite", "reference", "answer", "calls"] | None = None
    """How a described fix was written: the step taken again by the analyzer's model in the agent's seat
    (`retake_step`), the analyzer's description made in the step's message (`rewrite_step`), the step's
    failing code replaced by the task's reference solution (`FixProposer.from_reference`), the wrong answer it
    first stated replaced by the task's answer (`FixProposer.from_answer`), or its calls replaced by the ground truth's
    of the user turn the run failed at (`FixProposer.from_calls`)."""
    source: Literal["ranked", "earlier", "sequential", "prior", "grounded", "joint"] = "ranked"


class NoAgentError(BaseModel):
    """The analyzer's finding that no agent erred: the run's answer is right and the check is wrong."""

    model_config = ConfigDict(extra="forbid")

    reason: str = ""
    answer_step: int | None = None
    """The step that gives the right answer (None: the final answer)."""
    confirmed: str | None = None
    """Where the task's verifier itself accepts that step's answer (`right_answer_in`), or None."""


def failed_turn(verdict: Verdict | None) -> int | None:
    """The user turn a failed multi-turn run failed at (`details["turn"]`, BFCL's checker: 0-based), or None
    (a success, or a verdict that names no turn)."""
    turn = (verdict.details or {}).get("turn") if verdict is not None and not verdict.success else None
    return turn if isinstance(turn, int) and not isinstance(turn, bool) else None


def failure_horizon(trajectory: Trajectory, verdict: Verdict | None) -> int:
    """The position after the last step that can have decided the failure: the end of the user turn at which the
    verdict says the run failed (`failed_turn`, BFCL's checker: it checks each turn's state and responses
    after that turn, so no later step changes a failed turn's check), when the steps say their turn
    (`metadata["turn"]`); the whole run otherwise."""
    failed_at = failed_turn(verdict)
    if failed_at is None:
        return len(trajectory.steps)
    for step in trajectory.steps:
        turn = step.metadata.get("turn")
        if isinstance(turn, int) and turn > failed_at:
            return step.index
    return len(trajectory.steps)


def agent_step_at(trajectory: Trajectory, raw_step: Any, field: str, expect: int | None = None,
                  changed: str = "corrected", horizon: int | None = None) -> tuple[Step | None, str | None]:
    """The agent step a proposal's `field` names, or the problem to state: not an integer, not the step asked
    about (`expect`), no such step, not an agent step (only agent steps can be `changed`), or a step at or after
    `horizon` (`failure_horizon`: after the turn the run failed at, it cannot have decided the failure)."""
    n = len(trajectory.steps)
    index = as_index(raw_step)
    if index is None:
        return None, f"{field} must be an integer step number, got {raw_step!r}"
    if expect is not None and index != expect:
        return None, f"you were asked about step {expect}, not step {index}; {field} must be {expect}"
    if not 0 <= index < n:
        return None, f"step {index} does not exist: the run has steps 0..{n - 1}"
    step = trajectory.steps[index]
    if step.kind != "agent":
        agent_steps = [s.index for s in trajectory.steps if s.kind == "agent"]
        return None, (f"step {index} is a {step.kind} step (by {step.agent}), not an agent step; only agent steps can "
                      f"be {changed} (agent steps: {agent_steps})")
    if horizon is not None and index >= horizon:
        before = [s.index for s in trajectory.steps[:horizon] if s.kind == "agent"]
        return None, (f"step {index} is in user turn {step.metadata.get('turn')}, after the turn at which the run failed "
                      f"(the check of that turn decides the verdict): only a step before step {horizon} can have "
                      f"decided it (agent steps: {before})")
    return step, None


def _check_step(trajectory: Trajectory, raw_step: Any, raw_agent: Any, expect: int | None,
                horizon: int | None = None) -> tuple[Step | None, str | None]:
    step, problem = agent_step_at(trajectory, raw_step, "mistake_step", expect, horizon=horizon)
    if step is None:
        return None, problem
    if not isinstance(raw_agent, str) or not raw_agent.strip():
        return None, f"mistake_agent is missing; step {step.index} was taken by {step.agent}"
    if match_agent(raw_agent, [step.agent]) is None:
        return None, f"step {step.index} was taken by {step.agent}, not by {raw_agent!r}"
    return step, None


def plain_tool_calls(raw: Any) -> list[dict[str, Any]] | None:
    """Tool calls as `{"name", "arguments"}` with the arguments an object where they parse as one: from a list of
    calls, or one call, in that form or the OpenAI one (`{"function": {"name", "arguments": "<json>"}}`); None for
    anything that is not calls."""
    items = raw if isinstance(raw, list) else [raw]
    if not items or not all(isinstance(item, dict) for item in items):
        return None
    calls = []
    for item in items:
        function = item["function"] if isinstance(item.get("function"), dict) else item
        name, arguments = function.get("name"), function.get("arguments", {})
        if not isinstance(name, str) or not name.strip() or "arguments" not in function and function is item:
            return None  # `{"name": ...}` alone is not read as a call: it may name an agent
        if isinstance(arguments, str):
            try:
                parsed = json.loads(arguments or "{}")
            except json.JSONDecodeError:
                parsed = arguments
            arguments = parsed if isinstance(parsed, dict) else arguments
        calls.append({"name": name, "arguments": arguments})
    return calls


_APPROVED = re.compile(r"\bAPPROVED\b")
_FAILED_RUN = re.compile(r"\Aexit code [1-9]\d*|\Atimed out\b|^Traceback \(most recent call last\)|^\w*Error\b.*$", re.MULTILINE)
_NUMBERED = re.compile(r"^(?:\d+[.)]|[-*])\s+")


def written_calls(text: str, tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """`text` read as calls (`{"name", "arguments"}`) of the offered `tools` when it is nothing but such calls, one
    per line, each of literals (`parse_call`; a code fence, list markers, backticks and a closing `;` allowed),
    a positional argument named by its place in the function's parameters as offered (the order the writer
    saw); None when any line is something else
    (prose, a call of a function not offered, an unknown or a repeated parameter, too many arguments). On the
    AFlow BFCL run multi_turn_base_146 (2026-11-29) the 1.5B analyzer ranked the caller's step 11, which had
    written `remove_stock_from_watchlist("ZETA")` as text instead of calling it, and gave that same text as its
    fix: refused as the step unchanged, where the call itself was the correction."""
    params: dict[str, list[str]] = {}
    for tool in tools:
        inner = tool.get("function")
        function: dict[str, Any] = inner if isinstance(inner, dict) else tool
        name = function.get("name")
        properties = (function.get("parameters") or {}).get("properties") or {}
        if isinstance(name, str) and isinstance(properties, dict):
            params[name] = list(properties)
    body = text.strip()
    blocks = code_blocks(body)
    if len(blocks) == 1 and blocks[0].start == 0 and blocks[0].end == len(body):  # the whole text one fenced block
        body = blocks[0].code
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    calls = []
    for line in lines:
        line = _NUMBERED.sub("", line).strip().strip("`").strip().rstrip(";").strip()
        try:
            name, positional, keywords = parse_call(line)
        except ValueError:
            return None
        names = params.get(name)
        if names is None or len(positional) > len(names):
            return None
        arguments = dict(zip(names, positional))
        if any(k in arguments or k not in names for k in keywords):
            return None
        calls.append({"name": name, "arguments": {**arguments, **keywords}})
    return calls or None


def _fix_text(fix: Any) -> Any:
    """`suggested_fix` as text when the model wrapped the text in an object of one field: `{"code": "..."}` (the
    1.5B's fix of AG2 critic and coder steps, main job of 2026-11-28, GSM8K test-474, refused twice as empty) is
    that code in a Python block; `{"text" | "content" | "message": "..."}` is the text. Anything else is left as
    it is (and refused as not text)."""
    if isinstance(fix, dict) and len(fix) == 1:
        (key, value), = fix.items()
        if isinstance(value, str) and value.strip():
            if key == "code":
                return value if code_blocks(value) else f"```python\n{value.strip()}\n```"
            if key in ("text", "content", "message"):
                return value
    return fix


def validate_diagnosis(
    trajectory: Trajectory,
    answer: str,
    *,
    expect_step: int | None = None,
    may_decline: bool = False,
    tested: set[tuple[int, str]] | None = None,
    fix_problem: Callable[[Step, str], str | None] | None = None,
    rewrite: bool = False,
    horizon: int | None = None,
    read_calls: Callable[[Step, str], list[dict[str, Any]] | None] | None = None,
) -> tuple[Diagnosis | NoAgentError | None, str | None]:
    """Parse and check an analyzer answer; `(Diagnosis, None)` or `(None, the problem to state)`.

    Checks, in order: a JSON object; `no_agent_error: true` (the whole-run diagnosis only, with the
    `answer_step` that gives the right answer, or null for the final answer) is a `NoAgentError`;
    (with `may_decline`) `fix_needed: false` is a valid decline;
    the step is an integer, is `expect_step` when given, exists, is an agent step and comes before `horizon`
    (`failure_horizon`); the agent is the
    one who took it (case and punctuation ignored); the fix is non-empty, differs from the step as
    recorded (an unchanged step would replay the same failure) and was not tested already; with
    `fix_problem` (the search's checks against the task: `_Search.fix_problem`), whatever problem it names
    (an `answer_leak:`, a `wrong_answer:`). With `rewrite`, a fix that describes the change
    (`described_change`) is not a problem: the diagnosis comes back with it as `instruction` and no `fix`,
    for the caller to have the step rewritten (`rewrite_step`) and checked (`check_fix`). With `read_calls`
    (`step, text -> calls or None`: `written_calls` over the tools the step's agent was offered), a fix that is
    only calls written as text is those calls (`tool_calls`, the step's text empty), as a fix in
    `suggested_tool_calls` or the calls' own JSON form in `suggested_fix` is.
    """
    data, problem = json_object(answer)
    if data is None:
        return None, problem
    if data.get("no_agent_error") is True:
        if expect_step is not None:
            return None, "no_agent_error is only allowed in the diagnosis of the whole run; here answer about this step"
        raw = data.get("answer_step")
        index = None if raw in (None, "final", "final answer") else as_index(raw)
        if raw not in (None, "final", "final answer") and (index is None or not 0 <= index < len(trajectory.steps)):
            return None, (f"answer_step must be the number of the step that gives the right answer (0.."
                          f"{len(trajectory.steps) - 1}) or null for the final answer, got {raw!r}")
        return NoAgentError(reason=str(data.get("reason") or ""), answer_step=index), None
    if may_decline and data.get("fix_needed") is False:
        if expect_step is None:
            return None, "fix_needed false is only allowed when asked about one step"
        asked = trajectory.steps[expect_step]
        return Diagnosis(step=asked.index, agent=asked.agent, reason=str(data.get("reason") or ""), declined=True,
                         source="earlier"), None
    for key in ("mistake_step", "mistake_agent", "suggested_fix"):
        if key not in data:
            return None, f"the JSON object has no {key!r} key"
    step, problem = _check_step(trajectory, data["mistake_step"], data["mistake_agent"], expect_step, horizon)
    if step is None:
        return None, problem
    tool_calls = data.get("suggested_tool_calls")
    in_fix = plain_tool_calls(data["suggested_fix"]) if tool_calls is None else None
    # the 1.5B writes the step's call in `suggested_fix` ({"name", "arguments"} or the OpenAI form: AG2 BFCL runs of
    # 2026-11-29, refused twice as empty text): the calls are the fix, the step's text is left empty
    fix, tool_calls = ("", in_fix) if in_fix is not None else (_fix_text(data["suggested_fix"]), tool_calls)
    written = (read_calls(step, fix) if read_calls is not None and tool_calls is None and isinstance(fix, str)
               and fix.strip() else None)
    if written is not None:  # the calls written out as text, at a step whose agent had them as tools: the calls
        fix, tool_calls = "", written
    if tool_calls is not None and not (isinstance(tool_calls, list)
                                       and all(isinstance(t, dict) and (t.get("name") or t.get("function"))
                                               for t in tool_calls)):
        return None, "suggested_tool_calls, when given, must be a list of {\"name\": ..., \"arguments\": {...}} objects"
    if not isinstance(fix, str) or (not fix.strip() and tool_calls is None):
        return None, "suggested_fix must be the non-empty corrected text of the step"
    reason = str(data.get("reason") or "")
    if rewrite and fix.strip() and tool_calls is None and described_change(fix, step.agent) is not None:
        return Diagnosis(step=step.index, agent=step.agent, reason=reason, instruction=fix), None
    problem = check_fix(step, fix, tool_calls, tested=tested, fix_problem=fix_problem)
    if problem is not None:
        return None, problem
    return Diagnosis(step=step.index, agent=step.agent, reason=reason, fix=fix, tool_calls=tool_calls), None


def check_fix(step: Step, fix: str, tool_calls: list[dict[str, Any]] | None = None, *,
              tested: set[tuple[int, str]] | None = None,
              fix_problem: Callable[[Step, str], str | None] | None = None) -> str | None:
    """Why `fix` cannot replace `step` (see `validate_diagnosis`), or None."""
    not_itself = not_the_step_itself(fix, step.agent, "suggested_fix") if fix.strip() else None
    if not_itself is not None:
        return not_itself
    if same_work(fix, step.content) and tool_calls is None:
        return (f"suggested_fix is what step {step.index} already says (the same code and text, comments and layout "
                "aside); a correction must change what the step does")
    if (tool_calls is not None and same_work(fix, step.content)
            and (plain_tool_calls(tool_calls) or []) == (plain_tool_calls(step.tool_calls) or [])):
        return (f"the fix makes the calls step {step.index} already made, with the same arguments; a correction must "
                "change what the step calls or with which arguments")
    if tested and (step.index, work_key(fix)) in tested and tool_calls is None:
        return f"this exact fix of step {step.index} was already tested and the run still failed"
    return fix_problem(step, fix) if fix_problem is not None and fix.strip() else None




# ------------------------------------------------------------------------------------ the analyzer's fixes


class FixProposer:
    """The counterfactual search's proposals: the analyzer asked for a diagnosis of the run (`ask_ranked`) or of
    one step (`ask_at`), each fix checked against the step and the task (`fix_problem`), a described change
    written out (`written`). `failed` and `tested` are what the search has replayed so far (shown to the
    analyzer; a tested fix is not proposed again)."""

    def __init__(self, trajectory: Trajectory, verdict: Verdict | None, context: TaskContext, analyzer: ChatLike,
                 meter: Meter, asked: list[Asked], notes: list[str], max_prompt_chars: int, verify: Verify | None,
                 run_program: RunProgram | None, step_request: StepRequest | None,
                 step_tools: StepTools | None = None):
        self.trajectory = trajectory
        self.horizon = failure_horizon(trajectory, verdict)
        self.failed_at = failed_turn(verdict)
        self.task = context.task
        self.verify = verify
        self.run_program = run_program
        self.verify_text = functools.lru_cache(maxsize=256)(
            lambda text: None if self.task is None or self.verify is None else verify_quietly(self.verify, self.task, text))
        """The task's verifier on a text, once per text per search (a coding task's runs its tests in a sandbox)."""
        self.analyzer, self.meter, self.asked, self.notes = analyzer, meter, asked, notes
        self.step_request, self.step_tools = step_request, step_tools
        feedback = verdict_feedback(verdict)
        if context.feedback:
            feedback += "\n" + context.feedback
        turn = failed_turn(verdict)
        if turn is not None and self.horizon < len(trajectory.steps):
            feedback += (f"\nMULTI-TURN: the verifier checks the run after each user turn; it failed at user turn {turn} "
                         f"(0-based), whose last step is step {self.horizon - 1}. Look for the first wrong step up to "
                         "there: a fix counts when it gets the run past that turn.")
        limits = environment_limits(trajectory)
        if limits:
            feedback += ("\nENVIRONMENT LIMITS (what the run's code could not use; the run failed on the environment "
                         "there, and a corrected step must do without it):\n" + "\n".join(f"- {x}" for x in limits))
        self.base: dict[str, Any] = {
            "question": context.question or trajectory.question,
            "ground_truth": context.ground_truth if context.ground_truth is not None else trajectory.ground_truth,
            "feedback": feedback,
            "steps": render_steps(trajectory, max_prompt_chars=max_prompt_chars, compact=True)[0],
            "agents": trajectory.agents,
        }
        """What every analyzer prompt of the search shows (the same prefix: the engine's prompt cache serves it)."""
        self.retakes: dict[int, tuple[str | None, str | None]] = {}
        """Each step's retake (`retake_step`), asked once per search: its request is the agent's recorded one,
        whatever the diagnosis, so a second retake of the step is the first one again (on the main job's GSM8K
        test-474 the 1.5B's retake looped to its 856-token room twice, 89 s and 139 s, the same answer)."""

    def ask_ranked(self, failed: list[dict[str, Any]], tested: set[tuple[int, str]]) -> tuple[Diagnosis | NoAgentError | None, str | None]:
        def validate(answer: str) -> tuple[Diagnosis | NoAgentError | None, str | None]:
            return validate_diagnosis(self.trajectory, answer, tested=tested, fix_problem=self.fix_problem, rewrite=True,
                                      horizon=self.horizon, read_calls=self.read_calls)

        found: tuple[Diagnosis | NoAgentError | None, str | None] = ask_valid(
            self.analyzer,
            lambda prev, problem: render("analyzer.j2", **self.base, failed=failed, previous_answer=prev, problem=problem),
            validate, self.meter, self.asked, "analyzer.j2",
        )
        diagnosis, why = found
        if isinstance(diagnosis, Diagnosis):
            return self.written(diagnosis, tested)
        last = self.asked[-1] if self.asked and self.asked[-1].prompt_name == "analyzer.j2" else None
        if diagnosis is None and last is not None and (last.problem or "").startswith(("wrong_code", "wrong_answer")):
            return self.reference_instead(last.answer, tested, why)
        return diagnosis, why

    def ask_at(self, step: Step, failed: list[dict[str, Any]], tested: set[tuple[int, str]], *, require_fix: bool,
               source: Literal["earlier", "sequential", "prior"],
               passed: Collection[int] = ()) -> tuple[Diagnosis | None, str | None]:
        """The correction of `step` (or its judgement as correct) in the scan: the task's own where it gives one
        (reference solution, ground-truth calls, its answer in place of a wrong one that no step outside `passed`
        stated before), a right answer cleared, else the analyzer's fix of it."""
        retaken = self.retaken_empty(step)
        if retaken is not None:  # nothing to correct: the agent's next step does the work it left undone
            self.notes.append(f"step {step.index} ({step.agent}) {retaken}: judged no error, the analyzer not asked")
            return Diagnosis(step=step.index, agent=step.agent, declined=True, source=source, reason=retaken), None
        sent_back = self.sends_back_failing(step)
        if sent_back is not None:  # the tests already judged the code it sent back
            self.notes.append(f"step {step.index} ({step.agent}) {sent_back}: judged correct, the analyzer not asked")
            return Diagnosis(step=step.index, agent=step.agent, declined=True, source=source, reason=sent_back), None
        referenced = self.referenced(step, tested, source)
        if referenced is not None:  # the tests already judged the step; its correction is the task's own code
            self.notes.append(f"step {step.index} ({step.agent}) has code that fails the task's tests: corrected with "
                              "the task's reference solution, the analyzer not asked")
            return referenced, None
        called = self.called(step, source)
        if called is not None:  # the checker already judged the turn; the step's correction is the turn's own calls
            return called, None
        right = self.right_answer(step)
        if right is not None:  # the verifier already judged it: cleared, no call
            self.notes.append(f"step {step.index} ({step.agent}) states the answer {right!r}, which the verifier "
                              "accepts: judged correct, the analyzer not asked")
            return Diagnosis(step=step.index, agent=step.agent, declined=True, source=source,
                             reason=f"it states the answer {right!r}, which the task's verifier accepts"), None
        caught = self.right_tests(step)
        if caught is not None:  # the reference solution already judged the tests: cleared, no call
            self.notes.append(f"step {step.index} ({step.agent}) {caught}: judged correct, the analyzer not asked")
            return Diagnosis(step=step.index, agent=step.agent, declined=True, source=source, reason=caught), None
        answered = self.answered(step, tested, source, passed=passed)
        if answered is not None:  # the verifier already judged it; its correction is the task's own answer
            return answered, None
        wrong = None if require_fix else self.wrong_answer(step.content)
        if wrong is not None:
            require_fix = True  # not "is it correct?": the verifier already answered that
            self.notes.append(f"step {step.index} ({step.agent}) states the answer {wrong!r}, which the verifier rejects: "
                              "asked for its correction, not whether it is correct")
        looping = None if require_fix else looping_tail(step.content)
        if looping is not None:
            require_fix = True  # a message that never ended is not a correct step; its loop-free retake is tried
            self.notes.append(f"step {step.index} ({step.agent}) repeats a {looping.period}-character block back to back "
                              f"to its end ({looping.copies(len(step.content)):.0f} times): asked for its correction, "
                              "not whether it is correct")
        failing = None if require_fix else self.failing_code(step.content)
        if failing is not None:
            require_fix = True
            self.notes.append(f"step {step.index} ({step.agent}) has code that fails the task's tests ({failing}): "
                              "asked for its correction, not whether it is correct")
        asserted = None if require_fix else false_assertion(step.content)
        if asserted is not None:
            require_fix = True  # a test that asserts a false identity is wrong whatever the code under it
            self.notes.append(f"step {step.index} ({step.agent}) asserts `{asserted}`, which is false: asked for its "
                              "correction, not whether it is correct")
        approved = None if require_fix else self.approves_failure(step)
        if approved is not None:
            require_fix = True  # accepting a run that failed is not a correct review, whatever the code
            self.notes.append(f"step {step.index} ({step.agent}) approves after {approved}: asked for its correction, "
                              "not whether it is correct")
        shown = next(s for s in self.base["steps"] if s["index"] == step.index)
        shown = {**shown, "content": shown["full"]}  # the step asked about, whole (the run shows it compact)
        def validate(answer: str) -> tuple[Diagnosis | None, str | None]:
            found, problem = validate_diagnosis(self.trajectory, answer, expect_step=step.index, may_decline=not require_fix,
                                                tested=tested, fix_problem=self.fix_problem, rewrite=True,
                                                horizon=self.horizon, read_calls=self.read_calls)
            assert not isinstance(found, NoAgentError)  # only the whole run's diagnosis may find no agent error
            return found, problem

        diagnosis, why = ask_valid(
            self.analyzer,
            lambda prev, problem: render("analyzer_at_step.j2", **self.base, failed=failed, step=shown,
                                         require_fix=require_fix, previous_answer=prev, problem=problem),
            validate, self.meter, self.asked, "analyzer_at_step.j2",
        )
        if diagnosis is not None and not diagnosis.declined:
            diagnosis, why = self.written(diagnosis, tested)
        if diagnosis is not None:
            diagnosis = diagnosis.model_copy(update={"source": source})
        return diagnosis, why

    def read_calls(self, step: Step, text: str) -> list[dict[str, Any]] | None:
        """`text` as calls of the tools `step`'s agent was offered at that step (`written_calls`), or None (no
        tools there, or text that is not only such calls)."""
        tools = self.step_tools(step) if self.step_tools is not None else None
        return written_calls(text, tools) if tools else None

    def from_reference(self, step: Step) -> str | None:
        """`step` corrected with the task's reference solution (`metadata.reference_solution`): its code that defines
        the task's function and fails the task's tests (`failing_code`) replaced by that solution, in a Python
        block where the step's code sat (the last block defining the function; the whole step when its code is not
        fenced), the rest of its message kept; None for a task that is not coding, no reference, or a step without
        such code. A step whose code fails the tests gave a wrong answer, so its correction hands nothing over
        (`answer_leak`). On the 2026-11-29 slice (seed 17) the 1.5B wrote no passing `special_factorial` for
        HumanEval/139 in its retakes and rewrites: AG2's and AgentPrune's searches ended with 0 replays, the
        first code-writing step left open; the main job's MBPP 310 likewise (`tuple(s)` kept in every retake)."""
        if self.task is None or self.task.kind != "coding":
            return None
        reference, entry = self.task.metadata.get("reference_solution"), self.task.metadata.get("entry_point")
        if not isinstance(reference, str) or not reference.strip() or not entry or self.failing_code(step.content) is None:
            return None
        every = code_blocks(step.content)
        blocks = [b for b in every if writes(b.code, str(entry))]
        if not blocks:
            tagged = any(b.tagged for b in every)
            return f"<code>\n{reference.strip()}\n</code>" if tagged else f"```python\n{reference.strip()}\n```"
        return step.content[:blocks[-1].start] + blocks[-1].written(reference) + step.content[blocks[-1].end:]

    def grounded(self, tested: set[tuple[int, str]]) -> Diagnosis | None:
        """The correction the task itself gives of the first agent step that has one, before the failure horizon: its
        code fails the task's tests and the task has a reference solution (`referenced`), its calls are where the
        failed user turn's calls leave the turn's ground truth (`called`), or it is the first to state the run's
        wrong answer (`answered`); None when no step has one. Only the first such step: any later one needs
        the steps before it examined first. The step the run's final answer came from is not given the task's answer
        here: there the substitution would be the whole answer handed over, and a verifier that misread a right answer
        is the analyzer's to say (`NoAgentError`)."""
        final = answer_step(self.trajectory)
        for step in self.trajectory.steps[:self.horizon]:
            if step.kind != "agent":
                continue
            found = self.referenced(step, tested, "grounded") or self.called(step, "grounded")
            if found is None and (final is None or final.index != step.index):
                found = self.answered(step, tested, "grounded")
            if found is not None:
                if found.written == "reference":
                    self.notes.append(f"step {step.index} ({step.agent}) has code that fails the task's tests: "
                                      "corrected with the task's reference solution before the analyzer was asked")
                return found
        return None

    def referenced(self, step: Step, tested: set[tuple[int, str]],
                   source: Literal["ranked", "earlier", "sequential", "prior", "grounded"]) -> Diagnosis | None:
        """The diagnosis that `step`'s failing code is the error, corrected `from_reference`, when that fix passes
        `check_fix` (not tested already); else None."""
        fix = self.from_reference(step)
        if fix is None or check_fix(step, fix, tested=tested, fix_problem=self.fix_problem) is not None:
            return None
        return Diagnosis(step=step.index, agent=step.agent, fix=fix, written="reference", source=source,
                         reason=f"its code fails the task's tests ({self.failing_code(step.content)})")

    def reference_instead(self, answer: str, tested: set[tuple[int, str]],
                          why: str | None) -> tuple[Diagnosis | None, str | None]:
        """The analyzer's last ranked answer, refused (re-asks spent) because its fix's code fails the tests
        (`wrong_code`) or states a wrong answer (`wrong_answer`), named a step whose own code fails them or that first
        states the run's wrong answer: that step corrected `from_reference` (`answered`) instead, the analyzer's
        reason kept. Else `(None, why)`."""
        data, _ = json_object(answer)
        step = None if data is None else _check_step(self.trajectory, data.get("mistake_step"), data.get("mistake_agent"),
                                                     None, self.horizon)[0]
        found = None if step is None else (self.referenced(step, tested, "ranked")
                                           or self.answered(step, tested, "ranked", why))
        if data is None or found is None:
            return None, why
        if found.written == "reference":
            self.notes.append(f"the ranked fix of step {found.step} failed the task's tests: corrected with the task's "
                              "reference solution")
        return found.model_copy(update={"reason": str(data.get("reason") or found.reason)}), None

    def turn_steps(self, turn: int) -> list[CallStep]:
        """The agent steps of user `turn` that had the functions as tools (the tools their recorded request offered,
        `step_tools`; without a recording, steps of the agents that called any), each with the calls its tools ran."""
        callers = {s.agent for s in self.trajectory.steps if s.kind == "agent" and s.tool_calls}
        out = []
        for step in self.trajectory.steps:
            if step.kind != "agent" or step.metadata.get("turn") != turn:
                continue
            offered = bool(self.step_tools(step)) if self.step_tools is not None else step.agent in callers
            if not offered:
                continue
            ran = [s for s in self.trajectory.steps if s.kind == "tool" and s.metadata.get("asked_by") == step.index]
            executed = [str(s.metadata["call"]) for s in ran if s.metadata.get("executed") and isinstance(s.metadata.get("call"), str)]
            out.append(CallStep(step.index, executed, len(executed) == len(ran)))
        return out

    def passes_turn(self, turns: list[list[list[str]]], turn: int) -> bool:
        """Whether BFCL's checker passes every user turn of `turns` (the last one `turn`)."""
        if self.task is None:
            return False
        verdict = self.verify_text(calls_answer(turns))
        return verdict is not None and (verdict.success or (verdict.details.get("check") == "turns"
                                                            and verdict.details.get("turn") == turn + 1))

    def from_calls(self, step: Step) -> tuple[list[dict[str, Any]], str] | None:
        """`step`'s calls corrected with the ground truth of the user turn the run failed at (BFCL's
        `metadata.ground_truth_calls`), and why, when `step` is where that turn's calls leave the truth. The turn's
        steps that had the functions as tools (`turn_steps`) are read in order against the truth (`matching`): a step
        leaves it with a call that is not the truth's next one or did not run, or, the last of them, by ending the
        turn short. The checker judges as the tests judge a coder's code: a difference after which the truth's
        remaining calls still pass the turn did no harm (an extra read-only call; not a call that did not run, a
        mistake whatever it left undone) and the reading goes on past it; a
        step that left the truth is corrected with the truth's calls from where it started (its own calls kept
        when they did no harm and it only ended short), and the turn must pass with that. None for any other step, a
        task whose Omega does not read calls, or a correction that is no call (miss_param: the team should have
        asked). The counterpart of `from_reference` for tool use: on the 2026-11-29 BFCL runs the local 1.5B analyzer
        never wrote a call as its fix (0 labels of 7 searches), where a capable analyzer's call flipped each run."""
        task, turn = self.task, self.failed_at
        if task is None or self.verify is None or not reads_calls(task) or turn is None or step.metadata.get("turn") != turn:
            return None
        truth_turns = task.metadata.get("ground_truth_calls") or []
        if not 0 <= turn < len(truth_turns):
            return None
        truth, functions = [str(c) for c in truth_turns[turn]], task_functions(task)
        steps = self.turn_steps(turn)
        at = 0
        for i, s in enumerate(steps):
            start = at
            m = matching(s.executed, truth, start, functions)
            at = start + m
            clean, last = m == len(s.executed) and s.all_ran, i == len(steps) - 1
            if clean and not (last and at < len(truth)):
                continue  # its calls are the truth's next ones
            prior = json.loads(executed_calls_answer(self.trajectory.steps[:s.step]))["turns"]
            if len(prior) != turn + 1:
                return None
            harmless = (not clean and s.all_ran  # a call that did not run was a mistake, whatever it left undone
                        and self.passes_turn([*prior[:turn], [*prior[turn], s.executed, truth[at:]]], turn))
            if harmless and not last:
                continue  # the truth after its calls still passes: its difference did no harm
            if s.step != step.index:
                return None
            correction = [*s.executed, *truth[at:]] if harmless or clean else truth[start:]
            if not correction or not self.passes_turn([*prior[:turn], [*prior[turn], correction]], turn):
                return None
            calls = written_calls("\n".join(correction), list(functions.values()))
            if calls is None:
                return None
            missing = ", ".join(truth[at:])
            why = (f"it ended user turn {turn} without the calls the turn needs ({missing})" if harmless or clean else
                   f"its call {s.executed[m] if m < len(s.executed) else 'that did not run'} is not the next of user turn "
                   f"{turn}'s ground-truth calls ({truth[at] if at < len(truth) else 'none left'})")
            return calls, why
        return None

    def called(self, step: Step, source: Literal["ranked", "earlier", "sequential", "prior", "grounded"]) -> Diagnosis | None:
        """The diagnosis that `step`'s calls are where the failed turn went wrong, corrected `from_calls`, when the step
        did not already make exactly those calls; else None."""
        found = self.from_calls(step)
        if found is None:
            return None
        calls, why = found
        if check_fix(step, "", calls) is not None:
            return None
        self.notes.append(f"step {step.index} ({step.agent}): {why}: its calls replaced by the turn's ground-truth calls, "
                          "the analyzer not asked")
        return Diagnosis(step=step.index, agent=step.agent, fix="", tool_calls=calls, written="calls", source=source,
                         reason=why)

    def from_answer(self, step: Step, passed: Collection[int] = ()) -> str | None:
        """`step` with the wrong answer it marks (a box, an `Answer:` line, an answer phrase) replaced by the task's
        reference answer, when the step is where that answer first appears (`first_stated`; `passed`: the earlier
        steps already tried, whose statements of it do not count) and the verifier accepts
        the result, or, for a step whose answer is what its program prints, that program's output so corrected
        (`from_printed`); None otherwise (a task that is not math or QA, no reference answer, an answer the team had
        stated or printed before). The math counterpart of `from_reference`: a step
        that states a wrong answer gave one, so correcting it hands nothing over (`answer_leak`), and an earlier
        step that stated it first is where the error was (a critic repeating the coder's 28 is not corrected in
        its place). On the 2026-11-29 slice (seed 17) AgentPrune MATH-500 1508's analyst wrote `1` (wrong) and every
        fix the 1.5B wrote of it stated 1 again: the step was left open and the scan stopped there."""
        if self.task is None or self.task.kind not in ("math", "qa") or not (self.task.ground_truth or "").strip():
            return None
        if not self.first_stated(step, passed):
            return None
        truth = str(self.task.ground_truth).strip()
        printed = program_output(step.content, self.run_program)
        if printed is not None:
            return self.from_printed(step, printed, truth)
        marked = [span for span, method in answer_spans(step.content) if method in ("boxed", "answer_line", "answer_phrase")]
        if not marked:
            return None
        return self.replaced(step.content, marked[0], truth, lambda fixed: fixed)

    def replaced(self, text: str, span: str, truth: str, as_step: Callable[[str], str],
                 check: Callable[[str], Verdict | None] | None = None) -> str | None:
        """`as_step(text with one of the last occurrences of `span` replaced by `truth`)` for the first occurrence, from
        the last, whose result the verifier accepts (`check`, by default `stated`); None when none does."""
        at = [m.start() for m in re.finditer(re.escape(span), text)]
        for start in reversed(at[-5:]):  # the span as it is marked: `\boxed{28}. So Ahito ran 28 miles` has two 28s
            fixed = as_step(text[:start] + truth + text[start + len(span):])
            verdict = (check or self.stated)(fixed)
            if verdict is not None and verdict.success:
                return fixed
        return None

    def from_printed(self, step: Step, printed: str, truth: str) -> str | None:
        """`from_answer` for a step whose answer is what its program prints (AG2's coder: `print(f"Answer: {x}")`, run
        by the executor): its Python blocks replaced by one program that prints what the step's program printed with
        the wrong answer replaced by the task's answer, the prose around them kept. The step's own computation would
        have to change to print the right answer; the counterfactual asks whether the team succeeds from a step that
        gives the right answer, as the marked answer's substitution does. On the main job (2026-12-01) every fix the
        1.5B wrote of GSM8K test-474's coder step 1 (its program assumes 100 students and prints `Answer: 25.0`)
        printed 25.0 or 26.67 again, and the search ended with no replay."""
        wrong = self.wrong_answer(step.content)
        if wrong is None:
            return None
        blocks = [b for b in code_blocks(step.content) if b.python]
        if not blocks:
            return None
        text = step.content

        def as_step(output: str) -> str:
            program = blocks[0].written(f"print({output!r})")
            kept = text[:blocks[0].start] + program
            for before, after in zip(blocks, blocks[1:]):
                kept += _claimed_output(text[before.end:after.start], output)
            return kept + _claimed_output(text[blocks[-1].end:], output)

        spans = [wrong, *(s for s, _ in answer_spans(printed) if s != wrong)]
        for span in spans:
            if span and span in printed:
                fixed = self.replaced(printed, span, truth, as_step)
                if fixed is not None:
                    return self.prose_corrected(fixed, truth)
        return None

    def prose_corrected(self, text: str, truth: str) -> str:
        """`text`, whose program now prints the right answer, with the wrong answer its prose still marks (a box, an
        `Answer:` line, an answer phrase, read with the code left out) replaced by `truth` too, an occurrence from
        the last at a time (`replaced`), at most three answers. A corrected program under a prose box of the old
        answer is a step that contradicts itself, and the next agent copies the box: on the seed-53 slice
        (2026-12-04) AG2 MATH-500 precalculus/356's critic step 3, given `print('y = -2x')` under its
        `\\boxed{y = 2x + y}`, was carried on wrong by the coder, and the label went to the coder's restatement."""
        def prose(t: str) -> Verdict | None:
            return self.stated(without_code(t))

        for _ in range(3):
            verdict = prose(text)
            wrong = None if verdict is None or verdict.success else verdict.details.get("extracted")
            if not wrong:
                return text
            fixed = self.replaced(text, str(wrong), truth, lambda t: t, check=prose)
            if fixed is None:
                return text
            text = fixed
        return text

    def first_stated(self, step: Step, passed: Collection[int] = ()) -> bool:
        """`step` states a wrong answer (`wrong_answer`) that no earlier step stated or printed (`same_answer`
        against each earlier agent step's text and each tool step's printed output), leaving out the agent steps in
        `passed` and the tool steps after them (what their programs printed). The scan passes the steps it already
        tried: once the first statement's correction was replayed and failed, a step that states the answer again is
        where the team could still have been turned, and its correction is the task's answer as the first one's was
        (seed-31 slice, 2026-12-02: smolagents MATH-500 572's manager stated 108 at step 1, its corrections failed,
        step 2 said 108 again, and every fix the 1.5B wrote of it said 108: the step was left open and the scan
        stopped)."""
        if self.task is None or self.verify is None or self.wrong_answer(step.content) is None:
            return False
        by_passed = False
        for s in self.trajectory.steps[:step.index]:
            if s.kind == "agent":
                by_passed = s.index in passed
                if by_passed:
                    continue
                earlier = s.content
            elif s.kind in ("tool", "environment"):
                if by_passed:
                    continue
                printed = printed_output(s.observation or s.content or "")
                earlier = f"Program output:\n{printed}" if printed else ""
            else:
                continue
            if earlier.strip() and same_answer(self.task, earlier, step.content, self.verify, self.run_program) is not None:
                return False
        return True

    def answered(self, step: Step, tested: set[tuple[int, str]],
                 source: Literal["ranked", "earlier", "sequential", "prior", "grounded"],
                 why: str | None = None, passed: Collection[int] = ()) -> Diagnosis | None:
        """The diagnosis that `step`'s wrong answer is the error, corrected `from_answer`, when that correction passes
        `check_fix` (not tested already); else None. In the scan it is the step's correction, with no analyzer call,
        as failing code's is the reference solution (`referenced`): an earlier step given only the 1.5B's weaker
        fixes and a later one given the reference answer would move labels later (AgentPrune MATH-500 183, seed 23:
        the solver's step 1 boxed the wrong 3 that the run ended with; its fixes were replayed and failed, and the
        programmer's `{0, 1, 2}` at step 2, given `(2, \\infty)`, flipped). `why`: the ranked fix's refusal it
        replaces."""
        fix = self.from_answer(step, passed)
        if fix is None or check_fix(step, fix, tested=tested, fix_problem=self.fix_problem) is not None:
            return None
        wrong = self.wrong_answer(step.content)
        first = self.first_stated(step)
        states = "first states" if first else "states again"
        self.notes.append(f"step {step.index} ({step.agent}) {states} the wrong answer {wrong!r}, which the verifier "
                          "rejects" + ("" if first else " (the earlier steps that stated it were tried)")
                          + ": its answer replaced by the task's reference answer"
                          + (f" (the analyzer's fix was refused: {why})" if why else ", the analyzer not asked"))
        reason = (f"it is the first step to state the wrong answer {wrong!r}" if first else
                  f"it states the wrong answer {wrong!r} again after the earlier steps that stated it were tried (their "
                  "corrections failed or were not the cause)")
        return Diagnosis(step=step.index, agent=step.agent, fix=fix, written="answer", source=source, reason=reason)

    def written(self, diagnosis: Diagnosis, tested: set[tuple[int, str]]) -> tuple[Diagnosis | None, str | None]:
        """`diagnosis` with its fix written out. A described change (`instruction`) is the analyzer's finding
        that step t is wrong without the message that corrects it: the step is taken again by the analyzer's
        model in the agent's seat from the agent's recorded request (`retake_step`), else the description is
        made in the step's message (`rewrite_step`); what comes out is checked as any fix (`check_fix`)."""
        if diagnosis.instruction is None or diagnosis.fix:
            return diagnosis, None
        step = self.trajectory.steps[diagnosis.step]
        tries: list[tuple[Literal["retake", "rewrite", "reference", "answer"], Callable[[], tuple[str | None, str | None]]]] = []
        reference = self.from_reference(step)
        if reference is not None:  # no model call: the task's own code where the step's failed the tests
            tries.append(("reference", lambda: (reference, None)))
        messages = self.step_request(step) if self.step_request is not None else None
        if messages:
            tries.append(("retake", lambda: self.retake(step, messages, tested)))
        tries.append(("rewrite", lambda: rewrite_step(self.analyzer, step, diagnosis.instruction or "", diagnosis.reason,
                                                      self.base["question"], self.meter, self.asked)))
        tries.append(("answer", lambda: (self.from_answer(step), "its answer is not the first statement of a wrong answer")))
        whys = []
        for how, write in tries:
            text, why = write()
            if text is not None:
                why = check_fix(step, text, tested=tested, fix_problem=self.fix_problem)
                if why is None:
                    return diagnosis.model_copy(update={"fix": text, "written": how}), None
                self.asked.append(Asked(prompt_name=f"{how}_step", answer=text, problem=why))
            whys.append(f"{how}: {why}")
        return None, f"the described fix of step {step.index} could not be written out ({'; '.join(whys)})"

    def retake(self, step: Step, messages: list[dict[str, Any]],
               tested: set[tuple[int, str]]) -> tuple[str | None, str | None]:
        """`step` retaken in its agent's seat, once per search (`retakes`), each answer checked as a fix (a refused
        one is re-asked once with the problem stated)."""
        if step.index not in self.retakes:
            self.retakes[step.index] = retake_step(
                self.analyzer, messages, step, self.meter, self.asked,
                check=lambda text: check_fix(step, text, tested=tested, fix_problem=self.fix_problem))
        return self.retakes[step.index]

    def fix_problem(self, step: Step, fix: str) -> str | None:
        """Why `fix` cannot be the correction of `step`, checked in this order (each may run the task's verifier
        or a program): the step already states a right answer (`right_already`), the fix hands over the reference answer (`leak`), states an answer the verifier rejects
        (`wrong_answer`) or keeps the step's rejected one (`keeps_wrong_answer`), or holds code that fails the
        task's tests (`failing_code`). A wrong answer was a label: on AgentPrune MATH-500 255 (slice of
        2026-11-28) the retaken first step stated 7 where the step had stated the right 4, and the replay
        flipped anyway (the decision agent answered 4 in it): a correction does not state a wrong answer."""
        checks: list[tuple[str, Callable[[], str | None], str]] = [
            ("right_already", lambda: self.right_already(step), "{}"),
            ("answer_leak", lambda: self.leak(step, fix), "{}"),
            ("wrong_answer", lambda: self.wrong_answer(fix),
             "the fix states the answer {!r}, which the task's verifier rejects: a corrected step does not state a "
             "wrong answer"),
            ("wrong_answer", lambda: self.keeps_wrong_answer(step, fix),
             "{}: a corrected step does not keep the wrong answer"),
            ("wrong_code", lambda: self.failing_code(fix),
             "the fix's code fails the task's tests ({}): a corrected step's code passes them"),
            ("false_assertion", lambda: false_assertion(fix),
             "the fix's `{}` is false (the two sides differ): a corrected step asserts nothing false"),
        ]
        for kind, check, message in checks:
            found = check()
            if found is not None:
                return f"{kind}: {message.format(found)}"
        return None

    def leak(self, step: Step, fix: str) -> str | None:
        """`answer_leak` over the task (None without a task and verifier). The step that gave the run's final
        answer gave an answer, whatever its form (a coder's prose instead of code is a wrong answer); and a
        fix that carries forward a right answer the team itself reached before the step hands nothing over
        (`reached_before`)."""
        if self.task is None or self.verify is None:
            return None
        final = answer_step(self.trajectory)
        if final is not None and final.index == step.index:
            return None
        leaked = answer_leak(self.task, step.content, fix, self.verify, self.run_program)
        if leaked is not None and self.reached_before(step.index) is not None:
            return None
        return leaked

    def reached_before(self, index: int) -> str | None:
        """Where the team stated a right answer before step `index` (an agent step's marked answer, or what a
        tool step reports its program printed), or None. A team that had the answer and lost it later made its
        mistake after reaching it: a fix that restores the answer there is the team's own work carried on."""
        if self.task is None or self.verify is None:
            return None
        for s in self.trajectory.steps[:index]:
            if s.kind == "human":
                continue  # the task itself
            if s.kind == "agent":
                found = right_answer_in(self.task, s.content, self.verify)
            else:
                printed = printed_output(s.observation or s.content or "")
                found = right_answer_in(self.task, f"Program output:\n{printed}", self.verify,
                                        last_number=True) if printed else None
            if found is not None:
                return f"step {s.index} ({s.agent}): {found}"
        return None

    def wrong_answer(self, text: str) -> str | None:
        """The answer `text` states where the prompts ask for one (a box, an `Answer:` line, an answer phrase), or
        what its program prints when it has one and a runner is given (the program, not the prose around it:
        MetaGPT MATH-500 255's retake printed the right 4 beside a prose `Answer: 7`), when the task's verifier
        rejects it; None for no such answer, a coding task, or no verifier. A step that
        states one is not correct whatever the analyzer says: on AgentPrune MATH-500 634 (slice of 2026-11-28)
        every agent wrote `Answer: 997` (the answer is 333), the 1.5B judged all nine steps correct, and nothing
        was replayed."""
        verdict = self.stated(text)
        if verdict is None or verdict.success:
            return None
        extracted = verdict.details.get("extracted")
        return None if extracted is None else str(extracted)

    def stated(self, text: str) -> Verdict | None:
        """The task's verdict on the answer `text` states where the prompts ask for one (a box, an `Answer:` line,
        an answer phrase), or on what its program prints when it has one and a runner is given; None for no such
        answer, a coding task, or no verifier (`wrong_answer`, `right_answer`)."""
        if self.task is None or self.verify is None or self.task.kind == "coding":
            return None
        printed = program_output(text, self.run_program)
        if printed is not None:  # what its program prints, not what its prose claims it prints (as `same_answer`)
            text = f"Program output:\n{printed}"
        elif not any(method in ("boxed", "answer_line", "answer_phrase") for _, method in answer_spans(text)):
            return None
        return self.verify_text(text)

    def right_answer(self, step: Step) -> str | None:
        """The answer `step` states (`stated`) when the task's verifier accepts it, for a step that is not the one
        the run's final answer came from (that one is a reformatting case: `verifier_suspect`); else None. Such
        a step is not the error, and no fix of it is a correction: on the 2026-11-29 slice (seed 17) MetaGPT's
        coder wrote, at step 1 of MATH-500 algebra/2735, a sympy program printing the right `9*a/20 + 11/20`;
        the 1.5B "fixed" it to the wrong `\\frac{3a}{5}` in prose, the 0.5B team's replay answered right by
        chance, the control failed, and step 1 was labelled, where the team lost its right answer later."""
        final = answer_step(self.trajectory)
        if step.kind != "agent" or (final is not None and final.index == step.index):
            return None
        verdict = self.stated(step.content)
        if verdict is None or not verdict.success:
            return None
        return str(verdict.details.get("extracted", "")) or "a right answer"

    def right_tests(self, step: Step) -> str | None:
        """What clears `step` when it is a test of the task's function (`asserts_on`) whose assertions hold on the task's
        reference solution and fail on the last earlier code of the function that fails the task's tests (the tests
        caught that code's error); None otherwise (not a coding task, no reference or runner, not such a test, an
        assertion the reference fails, no earlier failing code to have caught, tests the failing code passes: too
        weak to catch the error, which may be the decisive one). On the seed-31 slice (2026-12-02) MetaGPT
        HumanEval/127's tester wrote three right assertions at step 2 that the coder's code failed; the 1.5B said it
        needed a fix, gave it unchanged, and the step was left open: the scan stopped there with one replay."""
        run_program = self.run_program
        if self.task is None or self.task.kind != "coding" or run_program is None:
            return None
        reference, entry = self.task.metadata.get("reference_solution"), self.task.metadata.get("entry_point")
        tests = python_program(step.content)
        if not isinstance(reference, str) or not reference.strip() or tests is None or not asserts_on(tests, entry):
            return None
        marker = "rootstep: the assertions hold"

        def hold(code: str) -> bool:
            try:
                out = run_program(f"{code.rstrip()}\n\n{tests}\nprint({marker!r})\n")
            except Exception:  # noqa: BLE001 - a program that cannot be run proves nothing
                return False
            return out is not None and marker in out

        if not hold(reference):
            return None
        failing = next((s for s in reversed(self.trajectory.steps[:step.index])
                        if s.kind == "agent" and self.failing_code(s.content) is not None), None)
        if failing is None or hold(build_program(failing.content, self.task)[0]):
            return None
        return (f"has assertions of the task's function that hold on the task's reference solution and fail on step "
                f"{failing.index}'s failing code (they caught its error)")

    def sends_back_failing(self, step: Step) -> str | None:
        """Why `step` is a correct review when it asks for a change (no `APPROVED`, no code of the task's function of its
        own) right after a run of the team's checks that failed (`failed_run_before`) on code that fails the task's
        tests (the last earlier step that wrote the function, `failing_code`); else None. Sending failing code back is
        what a review is for: on the seed-43 slice (2026-12-03) the 1.5B said MetaGPT HumanEval/144's reviewer step 4
        (after the runner's AssertionError on the coder's `product % 1 == 0`) needed a fix, its retakes ran to their
        token limit, the step was left open and the scan stopped."""
        entry = None if self.task is None or self.task.kind != "coding" else self.task.metadata.get("entry_point")
        if not entry or step.kind != "agent" or _APPROVED.search(step.content):
            return None
        if any(writes(b.code, str(entry)) for b in code_blocks(step.content)):
            return None  # a review that writes the function is judged as code, not as a review
        failed = self.failed_run_before(step)
        if failed is None:
            return None
        for earlier in reversed(self.trajectory.steps[:step.index]):
            if earlier.kind == "agent" and any(writes(b.code, str(entry)) for b in code_blocks(earlier.content)):
                failing = self.failing_code(earlier.content)
                if failing is None or earlier.agent == step.agent:
                    return None  # passing code, or the coder's own word on its code: not a review of it
                return (f"asks for a change after {failed}, on step {earlier.index}'s code, which fails the task's tests "
                        f"({failing}): sending it back is right")
        return None

    def failed_run_before(self, step: Step) -> str | None:
        """The failed run of the team's checks right before `step` (the last tool step since the previous agent step: a
        non-zero exit code, a timeout, a traceback), described; else None."""
        for earlier in reversed(self.trajectory.steps[:step.index]):
            if earlier.kind == "agent":
                return None
            if earlier.kind == "tool":
                output = earlier.content or earlier.observation or ""
                failed = None if output.startswith("exit code 0") else _FAILED_RUN.search(output)
                return f"step {earlier.index}'s failed run ({failed.group(0).strip()})" if failed else None
        return None

    def approves_failure(self, step: Step) -> str | None:
        """What failed when `step` approves (MetaGPT's reviewer ends the project with `APPROVED`) right after a run of
        the team's checks that failed (the last tool step since the previous agent step: a non-zero exit code, a
        timeout, a traceback); else None. Such an approval ends the project on code its own checks reject: it is not
        a correct review, and the analyzer is asked for its correction, not whether it is correct."""
        return self.failed_run_before(step) if _APPROVED.search(step.content) else None

    def retaken_empty(self, step: Step) -> str | None:
        """Why `step` is no error when it is empty (no text, no calls) and its agent takes the next agent step, with
        only tool or environment output between; else None. An empty reply did nothing: smolagents runs its empty code
        and asks the agent again, which the 0.5B manager answered with three empty replies in a row (golden MBPP+ 309).
        Asked to correct one, the analyzer can only write the agent's work in its place, which a leak refuses when it
        passes (a step that stated nothing handed the answer) or repeats the retake's error when it fails: on the
        seed-31 slice (2026-12-02) the smolagents manager's empty steps were left open and stopped the scan."""
        if step.content.strip() or step.tool_calls:
            return None
        for later in self.trajectory.steps[step.index + 1:self.horizon]:
            if later.kind in ("tool", "environment"):
                continue
            if later.kind == "agent" and later.agent == step.agent:
                return f"is empty (no text, no calls): it did nothing, and {step.agent} took the work up again at step {later.index}"
            return None
        return None

    def right_already(self, step: Step) -> str | None:
        """Why no fix of `step` is a correction (it states a right answer, `right_answer`, or its tests hold and caught
        the error, `right_tests`), or None."""
        right = self.right_answer(step)
        if right is None:
            caught = self.right_tests(step)
            return None if caught is None else (f"step {step.index} ({step.agent}) {caught}: it is not the error; "
                                                "name a later step")
        return (f"step {step.index} ({step.agent}) already states the answer {right!r}, which the task's verifier "
                "accepts: it is not the error (the team lost the right answer after it); name a later step")

    def keeps_wrong_answer(self, step: Step, fix: str) -> str | None:
        """Why `fix` keeps the answer `step` states when the verifier rejects that answer (`same_answer`: the fix's
        answer, a marked one or else its last number, or what its program prints, compared as the verifier
        compares), or None. `wrong_answer` reads only a marked answer or a program; this catches a fix in prose
        that restates the step's rejected answer without marking it. On the main job's GSM8K test-1101 (2026-11-29)
        the critic's `... Ahito ran is \\(\\boxed{28}\\).` (the answer is 16) got the 1.5B's fix `The code output is
        correct. The number of miles Ahito ran is 28.` at three steps, each replayed and failed."""
        if self.task is None or self.verify is None or self.task.kind == "coding":
            return None
        own = self.wrong_answer(step.content)
        if own is None:
            return None
        same = same_answer(self.task, step.content, fix, self.verify, self.run_program)
        if same is None:
            return None
        return f"the fix keeps the answer {own!r} of step {step.index}, which the task's verifier rejects ({same})"

    def failing_code(self, text: str) -> str | None:
        """What the task's tests report of the code in `text` (its first failure, shortened) when that code defines
        the task's function (`entry_point`) and fails them; None for a task that is not coding, no verifier, code
        that defines something else (a helper, a test script), or a verdict the checks call suspect. The coding
        task's counterpart of `wrong_answer`: code that fails the tests is not a correct step and not a correction.
        On the 2026-11-28 slice (seed 4) AG2 HumanEval+ 144 spent 23 minutes replaying seven fixes that each kept
        the failing `% 1 == 0` check; on the main job MBPP 310's `tuple(list(s))` was replayed and failed."""
        if self.task is None or self.verify is None or self.task.kind != "coding":
            return None
        entry = self.task.metadata.get("entry_point")
        if not entry:
            return None
        code, _how = extract_code(text, entry)
        if not writes(code, str(entry)):  # pseudo-code of the function (`function f(...)`) is a wrong version of it
            return None
        verdict = self.verify_text(text)
        if verdict is None or verdict.success or is_suspect(verdict):
            return None
        failures = verdict.details.get("failures") or []
        first = failures[0] if failures and isinstance(failures[0], dict) else None
        if first is None:
            said = verdict.details.get("error") or verdict.details.get("stderr") or f"score {verdict.score:g}"
        else:
            said = ", ".join(f"{k}: {v}" for k, v in first.items() if k in ("assert", "input", "expected", "got", "error"))
        said = " ".join(str(said).split())
        return said if len(said) <= 300 else said[:300] + " ..."

    def confirm(self, finding: NoAgentError) -> NoAgentError:
        """Ask the task's verifier whether the step the analyzer names does state a right answer."""
        if self.task is None or self.verify is None:
            return finding
        t = self.trajectory
        text = t.final_answer or "" if finding.answer_step is None else t.steps[finding.answer_step].content
        return finding.model_copy(update={"confirmed": right_answer_in(self.task, text, self.verify, last_number=True)})


# ------------------------------------------------------------------------------------ a corruption


class Corruption(BaseModel):
    """One candidate corruption of one agent step."""

    model_config = ConfigDict(extra="forbid")

    step: int
    agent: str
    content: str
    tool_calls: list[dict[str, Any]] | None = None
    description: str
    source: Literal["perturber", "programmatic"]
    name: str | None = None
    """The programmatic perturbation's name."""
    instruction: str | None = None
    """The standing instruction that makes the agent keep the mistake (persistent replays)."""
    unnoticed: str | None = None
    """The perturber's reason why the team's checks will not catch it (team-aware proposals)."""

    @classmethod
    def of(cls, p: Perturbation) -> "Corruption":
        return cls(step=p.step, agent=p.agent, content=p.content, tool_calls=p.tool_calls,
                   description=p.description, source="programmatic", name=p.name)



def _corruption_fields(data: dict[str, Any], step: Step, tried: set[tuple[int, str]],
                       need_instruction: bool, planted: Any = None) -> tuple[dict[str, Any] | None, str | None]:
    content = data.get("corrupted_content")
    tool_calls = data.get("tool_calls")
    if tool_calls is not None and not (isinstance(tool_calls, list)
                                       and all(isinstance(t, dict) and t.get("name") for t in tool_calls)):
        return None, "tool_calls, when given, must be a list of {\"name\": ..., \"arguments\": {...}} objects"
    if not isinstance(content, str) or (not content.strip() and tool_calls is None):
        return None, "corrupted_content must be the non-empty corrupted text of the step"
    not_itself = not_the_step_itself(content, step.agent, "corrupted_content") if content.strip() else None
    if not_itself is not None:
        return None, not_itself
    if same_work(content, step.content) and tool_calls is None:
        return None, (f"corrupted_content is what step {step.index} already says (the same code and text, comments, "
                      "layout and code fences aside); the corruption must change what the step does")
    if (step.index, work_key(content)) in tried:
        return None, f"this exact corruption of step {step.index} was already tried and the run still succeeded"
    why = planted(step, content) if planted is not None and content.strip() else None
    if why is not None:
        return None, f"answer_leak: {why}"
    description = str(data.get("description") or "").strip()
    if not description:
        return None, "description must say what specific corruption was made"
    instruction = str(data.get("instruction") or "").strip() or None
    if need_instruction and instruction is None:
        return None, ("instruction is missing: give the standing instruction that makes the agent keep this mistake "
                      "in its later messages")
    return {"step": step.index, "agent": step.agent, "content": content, "description": description,
            "instruction": instruction, "unnoticed": str(data.get("unnoticed") or "").strip() or None,
            "tool_calls": tool_calls}, None


def validate_corruption(trajectory: Trajectory, answer: str, tried: set[tuple[int, str]],
                        planted: Any = None) -> tuple[Corruption | None, str | None]:
    """Parse and check a one-shot perturber answer: a JSON object whose `step` is an existing agent step and
    whose `corrupted_content` is non-empty, differs from the step and was not tried already."""
    data, problem = json_object(answer)
    if data is None:
        return None, problem
    for key in ("step", "corrupted_content", "description"):
        if key not in data:
            return None, f"the JSON object has no {key!r} key"
    step, problem = agent_step_at(trajectory, data["step"], "step", changed="corrupted")
    if step is None:
        return None, problem
    fields, problem = _corruption_fields(data, step, tried, need_instruction=False, planted=planted)
    if fields is None:
        return None, problem
    return Corruption(source="perturber", **fields), None


def validate_corruption_at(step: Step, answer: str, tried: set[tuple[int, str]], need_instruction: bool,
                           planted: Any = None) -> tuple[Corruption | None | Literal[False], str | None]:
    """Parse and check a team-aware perturber answer about `step`: a corruption (with its standing
    `instruction` when the mode may persist it), or `False` when the perturber says the step cannot carry
    a mistake that survives the team's checks (`{"possible": false, "reason": ...}`)."""
    data, problem = json_object(answer)
    if data is None:
        return None, problem
    if data.get("possible") is False:
        return False, None
    fields, problem = _corruption_fields(data, step, tried, need_instruction, planted)
    if fields is None:
        return None, problem
    return Corruption(source="perturber", **fields), None
