"""The two moves every annotation search makes: ask an LLM for a proposal (re-asking when the answer
is invalid), and try an intervention by replaying the run (one `Replay` row per try).

Both are metered against the search's `Budget`. Neither knows about Prefect, adapters or the
warehouse: the replay is a callable the caller builds (an adapter's `replay` with the gateway's stats,
or a simulation).
"""

from __future__ import annotations

import ast
import difflib
import io
import json
import re
import textwrap
import time
import tokenize
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NamedTuple, Protocol, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from rootstep.model import (
    Annotation,
    Asked,
    Edit,
    FlipProof,
    Intervention,
    LLMCall,
    Replay,
    ReplayPurpose,
    Step,
    Task,
    Trajectory,
    Usage,
    Verdict,
    match_agent,
)

from ._budget import Meter
from ._confidence import Effect, effect
from rootstep.benchmarks import RunProgram, code_blocks, gives_answer

T = TypeVar("T")


class ReplayOutcome(BaseModel):
    """What a replay callable reports beside the run: its cost, and whether it can be trusted."""

    model_config = ConfigDict(extra="forbid")

    cost: Usage = Field(default_factory=lambda: Usage(replays=1))
    """Live calls (`llm_calls`), prefix calls served from the recording (free), tokens, USD, wall seconds."""
    divergence: str | None = None
    """The gateway's diff when a prefix request was not in the recording (the replay is not trusted)."""
    error: str | None = None


ReplayFn = Callable[[Intervention], "tuple[Trajectory, Verdict, ReplayOutcome]"]
"""Re-simulate the run with one intervention; Omega's verdict on the result decides."""


class ChatLike(Protocol):
    """`gateway.Chat` or anything called with one prompt that returns the answer text.

    When it has `usage` (a `Usage` that adds up its calls) and `model`, tokens, cost and the annotator's
    name are taken from them. Give each concurrent search its own instance: usage
    is read as a before/after difference.
    """

    def __call__(self, prompt: str) -> str: ...
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
    render_prompt: Callable[[str | None, str | None], str],
    validate: Callable[[str], "tuple[T | None, str | None]"],
    meter: Meter,
    log: list[Asked],
    prompt_name: str,
    *,
    grow: bool = True,
) -> tuple[T | None, str | None]:
    """Ask until `validate` accepts the answer, at most `max_reasks` re-asks, each stating the problem (and,
    for a greedy chat, sampled at `REASK_TEMPERATURE`).

    `render_prompt(previous_answer, problem)` builds the prompt (both None the first time).
    `validate(answer)` returns `(value, None)` or `(None, problem)`. An answer cut at the token limit
    (`finish_reason == "length"`) is never parsed: the same prompt is asked again with twice the room
    (`max_tokens` doubled, up to `MAX_ANSWER_TOKENS`; these re-asks count as LLM calls but not against
    `max_reasks`; with `grow=False` a cut answer ends the proposal instead: an answer that rewrites one step
    and runs past the room sized to that step is rambling, not a longer step). Returns `(value, None)`, or
    `(None, why)` when the answers stayed invalid, the call failed, or the budget ran out.
    """
    with _temperature_given_back(chat):
        previous: str | None = None
        problem: str | None = None
        reasks = 0
        while reasks <= meter.budget.max_reasks:
            stop = meter.cannot_ask(f"a call of {prompt_name}")
            if stop:
                return None, stop
            try:
                answer = call_llm(chat, render_prompt(previous, problem), meter)
            except Exception as exc:  # a provider failure ends this proposal, not the search
                log.append(Asked(prompt_name=prompt_name, answer="", problem=f"call failed: {type(exc).__name__}: {exc}"))
                return None, f"{prompt_name}: call failed: {type(exc).__name__}: {str(exc)[:300]}"
            call_id = getattr(chat, "last_call_id", None)
            if _cut(chat):
                limit = getattr(chat, "max_tokens", "?")
                grown = _grow(chat) if grow else None
                cut = f"cut at max_tokens={limit} (finish_reason=length)"
                log.append(Asked(prompt_name=prompt_name, answer=answer, call_id=call_id,
                                 problem=cut + (f"; asked again with max_tokens={grown}" if grown else "")))
                if grown is None:
                    return None, f"{prompt_name}: the answer was {cut} and cannot be given more room"
                continue
            reasks += 1
            value, problem = validate(answer)
            log.append(Asked(prompt_name=prompt_name, answer=answer, problem=problem, call_id=call_id))
            if problem is None:
                return value, None
            previous = answer
            _sample_reasks(chat)
        return None, f"{prompt_name}: no valid answer after {meter.budget.max_reasks} re-ask(s); last problem: {problem}"


