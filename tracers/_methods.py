"""The reference attribution methods of Who&When: all-at-once, step-by-step, binary search.

Each takes a trace (a warehouse `Trajectory`, or a dict in the Who&When / plain trace format
`{"history"|"conversation": [...], "question", "ground_truth"}`) and a litellm model string, and
returns an `Attribution`. Answers that cannot be parsed are recorded as such (`error`), never guessed.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from importlib import import_module
from typing import Any, Callable, Literal

from pydantic import BaseModel, Field

from rootstep.model import Registry, RootstepError, Trajectory, Usage
from rootstep.prompts import render, render_steps
from rootstep.traces.whowhen import parse_record

from rootstep.gateway import Chat
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
    cost: Usage = Field(default_factory=Usage)
    """What the method spent: its LLM calls, tokens, USD (when the price is known) and wall seconds."""
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


def _context(t: Trajectory, with_ground_truth: bool) -> dict[str, Any]:
    return {"question": t.question, "ground_truth": t.ground_truth if with_ground_truth else None, "agents": t.agents}


@dataclass
class Asking:
    """One run of an LLM attribution method: the trace, the chat, the result it fills, and how prompts show the run."""

    t: Trajectory
    chat: Chat
    result: Attribution
    max_prompt_chars: int

    def __call__(self, template: str, first: int, last: int, **variables: Any) -> str:
        """Ask with `template` showing steps `first..last` (cut to fit: `result.truncated`); the answer is also
        kept in `result.answers`."""
        steps, truncated = render_steps(self.t, first, last, self.max_prompt_chars)
        self.result.truncated |= truncated
        answer = self.chat(render(template, steps=steps, **variables, **_context(self.t, self.result.with_ground_truth)))
        self.result.answers.append(answer)
        return answer


def llm_method(name: str) -> Callable[[Callable[[Asking], None]], Callable[..., Attribution]]:
    """Register `fn(asking)`, which asks its questions through `asking` and fills `asking.result`, as the
    attribution method `name` taking the options every LLM method takes; the result carries the chat's cost."""

    def register(fn: Callable[[Asking], None]) -> Callable[..., Attribution]:
        def method(
            trace: Trajectory | dict[str, Any],
            model: str,
            with_ground_truth: bool = True,
            api_base: str | None = None,
            max_prompt_chars: int = 60_000,
            max_tokens: int = 512,
        ) -> Attribution:
            asking = Asking(as_trajectory(trace), Chat(model, api_base=api_base, max_tokens=max_tokens),
                            Attribution(method=name, model=model, with_ground_truth=with_ground_truth), max_prompt_chars)
            fn(asking)
            asking.result.cost = asking.chat.usage
            return asking.result

        method.__name__, method.__qualname__, method.__doc__, method.__module__ = (
            fn.__name__, fn.__qualname__, fn.__doc__, fn.__module__)
        return tracer(name)(method)

    return register


@llm_method("all_at_once")
def all_at_once(asking: Asking) -> None:
    """Show the whole run once and ask for agent, step and reason in one answer (one LLM call)."""
    t, result = asking.t, asking.result
    parsed = parse_attribution(asking("tracer_all_at_once.j2", 0, len(t.steps) - 1), t.agents, len(t.steps))
    if parsed.ok:
        result.agent, result.step = parsed.agent, parsed.step
    result.reason, result.error = parsed.reason, parsed.error


@llm_method("step_by_step")
def step_by_step(asking: Asking) -> None:
    """Walk the agent steps in order, asking of each "is this the decisive error?"; stop at the first yes.

    Tool, environment and human steps are shown as context but never asked about. An answer that is
    neither yes nor no counts as "not flagged" and is noted; a run where no step is flagged has no
    prediction (`error="no step flagged"`).
    """
    result = asking.result
    for step in asking.t.steps:
        if step.kind != "agent":
            continue
        answer = asking("tracer_step_by_step.j2", 0, step.index, current=step)
        verdict = parse_yes_no(answer)
        if verdict is None:
            result.notes.append(f"step {step.index}: answer is neither yes nor no")
        elif verdict:
            result.agent, result.step, result.reason = step.agent, step.index, answer.strip()
            return
    result.error = "no step flagged"


@llm_method("binary_search")
def binary_search(asking: Asking) -> None:
    """Halve the range of agent steps that holds the error, asking "lower or upper half?" each time.

    ceil(log2(n)) calls for n agent steps. The range shown includes the tool/human steps between its
    ends. An answer naming neither half stops the search with `error` (the range is noted).
    """
    t, result = asking.t, asking.result
    candidates = [s.index for s in t.steps if s.kind == "agent"]
    if not candidates:
        result.error = "no agent step in the run"
        return
    lo, hi = 0, len(candidates) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        lower, upper = (candidates[lo], candidates[mid]), (candidates[mid + 1], candidates[hi])
        half = parse_half(asking("tracer_binary_search.j2", lower[0], upper[1], lower=lower, upper=upper))
        if half is None:
            result.error = f"unparseable: the answer names neither half of steps {lower[0]}..{upper[1]}"
            return
        lo, hi = (lo, mid) if half == "lower" else (mid + 1, hi)
    result.step = candidates[lo]
    result.agent = t.steps[result.step].agent
