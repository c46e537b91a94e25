"""Score-based attribution: the model's own confidence, step by step; a sudden drop marks the step.

Per agent step, the token log-probabilities of what the agent wrote:
* recorded: from the step's LLM calls, when the provider returned them (`llm_calls.response` ->
  `choices[0].logprobs.content[*].logprob`, the OpenAI form; the calls are the step's `call_ids` of
  purpose `step`). Used only when EVERY agent step has them: two models' log-probabilities are not on
  one scale;
* otherwise local: the step's text scored under the offline local model (llama.cpp, `local/<name>`),
  conditioned on the question and the run so far. llama.cpp returns no log-probabilities for prompt
  tokens, so the step's text, as the model's own token ids (`tracers._spm`), is forced as the completion
  by a token grammar, and the log-probability the model gave each forced token is read (the model's
  distribution, before the grammar). Bounded for speed: the first `max_step_tokens` tokens of each step, each earlier step shown
  with its first `CONTEXT_STEP_CHARS` characters, the context cut by half whenever it passes
  `MAX_CONTEXT_CHARS` (the rest of the time llama.cpp reuses the cached prefix).

A step's score is the mean log-probability of its scored tokens. `criterion="drop"` (default) returns
the agent step with the sharpest drop: its score below the mean of the earlier agent steps' scores (the
first agent step is compared with the mean of all steps); `"surprise"` returns the lowest score. Ties:
the earlier step. The scores are the evidence (`Attribution.details["scores"]`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import mean
from typing import Any, Literal

from rootstep.model import LLMCall, Trajectory
from rootstep.warehouse import Warehouse

from ._methods import Attribution, TracerError, as_trajectory, tracer

from rootstep.gateway import DEFAULT_SCORER_MODEL as DEFAULT_SCORER
MAX_STEP_TOKENS = 16
CONTEXT_STEP_CHARS = 200
QUESTION_CHARS = 400
MAX_CONTEXT_CHARS = 6000
Criterion = Literal["drop", "surprise"]
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass
class StepScore:
    """The confidence of one agent step: mean and lowest token log-probability over `tokens` tokens."""

    step: int
    mean_logprob: float
    min_logprob: float
    tokens: int
    source: Literal["recorded", "local"]


def _from_logprobs(step: int, values: list[float], source: Literal["recorded", "local"]) -> StepScore | None:
    return StepScore(step, mean(values), min(values), len(values), source) if values else None


def recorded_scores(trajectory: Trajectory, calls: Sequence[LLMCall]) -> dict[int, StepScore]:
    """Scores of the agent steps whose producing calls carry token log-probabilities."""
    by_id = {c.id: c for c in calls}
    out: dict[int, StepScore] = {}
    for step in trajectory.steps:
        if step.kind != "agent":
            continue
        values: list[float] = []
        for call_id in step.call_ids:
            call = by_id.get(call_id)
            if call is None or call.purpose != "step":
                continue
            choices = call.response.get("choices") or [{}]
            content = ((choices[0] or {}).get("logprobs") or {}).get("content") or []
            values += [float(t["logprob"]) for t in content if isinstance(t, dict) and t.get("logprob") is not None]
        score = _from_logprobs(step.index, values, "recorded")
        if score is not None:
            out[step.index] = score
    return out


def stored_calls(warehouse: Warehouse, trajectory: Trajectory) -> list[LLMCall]:
    """The LLM calls behind the trajectory's steps, from the warehouse's `llm_calls` view."""
    from rootstep.warehouse import llm_call_from_row

    ids = [c for s in trajectory.steps for c in s.call_ids]
    if not ids:
        return []
    return [llm_call_from_row(r) for r in warehouse.rows("SELECT * FROM llm_calls WHERE id IN (SELECT unnest(?))", [ids])]


def _clean(text: str) -> str:
    return _CONTROL.sub(" ", text)


def _forced(engine: Any, prompt: str, token_ids: list[int]) -> list[float]:
    """Log-probabilities the model gives `token_ids` as its continuation of `prompt` (forced by a token grammar)."""
    if not token_ids:
        return []
    body = {"prompt": prompt, "max_tokens": len(token_ids), "n_probs": 1, "temperature": 0, "cache_prompt": True,
            "grammar": "root ::= " + " ".join(f"<[{t}]>" for t in token_ids)}
    result = engine.complete(body)
    tokens = ((result["choices"][0].get("logprobs") or {}).get("content")) or []
    return [float(t["logprob"]) for t in tokens[: len(token_ids)]]


def local_scores(trajectory: Trajectory, model: str = DEFAULT_SCORER, max_step_tokens: int = MAX_STEP_TOKENS) -> dict[int, StepScore]:
    """Every agent step's text scored under the local llama.cpp model `model` (`local/<name>`)."""
    if not model.startswith("local/"):
        raise TracerError(
            f"--model {model!r}: the confidence method scores text under a local llama.cpp model (local/...); the run's "
            "recorded calls carry no log-probabilities for every agent step"
        )
    from rootstep.gateway import engine, gguf_path

    from ._spm import vocabulary

    from rootstep.gateway import LOCAL_MODELS

    name = model.split("/", 1)[1]
    spec = LOCAL_MODELS.get(name)
    if spec is not None and spec.instruct:
        raise TracerError(
            f"--model {model!r}: the confidence method forces a step's own tokens, read with a SentencePiece "
            f"vocabulary; {model} has a byte-level BPE one. Use {DEFAULT_SCORER} (the default)")
    llm, tokenizer = engine(name), vocabulary(gguf_path(name))
    header = "The following is a conversation between agents working on a task.\n\n"
    if trajectory.question:
        header += f"Task: {_clean(trajectory.question[:QUESTION_CHARS])}\n\n"
    context: list[str] = []
    out: dict[int, StepScore] = {}
    for step in trajectory.steps:
        shown = _clean(" ".join(step.content.split())[:CONTEXT_STEP_CHARS]) or "(empty)"
        if step.kind == "agent":
            ids = tokenizer.encode(" " + shown)[:max_step_tokens]
            values = _forced(llm, header + "".join(context) + f"{step.agent}:", ids)
            score = _from_logprobs(step.index, values, "local")
            if score is not None:
                out[step.index] = score
        context.append(f"{step.agent}: {shown}\n\n")
        if sum(map(len, context)) > MAX_CONTEXT_CHARS:  # cut by half: the next steps reuse the new prefix
            while context and sum(map(len, context)) > MAX_CONTEXT_CHARS // 2:
                context.pop(0)
    return out


