"""The two moves every annotation search makes: ask an LLM for a proposal (re-asking when the answer
is invalid), and try an intervention by replaying the run (one `Replay` row per try).

Both are metered against the search's `Budget`. Neither knows about Prefect, adapters or the
warehouse: the replay is a callable the caller builds (an adapter's `replay` with the gateway's stats,
or a simulation).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Callable, Protocol, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict

from rootstep.warehouse import Intervention, Replay, ReplayPurpose, Step, Trajectory, Verdict

from ._budget import Meter

T = TypeVar("T")


class ReplayCost(BaseModel):
    """What one re-simulation cost, and whether the gateway saw it diverge."""

    model_config = ConfigDict(extra="forbid")

    live_calls: int = 0
    replayed_calls: int = 0
    """Prefix calls served from the recording (free)."""
    tokens: int = 0
    cost_usd: float = 0.0
    duration_s: float = 0.0
    divergence: str | None = None
    """The gateway's diff when a prefix request was not in the recording (the replay is not trusted)."""
    error: str | None = None


ReplayFn = Callable[[Intervention], "tuple[Trajectory, Verdict, ReplayCost]"]
"""Re-simulate the run with one intervention; Omega's verdict on the result decides."""


class ChatLike(Protocol):
    """`tracers.Chat` or anything called with one prompt that returns the answer text.

    When it has `usage` (calls, prompt_tokens, completion_tokens, cost_usd) and `model`, tokens, cost
    and the annotator's name are taken from them. Give each concurrent search its own instance: usage
    is read as a before/after difference.
    """

    def __call__(self, prompt: str) -> str: ...


class Asked(BaseModel):
    """One LLM call of a search: the answer and, when it was rejected, why."""

    prompt_name: str
    answer: str
    problem: str | None = None


def model_name(chat: Any, default: str) -> str:
    return str(getattr(chat, "model", None) or default)


def call_llm(chat: ChatLike, prompt: str, meter: Meter) -> str:
    """One metered call: counts the call, its tokens and cost (from `chat.usage` when present)."""
    usage = getattr(chat, "usage", None)
    before = (usage.prompt_tokens + usage.completion_tokens, usage.cost_usd) if usage is not None else (0, 0.0)
    try:
        answer = chat(prompt)
    finally:
        meter.llm_calls += 1
        if usage is not None:
            meter.llm_tokens += usage.prompt_tokens + usage.completion_tokens - before[0]
            meter.llm_usd += usage.cost_usd - before[1]
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


def ask_valid(
    chat: ChatLike,
    render_prompt: Callable[[str | None, str | None], str],
    validate: Callable[[str], "tuple[T | None, str | None]"],
    meter: Meter,
    log: list[Asked],
    prompt_name: str,
) -> tuple[T | None, str | None]:
    """Ask until `validate` accepts the answer, at most `max_reasks` re-asks, each stating the problem.

    `render_prompt(previous_answer, problem)` builds the prompt (both None the first time).
    `validate(answer)` returns `(value, None)` or `(None, problem)`. An answer cut at the token limit
    (`finish_reason == "length"`) is never parsed: the same prompt is asked again with twice the room
    (`max_tokens` doubled, up to `MAX_ANSWER_TOKENS`; these re-asks count as LLM calls but not against
    `max_reasks`). Returns `(value, None)`, or `(None, why)` when the answers stayed invalid, the call
    failed, or the budget ran out.
    """
    previous: str | None = None
    problem: str | None = None
    reasks = 0
    while reasks <= meter.budget.max_reasks:
        stop = meter.cannot_ask()
        if stop:
            return None, stop
        try:
            answer = call_llm(chat, render_prompt(previous, problem), meter)
        except Exception as exc:  # a provider failure ends this proposal, not the search
            log.append(Asked(prompt_name=prompt_name, answer="", problem=f"call failed: {type(exc).__name__}: {exc}"))
            return None, f"{prompt_name}: call failed: {type(exc).__name__}: {str(exc)[:300]}"
        if _cut(chat):
            limit = getattr(chat, "max_tokens", "?")
            grown = _grow(chat)
            cut = f"cut at max_tokens={limit} (finish_reason=length)"
            log.append(Asked(prompt_name=prompt_name, answer=answer,
                             problem=cut + (f"; asked again with max_tokens={grown}" if grown else "")))
            if grown is None:
                return None, f"{prompt_name}: the answer was {cut} and cannot be given more room"
            continue
        reasks += 1
        value, problem = validate(answer)
        log.append(Asked(prompt_name=prompt_name, answer=answer, problem=problem))
        if problem is None:
            return value, None
        previous = answer
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
    meter.replays += 1
    result: Trajectory | None = None
    verdict: Verdict | None = None
    try:
        result, verdict, cost = replay(intervention)
    except Exception as exc:
        cost = ReplayCost(error=f"{type(exc).__name__}: {str(exc)[:2000]}")
    duration = cost.duration_s or (time.perf_counter() - started)
    meter.live_calls += cost.live_calls
    meter.replayed_calls += cost.replayed_calls
    meter.replay_tokens += cost.tokens
    meter.replay_usd += cost.cost_usd
    if result is not None and result.parent_run_id is None:
        result = result.model_copy(update={"parent_run_id": trajectory.id})
    decided = cost.error is None and cost.divergence is None and verdict is not None
    row = Replay(
        run_id=trajectory.id,
        framework=trajectory.framework,
        benchmark=trajectory.benchmark,
        intervention=intervention,
        purpose=purpose,
        result_run_id=None if result is None else result.id,
        success_before=trajectory.success if success_before is None else success_before,
        success_after=verdict.success if decided else None,
        live_calls=cost.live_calls,
        replayed_calls=cost.replayed_calls,
        tokens=cost.tokens,
        cost_usd=cost.cost_usd,
        duration_s=round(duration, 6),
        divergence=cost.divergence,
        error=cost.error,
    )
    return row, result, verdict if decided else None