def json_object(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The first JSON object in an answer (fenced or bare), or why there is none.

    Models wrap JSON in ```json fences, prose, or `<think>` blocks; the first `{` that starts a valid
    object wins. An answer with no such object is a problem, never guessed at.
    """
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
    prose, code, comments, end = [], [], set(), 0
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
    r"|the (?:correct(?:ed)?|right|proper) (?:calculation|code|formula|line|computation|expression|function|"
    r"implementation|value|approach) (?:should|would|must) be\b"
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
    (sampled). `check` (the caller's `check_fix`) is asked of every answer: a retake it refuses is re-asked once
    with the problem stated, as an agent is told its code failed (`wrong_code: ... got ..., expected ...`) or its
    answer is wrong; what the re-ask does not fix is refused (a retake that hands over the answer at a step that
    gave none stays an `answer_leak`). On the main job of 2026-11-28 (MBPP 310) the 1.5B's retake returned the
    coder's `tuple(s)`, which keeps the space the tests drop; it was refused unseen by the model, and the step
    stayed open with no replay.

    A retake is asked for the form the agent's instructions ask for: when its system prompt asks for a Python
    code block (`asks_for_code`) and the retake has none, it is re-asked once for it. The main job of 2026-11-28
    (GSM8K test-474): the 1.5B in the AG2 coder's seat worked out the right 80 in prose; the executor found no
    code block, the critic wrote code printing another quantity (20), and the replay failed: a correction the
    team could not run. Prose is not refused: when the re-ask brings no code either, the first prose answer is
    taken (on test-120, 2026-11-25, a prose retake flipped the run), not the re-ask's, which the 1.5B made an
    echo of the complaint on test-1101 ("Please provide the correct answer so that I can assist you with a code
    block") and a restatement of the question on test-474."""
    code_form = asks_for_code(messages)
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
            return None, ("your instructions ask for a Python code block (```python ... ```) and the answer has none; "
                          "write the message as they ask")
        return text, None

    with plain_text(chat), room(chat, step_room(step)):
        text, why = ask_valid(chat, render, validate, meter, log, "retake_step", grow=False)
    if text is None and prose:
        return prose[0], None  # asked for its code block and not given it: the agent's work as first written
    return text, why


_ASKS_FOR_CODE = re.compile(r"```python|\bpython code block\b", re.IGNORECASE)


def asks_for_code(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether the agent's system prompt in `messages` asks for its work as a Python code block (AG2's coder:
    "Write a short Python code block (```python ... ```) that computes the answer and prints it")."""
    return any(m.get("role") == "system" and isinstance(m.get("content"), str) and _ASKS_FOR_CODE.search(m["content"])
               for m in messages)


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
        return ask_valid(chat, lambda previous, problem: render(
            "rewrite_step.j2", question=question, step=step, instruction=instruction, reason=reason,
            previous_answer=previous, problem=problem), validate, meter, log, "rewrite_step.j2", grow=False)


def try_intervention(
    trajectory: Trajectory,
    intervention: Intervention,
    replay: ReplayFn,
    meter: Meter,
    purpose: ReplayPurpose,
    success_before: bool | None = None,
) -> tuple[Replay, Trajectory | None, Verdict | None]:
    """Replay with `intervention`, meter it, and return its `Replay` row (plus the result run).

    A replay that raises, or whose gateway reports a divergence, yields a row with `error` /
    `divergence` and no `success_after`: it decides nothing. `success_before` defaults to the
    trajectory's own verdict.
    """
    started = time.perf_counter()
    result: Trajectory | None = None
    verdict: Verdict | None = None
    try:
        result, verdict, outcome = replay(intervention)
    except Exception as exc:
        outcome = ReplayOutcome(error=f"{type(exc).__name__}: {str(exc)[:2000]}")
    cost = outcome.cost.model_copy(update={"replays": 1, "seconds": round(outcome.cost.seconds or (time.perf_counter() - started), 6)})
    meter.add_replay(cost, control=intervention.kind == "control")
    if result is not None and result.parent_run_id is None:
        result = result.model_copy(update={"parent_run_id": trajectory.id})
    decided = outcome.error is None and outcome.divergence is None and verdict is not None
    row = Replay(
        run_id=trajectory.id,
        framework=trajectory.framework,
        benchmark=trajectory.benchmark,
        intervention=intervention,
        purpose=purpose,
        result_run_id=None if result is None else result.id,
        success_before=trajectory.success if success_before is None else success_before,
        success_after=verdict.success if decided else None,
        cost=cost,
        divergence=outcome.divergence,
        error=outcome.error,
    )
    return row, result, verdict if decided else None


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


def replay_said(result: Trajectory | None, verdict: Verdict | None, max_chars: int = 700) -> str | None:
    """What a replay that still failed ended with, as the analyzer reads it beside the fix it tested: the
    re-simulated run's final answer (its end, where the answer sits; its lines and a code block's indentation
    kept, blank lines dropped) and the verifier's verdict details."""
    if result is None or verdict is None:
        return None
    lines = [" ".join(line.split()) if not line.startswith((" ", "\t")) else line.rstrip()
             for line in (result.final_answer or "").strip().splitlines() if line.strip()]
    final = "\n".join(lines)
    half = max_chars // 2
    final = final if len(final) <= half else "... " + final[-half:]
    details = json.dumps(verdict.details, sort_keys=True, default=str) if verdict.details else ""
    room = max_chars - len(final)
    details = details if len(details) <= room else details[:room] + " ..."
    # the answer's lines kept (escaped as the fix beside it is): with its code flattened onto one line, the
    # 1.5B copied it into its next fix, a program that was one comment (slice of 2026-11-28, MATH-500 255)
    return f"final answer: {json.dumps(final, ensure_ascii=False)}" + (f"; verifier: {details}" if details else "")


# ------------------------------------------------------------------------------------ controls


DETERMINISTIC_PROVIDERS = ("scripted",)
"""Providers whose answer is a function of the request at temperature 0: scripted models. A cached
response (`mode == "cached"`) is deterministic whatever its provider. The local llama.cpp models are NOT:
their prompt cache and batched decoding change the floating-point sums, and greedy decoding then picks
other tokens. Measured: the same AG2 request at temperature 0 to local/qwen2.5-coder-0.5b got two
different answers in two runs of the main job's slice (GSM8K test-1101, the coder's second call), and
one run succeeded where the other failed. Their controls are replayed like a remote model's."""

Deterministic = Callable[[int], "str | None"]
"""`step -> why` a control replay of `step` would reproduce the recorded run exactly (no live call
needed), or None when its later calls are sampled."""


def proven_identical(recorded: Sequence[LLMCall], step: Step) -> str | None:
    """Why a control replay of `step` (its recorded response forced, everything after it live) must
    reproduce the recording: every recorded call after the step's own was answered deterministically
    (a cached response, or temperature 0 on a deterministic provider). Then the same requests come
    again and get the same answers, so the control is the recorded run. None when any later call was
    sampled (or the step's call is not in the recording)."""
    ids = set(step.call_ids)
    recorded = sorted(recorded, key=lambda c: c.created_at)  # answer order (a warehouse read is unordered)
    positions = [i for i, c in enumerate(recorded) if c.id in ids or (not ids and c.step_index == step.index)]
    if not positions:
        return None
    later = list(recorded[positions[-1] + 1:])
    for c in later:
        temperature = (c.request or {}).get("temperature")
        if c.mode == "cached":
            continue
        if c.provider in DETERMINISTIC_PROVIDERS and temperature is not None and float(temperature) == 0.0:
            continue
        return None
    if not later:
        return f"no LLM call came after step {step.index} in the recording: the control replays the recording"
    providers = sorted({c.provider for c in later})
    return (f"the {len(later)} recorded call(s) after step {step.index} were answered deterministically "
            f"(temperature 0 on {', '.join(providers) or 'no provider'}, or cached): the control replays the recording")


def control_of(trajectory: Trajectory, step: int, replay: ReplayFn, meter: Meter, purpose: ReplayPurpose,
               success_before: bool | None = None) -> tuple[Replay, Trajectory | None, Verdict | None]:
    """One control replay of `step`: its recorded response forced unchanged, the rest of the run live."""
    recorded = trajectory.steps[step]
    control = Intervention(run_id=trajectory.id, step=step, new_content=recorded.content, kind="control",
                           agent=recorded.agent)
    return try_intervention(trajectory, control, replay, meter, purpose, success_before)


class FlipCheck(BaseModel):
    """One flip put to the test: the intervention's replays (repeats) and the controls beside them."""

    repeats: list[Replay] = Field(default_factory=list)
    """Further replays with the intervention (`--repeats N` gives N - 1 of them; the first is the attempt's)."""
    controls: list[Replay] = Field(default_factory=list)
    """Control replays that ran (the step forced unchanged)."""
    proven_identical: int = 0
    """Controls not replayed because the provider is deterministic for them (`proven_why`)."""
    proven_why: str | None = None
    effect: Effect
    causal: bool
    why_not: str | None = None
    """Why the flip is not the intervention's effect (`not_causal`)."""

    def summary(self) -> FlipProof:
        """What the label keeps of the check (`Annotation.flip_check`)."""
        return FlipProof(flips=self.effect.flips, trials=self.effect.trials, control_flips=self.effect.control_flips,
                         control_trials=self.effect.control_trials, controls_replayed=[r.id for r in self.controls],
                         controls_proven_identical=self.proven_identical, proven_identical_because=self.proven_why,
                         repeat_replays=[r.id for r in self.repeats], difference=self.effect.difference,
                         interval=[self.effect.low, self.effect.high], confidence=self.effect.confidence)


def check_flip(
    trajectory: Trajectory,
    intervention: Intervention,
    flipped: Callable[[Replay, "Verdict | None"], "bool | None"],
    replay: ReplayFn,
    meter: Meter,
    purpose: ReplayPurpose,
    *,
    controls: int = 1,
    repeats: int = 1,
    deterministic: str | None = None,
    success_before: bool | None = None,
    ready_controls: Sequence[tuple[Replay, "Verdict | None"]] = (),
) -> FlipCheck:
    """Is a flip seen with `intervention` (its first replay, which the caller judged) the intervention's effect?

    The intervention is replayed `repeats - 1` more times and the step left as recorded (a `control`
    intervention: its recorded response forced, the rest live, as in the intervention's replay)
    `controls * repeats` times. `flipped(row, verdict)` judges each replay (None: it decided nothing).
    The flip is causal when most intervention replays flip and fewer than half of the decided controls do;
    a control that flips as well shows a re-roll. With `deterministic` (why the later calls are answered
    the same every time: `proven_identical`) no control is replayed: each is recorded as proven identical
    to the recorded run, which did not flip. Controls and repeats always run once a flip is seen (they are
    the label's proof); they count in the meter's replays, controls apart (`Meter.control_replays`).
    `ready_controls`: control replays of this step already run (`control_of`: beside the fix's replay, or for an
    earlier fix of the same step), used before any new one is run: a control does not depend on the fix.
    """
    outcomes: list[bool | None] = [True]  # the caller's replay, which flipped
    repeat_rows: list[Replay] = []
    for _ in range(max(repeats, 1) - 1):
        row, _result, verdict = try_intervention(trajectory, intervention, replay, meter, purpose, success_before)
        repeat_rows.append(row)
        outcomes.append(flipped(row, verdict))
    wanted = max(controls, 0) * max(repeats, 1)
    control_rows: list[Replay] = []
    control_outcomes: list[bool | None] = []
    proven = 0
    if deterministic is not None:
        proven = wanted
    else:
        ready = list(ready_controls)[:wanted]
        for row, verdict in ready:
            control_rows.append(row)
            control_outcomes.append(flipped(row, verdict))
        for _ in range(wanted - len(ready)):
            row, _result, verdict = control_of(trajectory, intervention.step, replay, meter, purpose, success_before)
            control_rows.append(row)
            control_outcomes.append(flipped(row, verdict))
    decided = [o for o in outcomes if o is not None]
    decided_controls = [o for o in control_outcomes if o is not None]
    flips, trials = sum(decided), len(decided)
    control_flips, control_trials = sum(decided_controls), len(decided_controls) + proven
    result = effect(flips, trials, control_flips, control_trials, controls_exact=proven > 0 and not control_rows)
    why_not = None
    if 2 * flips <= trials:
        why_not = f"the intervention flipped the run in {flips} of {trials} replays"
    elif wanted and control_trials == 0:
        why_not = "no control replay decided anything (each raised or diverged)"
    elif control_trials and 2 * control_flips >= control_trials:
        why_not = (f"the run flipped without the intervention too: {control_flips} of {control_trials} control "
                   "replays (the step unchanged) flipped, so the flip is a re-roll")
    return FlipCheck(repeats=repeat_rows, controls=control_rows, proven_identical=proven,
                     proven_why=deterministic, effect=result, causal=why_not is None, why_not=why_not)


_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|==|!=|<=|>=|//|\*\*|[-+*/%<>=]")
_ARITHMETIC = re.compile(r"\b(?:subtract\w*|addition|plus|minus|multipl\w*|divid\w*|division|quotient|"
                         r"sum of|product of|difference of)\b", re.IGNORECASE)
"""Words that claim an arithmetic operation was changed (not "add", which also means "append")."""
_OPERATOR_WORDS = {
    "+": ("add", "plus", "sum", "addition", "adding", "increase"),
    "-": ("subtract", "minus", "difference", "subtraction", "subtracting", "subtracted", "decrease"),
    "*": ("multiply", "times", "product", "multiplication", "multiplying", "multiplied"),
    "/": ("divide", "division", "dividing", "divided", "quotient", "ratio"),
    "//": ("divide", "division", "floor", "integer"),
    "%": ("modulo", "remainder", "mod"),
    "**": ("power", "exponent", "square", "squared"),
    "<": ("less", "smaller", "lower"), ">": ("greater", "larger", "bigger", "higher"),
    "<=": ("less", "smaller", "lower", "most"), ">=": ("greater", "larger", "least"),
    "==": ("equal", "equals", "same"), "!=": ("equal", "different", "unequal"),
}
_STOPWORDS = frozenset(
    "a an and are as at be by for from in into is it its of on or not no that the then this to was were with "
    "which will should would step agent code value values line lines instead changed change changes".split())
MAX_SUMMARY_CHARS = 400
_PIECE = re.compile(r"\w+|\s+|[^\w\s]+")


def _changed_tokens(original: str, new: str) -> list[tuple[list[str], list[str]]]:
    """The stretches an edit changed, as (tokens removed, tokens inserted) pairs (identifiers whole, numbers,
    operators; a word-level diff, so tokens on unchanged stretches are not changes)."""
    a, b = _TOKEN.findall(original), _TOKEN.findall(new)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(a[i1:i2], b[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def edit_summary(original: str, new: str, max_chars: int = MAX_SUMMARY_CHARS) -> str:
    """What an edit did, read from the two texts (never from anyone's account of it): the changed lines as
    `- old` / `+ new` pairs, or `replaced 'x' with 'y'` when one line changed within 80 characters."""
    old_lines, new_lines = original.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    if len(changes) == 1 and changes[0][0] == "replace" and changes[0][2] - changes[0][1] == 1 == changes[0][4] - changes[0][3]:
        _, i1, _, j1, _ = changes[0]
        x, y = old_lines[i1], new_lines[j1]
        xs, ys = _PIECE.findall(x), _PIECE.findall(y)  # whole words and operators, not characters
        inner = difflib.SequenceMatcher(None, xs, ys, autojunk=False)
        spans = [op for op in inner.get_opcodes() if op[0] != "equal"]
        old, new = "".join(xs[spans[0][1]:spans[-1][2]]), "".join(ys[spans[0][3]:spans[-1][4]])
        if max(len(old), len(new)) <= 80:  # one stretch of the line (its first to its last change)
            text = f"replaced {old!r} with {new!r} in the line {y.strip()!r}"
            return text if len(text) <= max_chars else text[: max_chars - 4] + " ..."
    parts = []
    for _, i1, i2, j1, j2 in changes:
        parts += [f"- {line.strip()}" for line in old_lines[i1:i2] if line.strip()]
        parts += [f"+ {line.strip()}" for line in new_lines[j1:j2] if line.strip()]
    text = "; ".join(parts) or "whitespace only"
    return text if len(text) <= max_chars else text[: max_chars - 4] + " ..."


def unfounded_description(description: str, original: str, new: str) -> str | None:
    """Why `description` (a perturber's account of its corruption) is not an account of the edit from
    `original` to `new`, or None. A lexical check, read from the two texts:

    * it claims an arithmetic change (subtract, multiply, division, ...) but the edit wrote no operator and
      no number (none inserted or swapped): the 1.5B wrote "it should subtract ... not add them" for an edit that only
      cut a program down to a bare line of it (no fence, no print: nothing ran);
    * it names nothing the edit changed: no identifier (whole), number or operator removed or inserted
      (an operator also by its word: "subtract" for `-`; a number also by the change: "added 7" for 10 -> 17),
      stop words left out.
    A vague account ("a subtle slip") fails the second test too: the label's reason is then the edit itself."""
    stretches = _changed_tokens(original, new)
    written = {t for removed, inserted in stretches if any(x in _OPERATOR_WORDS for x in inserted)
               for t in removed + inserted if t in _OPERATOR_WORDS}
    numbers = [t for _, inserted in stretches for t in inserted if t[0].isdigit()]
    claimed = sorted({m.group(0).lower() for m in _ARITHMETIC.finditer(description)})
    if claimed and not written and not numbers:
        return f"it speaks of {', '.join(claimed)}, but the edit wrote no operator and no number"
    changed = {t.lower() for removed, inserted in stretches for t in removed + inserted} - _STOPWORDS
    if ({w.lower() for w in _TOKEN.findall(description)} - _STOPWORDS) & changed:
        return None
    said = {w.lower() for w in re.findall(r"[A-Za-z]+", description)}
    if any(said & set(_OPERATOR_WORDS[op]) for op in written):
        return None
    if numbers and re.search(r"\d", description):
        return None  # a number changed and the account gives one (the new value, or the change: "added 7")
    return "it names nothing the edit changed"


def edit_size(original: str, new: str, task: Task | None = None, run_program: RunProgram | None = None) -> Edit:
    """How much a fix or corruption changed its step: characters and lines changed (inserted, deleted or
    replaced, whichever side is longer per change), their share of the step, the length ratio, and what
    changed (`edit_summary`); with the `task`, whether the new text states an answer the step did not
    (`adds_answer`, `gives_answer`)."""
    def changed(a: Sequence[Any], b: Sequence[Any]) -> int:
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=len(a) + len(b) > 20_000)
        return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")

    chars = changed(original, new)
    adds = None if task is None else (gives_answer(task, new, run_program)
                                      and not gives_answer(task, original, run_program))
    return Edit(chars_changed=chars, lines_changed=changed(original.splitlines(), new.splitlines()),
                share=round(chars / max(len(original), len(new), 1), 3),
                growth=round(len(new) / max(len(original), 1), 2), summary=edit_summary(original, new),
                adds_answer=adds)


def answer_leaks(asked: Sequence[Asked]) -> list[Asked]:
    """The answers refused for handing over the reference answer (`answer_leak`), among a search's calls."""
    return [x for x in asked if (x.problem or "").startswith("answer_leak:")]