def confidence_scores(
    trajectory: Trajectory,
    calls: Sequence[LLMCall] | None = None,
    warehouse: Warehouse | None = None,
    model: str = DEFAULT_SCORER,
    max_step_tokens: int = MAX_STEP_TOKENS,
) -> dict[int, StepScore]:
    """The agent steps' scores: recorded log-probabilities when every agent step has them, else local ones."""
    if calls is None and warehouse is not None:
        calls = stored_calls(warehouse, trajectory)
    agent_steps = {s.index for s in trajectory.steps if s.kind == "agent"}
    recorded = recorded_scores(trajectory, calls or [])
    if agent_steps and set(recorded) == agent_steps:
        return recorded
    return local_scores(trajectory, model, max_step_tokens)


def step_values(scores: dict[int, StepScore], criterion: Criterion = "drop") -> dict[int, float]:
    """Per agent step, how strongly it is flagged (higher: more suspicious) under `criterion`."""
    ordered = sorted(scores)
    if criterion == "surprise":
        return {i: -scores[i].mean_logprob for i in ordered}
    overall = mean(s.mean_logprob for s in scores.values()) if scores else 0.0
    out: dict[int, float] = {}
    for position, i in enumerate(ordered):
        earlier = [scores[j].mean_logprob for j in ordered[:position]]
        out[i] = (mean(earlier) if earlier else overall) - scores[i].mean_logprob
    return out


@tracer("confidence")
def confidence(
    trace: Trajectory | dict[str, Any],
    model: str = DEFAULT_SCORER,
    warehouse: Warehouse | None = None,
    calls: Sequence[LLMCall] | None = None,
    criterion: Criterion = "drop",
    max_step_tokens: int = MAX_STEP_TOKENS,
    with_ground_truth: bool = True,
) -> Attribution:
    """The agent step where the model's confidence drops most sharply (or is lowest), with the scores as evidence.

    `calls` are the run's recorded LLM calls (looked up in `warehouse` when not given); `model` is the
    local model that scores the steps when the calls carry no log-probabilities.
    """
    t = as_trajectory(trace)
    started = time.perf_counter()
    scores = confidence_scores(t, calls, warehouse, model, max_step_tokens)
    source = next(iter(scores.values())).source if scores else "local"
    result = Attribution(method="confidence", model="recorded-logprobs" if source == "recorded" else model,
                         with_ground_truth=with_ground_truth,
                         details={"criterion": criterion, "source": source,
                                  "scores": {str(i): asdict(s) for i, s in scores.items()}})
    if not scores:
        result.error = "no agent step to score"
    else:
        values = step_values(scores, criterion)
        best = min(values, key=lambda i: (-values[i], i))
        s = scores[best]
        result.step, result.agent = best, t.steps[best].agent
        what = (f"confidence drops by {values[best]:.2f} nats per token" if criterion == "drop"
                else f"surprise is highest ({values[best]:.2f} nats per token)")
        result.reason = (f"the {source} {what} at step {best} (mean log-prob {s.mean_logprob:.2f}, lowest token "
                         f"{s.min_logprob:.2f}, over its first {s.tokens} tokens)")
    result.cost.seconds = time.perf_counter() - started
    return result