def trajectory_vars(trajectory: Trajectory, max_prompt_chars: int) -> dict[str, Any]:
    """Template variables for a run: steps (contents shortened evenly to fit) with kind, tool calls and
    observation, and the agents."""
    steps = trajectory.steps
    total = sum(len(s.content) + len(s.observation or "") for s in steps)
    limit = max(max_prompt_chars // max(len(steps), 1), 200) if total > max_prompt_chars else None

    def cut(text: str | None) -> str | None:
        if text is None or limit is None or len(text) <= limit:
            return text
        head = limit * 2 // 3
        tail = limit - head
        return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[len(text) - tail:]}"

    return {
        "steps": [
            {
                "index": s.index,
                "agent": s.agent,
                "kind": s.kind,
                "content": cut(s.content),
                "tool_calls": [json.dumps(t, sort_keys=True, default=str)[:500] for t in s.tool_calls],
                # the model's own tool calls (OpenAI form), which a replacement must restate to change
                "calls_tools": any(isinstance(t, dict) and isinstance(t.get("function"), dict) for t in s.tool_calls),
                "observation": cut(s.observation),
            }
            for s in steps
        ],
        "agents": trajectory.agents,
    }


def verdict_feedback(verdict: Verdict | None, max_chars: int = 3000) -> str:
    """Omega's verdict as the analyzer reads it: score and details (test output, expected vs got)."""
    if verdict is None:
        return "(no verdict)"
    text = f"success: {verdict.success}; score: {verdict.score:g}"
    if verdict.details:
        details = json.dumps(verdict.details, indent=1, sort_keys=True, default=str)
        text += "\n" + (details if len(details) <= max_chars else details[:max_chars] + " ...")
    return text


def adapter_replay(adapter: Any, trajectory: Trajectory, *, retries: int = 1, **replay_kwargs: Any) -> ReplayFn:
    """A `ReplayFn` over a framework adapter (`rootstep.adapters.base.Adapter.replay`).

    The adapter re-runs the framework against a gateway replay run and returns the new trajectory with
    its verdict and `metadata["replay"]` (the gateway's live/replayed counts and divergence). A replay
    whose steps before the intervention differ from the recording is reported as a divergence: its
    verdict is not evidence about the intervention. An infrastructure failure (`AdapterError`: the
    container or the Docker daemon failed) is retried `retries` times before it is reported.
    """
    from rootstep.adapters.base import AdapterError

    def replay(intervention: Intervention) -> tuple[Trajectory, Verdict, ReplayCost]:
        started = time.perf_counter()
        for attempt in range(retries + 1):
            try:
                result = adapter.replay(trajectory, intervention, **replay_kwargs)
                break
            except AdapterError:
                if attempt == retries:
                    raise
        info = result.metadata.get("replay") or {}
        divergence = info.get("divergence")
        if divergence is None and info.get("prefix_identical") is False:
            divergence = f"the steps before step {intervention.step} differ from the recorded run"
        verdict = result.verdict
        error = None if verdict is not None else (result.metadata.get("error") or "the replayed run has no verdict")
        cost = ReplayCost(
            live_calls=int(info.get("live_calls") or 0),
            replayed_calls=int(info.get("replayed_calls") or 0),
            tokens=result.prompt_tokens + result.completion_tokens,
            cost_usd=result.cost_usd,
            duration_s=time.perf_counter() - started,
            divergence=divergence,
            error=None if error is None else str(error)[:2000],
        )
        return result, verdict if verdict is not None else Verdict(success=False), cost

    return replay
