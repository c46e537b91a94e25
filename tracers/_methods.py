"""The reference attribution methods of Who&When: all-at-once, step-by-step, binary search.

Each takes a trace (a warehouse `Trajectory`, or a dict in the Who&When / plain trace format
`{"history"|"conversation": [...], "question", "ground_truth"}`) and a litellm model string, and
returns an `Attribution`. Answers that cannot be parsed are recorded as such (`error`), never guessed.
"""

from __future__ import annotations

import functools
import inspect
from importlib import import_module
from typing import Any, Callable, Literal

from pydantic import BaseModel, Field

from rootstep import Registry
from rootstep.prompts import render
from rootstep.warehouse import RootstepError, Trajectory
from rootstep.warehouse.whowhen import parse_record

from ._llm import Chat
from ._parse import parse_attribution, parse_half, parse_yes_no

MethodName = Literal["all_at_once", "step_by_step", "binary_search", "divergence", "confidence", "learned"]


class Attribution(BaseModel):
    """A method's answer to "who and when": the agent, the 0-based step, and why."""

    method: str
    model: str
    agent: str | None = None
    step: int | None = None
    reason: str | None = None
    error: str | None = None
    """Why there is no prediction: an unparseable answer, or no step flagged."""
    answers: list[str] = Field(default_factory=list)
    """Every raw model answer, in order."""
    notes: list[str] = Field(default_factory=list)
    with_ground_truth: bool = True
    truncated: bool = False
    """True when step contents were shortened to fit `max_prompt_chars`."""
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    details: dict[str, Any] = Field(default_factory=dict)
    """Method-specific evidence (per-step scores, the counterpart run, the model id), stored with the prediction."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.agent is not None and self.step is not None

    @property
    def agent_name(self) -> str | None:
        """The failure-responsible agent (the Who&When tool's name for `agent`)."""
        return self.agent

    @property
    def step_number(self) -> int | None:
        """The 0-based decisive step (the Who&When tool's name for `step`)."""
        return self.step


class TracerError(RootstepError):
    """A method cannot attribute this run as asked (no counterpart, no trained model, ...): the message says why."""


def as_trajectory(trace: Trajectory | dict[str, Any]) -> Trajectory:
    """A warehouse trajectory as it is; a dict parsed as a Who&When record or plain trace."""
    if isinstance(trace, Trajectory):
        return trace
    return parse_record(trace, "<trace>")[0]


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = max(limit * 2 // 3, 1)
    tail = max(limit - head, 0)
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[len(text) - tail:] if tail else ''}"


MIN_STEP_CHARS = 40


def step_cap(lengths: list[int], budget: int) -> int:
    """The largest cap c (at least `MIN_STEP_CHARS`) with sum(min(length, c)) <= budget."""
    remaining, left = budget, len(lengths)
    for length in sorted(lengths):
        if length * left > remaining:  # every step from here on is cut to the same cap
            return max(remaining // left, MIN_STEP_CHARS)
        remaining -= length
        left -= 1
    return max(max(lengths, default=0), MIN_STEP_CHARS)


def render_steps(trajectory: Trajectory, first: int, last: int, max_prompt_chars: int) -> tuple[list[dict[str, Any]], bool]:
    """Steps first..last as template variables, the longest shortened first so all fit in `max_prompt_chars`.

    Every step is cut to the same cap, the largest cap whose total fits (short steps stay whole and
    leave their share to the long ones); a step keeps at least `MIN_STEP_CHARS` whatever the budget.
    """
    steps = trajectory.steps[first : last + 1]
    total = sum(len(s.content) for s in steps)
    limit = step_cap([len(s.content) for s in steps], max_prompt_chars) if total > max_prompt_chars else None
    rendered = [
        {"index": s.index, "agent": s.agent, "kind": s.kind, "content": _shorten(s.content, limit) if limit else s.content}
        for s in steps
    ]
    return rendered, limit is not None and any(len(s.content) > limit for s in steps)


def _builtin_tracers() -> None:
    import_module("rootstep.tracers")  # importing the package registers every built-in method


def _adopt_tracer(ep: Any, obj: Any) -> tuple[str, Callable[..., Attribution]]:
    if not callable(obj):
        raise TypeError(f"{ep.value} is not a tracer function (trace, model, ...) -> Attribution")
    return ep.name, _guarded(ep.name, obj)


TRACERS: Registry[Callable[..., Attribution]] = Registry("tracer", group="rootstep.tracers", builtins=_builtin_tracers,
                                                         adopt=_adopt_tracer)
"""Every attribution method by name (what `--method` takes): the built-ins, pip-installed plugins (entry
point `rootstep.tracers`: a function `fn(trace, model, ...) -> Attribution`) and `@tracer` functions."""
NO_PROVIDER = ("divergence", "confidence", "learned")
"""Methods that call no LLM provider (confidence may run the local llama.cpp model)."""


def default_model(method: str) -> str:
    """The model `method` uses when none is named: the confidence method scores tokens under its own local
    scorer (a SentencePiece vocabulary); every other method asks the default LLM."""
    from rootstep.gateway import DEFAULT_MODEL, DEFAULT_SCORER_MODEL

    return DEFAULT_SCORER_MODEL if method == "confidence" else DEFAULT_MODEL


def refusal(trajectory: Trajectory) -> str | None:
    """Why a trace must not be attributed at all: an imported trace recorded with content capture off."""
    if trajectory.metadata.get("content_captured") is False:
        return "refused: " + str(trajectory.metadata.get("content_note") or "the trace holds no message text")
    return None


def tracer(name: str) -> Callable[[Callable[..., Attribution]], Callable[..., Attribution]]:
    """Register an attribution method under `name` (what `rootstep evaluate --method` takes).

    The registered method refuses (no LLM call, `error` says why) a trace that `refusal` rejects.
    """

    def register(fn: Callable[..., Attribution]) -> Callable[..., Attribution]:
        return TRACERS.register(name, _guarded(name, fn), module=fn.__module__)

    return register


def _guarded(name: str, fn: Callable[..., Attribution]) -> Callable[..., Attribution]:
    """`fn`, refusing (no LLM call, `error` says why) a trace that `refusal` rejects."""

    @functools.wraps(fn)  # run_tracer reads fn's own signature through __wrapped__
    def guarded(trace: Trajectory | dict[str, Any], *args: Any, **options: Any) -> Attribution:
        t = as_trajectory(trace)
        why = refusal(t)
        if why:
            model = options.get("model", args[0] if args else None) or "-"
            return Attribution(method=name, model=str(model), error=why,
                               with_ground_truth=bool(options.get("with_ground_truth", True)))
        return fn(t, *args, **options)

    return guarded


def tracer_fn(name: str) -> Callable[..., Attribution]:
    """The method registered as `name`; ValueError listing the methods otherwise."""
    if name not in TRACERS:
        raise ValueError(f"method {name!r} is unknown; choose one of {', '.join(sorted(TRACERS.names()))}")
    return TRACERS.get(name)


def run_tracer(name: str, trace: Trajectory | dict[str, Any], **options: Any) -> Attribution:
    """Call the method registered as `name` with the options it takes (others are ignored).

    Callers pass one set of options to any method (`model`, `with_ground_truth`, `warehouse`, ...);
    each method declares the ones it uses. Unknown names raise `ValueError` listing the methods.
    """
    fn = tracer_fn(name)
    accepted = inspect.signature(fn).parameters
    return fn(trace, **{k: v for k, v in options.items() if k in accepted})


def _finish(result: Attribution, chat: Chat) -> Attribution:
    u = chat.usage
    result.llm_calls, result.prompt_tokens, result.completion_tokens = u.calls, u.prompt_tokens, u.completion_tokens
    result.cost_usd, result.seconds = u.cost_usd, u.seconds
    return result


def _context(t: Trajectory, with_ground_truth: bool) -> dict[str, Any]:
    return {"question": t.question, "ground_truth": t.ground_truth if with_ground_truth else None, "agents": t.agents}


@tracer("all_at_once")
def all_at_once(
    trace: Trajectory | dict[str, Any],
    model: str,
    with_ground_truth: bool = True,
    api_base: str | None = None,
    max_prompt_chars: int = 60_000,
    max_tokens: int = 512,
) -> Attribution:
    """Show the whole run once and ask for agent, step and reason in one answer (one LLM call)."""
    t = as_trajectory(trace)
    chat = Chat(model, api_base=api_base, max_tokens=max_tokens)
    steps, truncated = render_steps(t, 0, len(t.steps) - 1, max_prompt_chars)
    answer = chat(render("tracer_all_at_once.j2", steps=steps, **_context(t, with_ground_truth)))
    parsed = parse_attribution(answer, t.agents, len(t.steps))
    result = Attribution(
        method="all_at_once", model=model, agent=parsed.agent if parsed.ok else None, step=parsed.step if parsed.ok else None,
        reason=parsed.reason, error=parsed.error, answers=[answer], with_ground_truth=with_ground_truth, truncated=truncated,
    )
    return _finish(result, chat)


@tracer("step_by_step")
def step_by_step(
    trace: Trajectory | dict[str, Any],
    model: str,
    with_ground_truth: bool = True,
    api_base: str | None = None,
    max_prompt_chars: int = 60_000,
    max_tokens: int = 512,
) -> Attribution:
    """Walk the agent steps in order, asking of each "is this the decisive error?"; stop at the first yes.

    Tool, environment and human steps are shown as context but never asked about. An answer that is
    neither yes nor no counts as "not flagged" and is noted; a run where no step is flagged has no
    prediction (`error="no step flagged"`).
    """
    t = as_trajectory(trace)
    chat = Chat(model, api_base=api_base, max_tokens=max_tokens)
    result = Attribution(method="step_by_step", model=model, with_ground_truth=with_ground_truth)
    for step in t.steps:
        if step.kind != "agent":
            continue
        steps, truncated = render_steps(t, 0, step.index, max_prompt_chars)
        result.truncated |= truncated
        answer = chat(render("tracer_step_by_step.j2", steps=steps, current=steps[-1], **_context(t, with_ground_truth)))
        result.answers.append(answer)
        verdict = parse_yes_no(answer)
        if verdict is None:
            result.notes.append(f"step {step.index}: answer is neither yes nor no")
        elif verdict:
            result.agent, result.step = step.agent, step.index
            result.reason = answer.strip()
            return _finish(result, chat)
    result.error = "no step flagged"
    return _finish(result, chat)


@tracer("binary_search")
def binary_search(
    trace: Trajectory | dict[str, Any],
    model: str,
    with_ground_truth: bool = True,
    api_base: str | None = None,
    max_prompt_chars: int = 60_000,
    max_tokens: int = 512,
) -> Attribution:
    """Halve the range of agent steps that holds the error, asking "lower or upper half?" each time.

    ceil(log2(n)) calls for n agent steps. The range shown includes the tool/human steps between its
    ends. An answer naming neither half stops the search with `error` (the range is noted).
    """
    t = as_trajectory(trace)
    chat = Chat(model, api_base=api_base, max_tokens=max_tokens)
    result = Attribution(method="binary_search", model=model, with_ground_truth=with_ground_truth)
    candidates = [s.index for s in t.steps if s.kind == "agent"]
    if not candidates:
        result.error = "no agent step in the run"
        return _finish(result, chat)
    lo, hi = 0, len(candidates) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        lower, upper = (candidates[lo], candidates[mid]), (candidates[mid + 1], candidates[hi])
        steps, truncated = render_steps(t, lower[0], upper[1], max_prompt_chars)
        result.truncated |= truncated
        answer = chat(render("tracer_binary_search.j2", steps=steps, lower=lower, upper=upper, **_context(t, with_ground_truth)))
        result.answers.append(answer)
        half = parse_half(answer)
        if half is None:
            result.error = f"unparseable: the answer names neither half of steps {lower[0]}..{upper[1]}"
            return _finish(result, chat)
        lo, hi = (lo, mid) if half == "lower" else (mid + 1, hi)
    result.step = candidates[lo]
    result.agent = t.steps[result.step].agent
    return _finish(result, chat)
