"""Fault injection on a successful run (AgenTracer, Algorithm 1 lines 8-17): failures labelled by construction.

The perturber LLM picks an agent step and a SPECIFIC corruption of it; the corrupted action is forced
(`Intervention(kind="corruption")`) and the run re-simulated. If Omega now says failure, the corrupted
run is labelled `(agent(t), t)` by construction (verified). Otherwise the next candidate is tried: more
perturber proposals with the ineffective ones fed back, then the programmatic perturbations (no LLM),
all within the budget.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rootstep.prompts import render
from rootstep.warehouse import Annotation, Cost, Evidence, Intervention, Replay, Trajectory

from ._attempt import Asked, ChatLike, ReplayFn, as_index, ask_valid, json_object, model_name, same_text, trajectory_vars, try_intervention
from ._budget import Budget, Meter
from ._counterfactual import TaskContext
from ._perturbations import Perturbation, programmatic_perturbations


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

    @classmethod
    def of(cls, p: Perturbation) -> "Corruption":
        return cls(step=p.step, agent=p.agent, content=p.content, tool_calls=p.tool_calls,
                   description=p.description, source="programmatic", name=p.name)


class InjectionAttempt(BaseModel):
    corruption: Corruption
    replay: Replay

    @property
    def flipped(self) -> bool:
        return self.replay.success_after is False


class InjectionResult(BaseModel):
    """The labelled failure (when a corruption flipped the run) and every attempt behind it.

    `annotation` labels `failed_run` (the corrupted re-simulation, a new run whose `parent_run_id` is
    the success), not the success itself. It is None when nothing flipped: a success that resisted
    every corruption is not an unresolved failure; the attempts and `cost` still record the work.
    """

    annotation: Annotation | None = None
    failed_run: Trajectory | None = None
    replays: list[Replay] = Field(default_factory=list)
    attempts: list[InjectionAttempt] = Field(default_factory=list)
    asked: list[Asked] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    cost: Cost = Field(default_factory=Cost)

    @property
    def flipped(self) -> bool:
        return self.annotation is not None


def validate_corruption(trajectory: Trajectory, answer: str, tried: set[tuple[int, str]]) -> tuple[Corruption | None, str | None]:
    """Parse and check a perturber answer: a JSON object whose `step` is an existing agent step and whose
    `corrupted_content` is non-empty, differs from the step and was not tried already."""
    data, problem = json_object(answer)
    if data is None:
        return None, problem
    for key in ("step", "corrupted_content", "description"):
        if key not in data:
            return None, f"the JSON object has no {key!r} key"
    index = as_index(data["step"])
    n = len(trajectory.steps)
    if index is None:
        return None, f"step must be an integer step number, got {data['step']!r}"
    if not 0 <= index < n:
        return None, f"step {index} does not exist: the run has steps 0..{n - 1}"
    step = trajectory.steps[index]
    if step.kind != "agent":
        agent_steps = [s.index for s in trajectory.steps if s.kind == "agent"]
        return None, f"step {index} is a {step.kind} step, not an agent step; only agent steps can be corrupted (agent steps: {agent_steps})"
    content = data["corrupted_content"]
    if not isinstance(content, str) or not content.strip():
        return None, "corrupted_content must be the non-empty corrupted text of the step"
    if same_text(content, step.content):
        return None, f"corrupted_content is identical to step {index}; the corruption must change it"
    if (index, " ".join(content.split())) in tried:
        return None, f"this exact corruption of step {index} was already tried and the run still succeeded"
    description = str(data["description"] or "").strip()
    if not description:
        return None, "description must say what specific corruption was made"
    return Corruption(step=index, agent=step.agent, content=content, description=description, source="perturber"), None


def inject_fault(
    trajectory: Trajectory,
    perturber: ChatLike | None = None,
    replay: ReplayFn | None = None,
    budget: Budget | None = None,
    programmatic: bool = True,
    *,
    seed: int = 0,
    task_context: TaskContext | None = None,
    max_prompt_chars: int = 24_000,
) -> InjectionResult:
    """Corrupt one agent step of the successful `trajectory` so that its re-simulation fails.

    Args:
        trajectory: a successful run.
        perturber: the perturber LLM; None uses programmatic perturbations only.
        replay: re-simulates the run with an intervention: `(Trajectory, Verdict, ReplayCost)`.
        budget: `max_candidates` perturber proposals, then programmatic ones while replays remain.
        programmatic: also try the programmatic perturbations (after the perturber's).
        seed: fixes the order of programmatic candidates.

    A replay that diverges or raises decides nothing and the next candidate is tried.
    """
    if replay is None:
        raise TypeError("inject_fault needs a replay callable")
    if trajectory.success is False:
        raise ValueError(f"run {trajectory.id} failed; fault injection needs a success (use counterfactual search)")
    if perturber is None and not programmatic:
        raise ValueError("no perturber and programmatic=False: there is nothing to inject")
    budget = budget or Budget()
    meter = Meter(budget)
    context = task_context or TaskContext.of(trajectory)
    attempts: list[InjectionAttempt] = []
    asked: list[Asked] = []
    notes: list[str] = []
    flipped: tuple[InjectionAttempt, Trajectory] | None = None

    def attempt(c: Corruption) -> bool:
        nonlocal flipped
        intervention = Intervention(run_id=trajectory.id, step=c.step, new_content=c.content, kind="corruption",
                                    agent=c.agent, tool_calls=c.tool_calls)
        row, result, verdict = try_intervention(trajectory, intervention, replay, meter, "fault_injection")
        a = InjectionAttempt(corruption=c, replay=row)
        attempts.append(a)
        if a.flipped and result is not None:
            flipped = (a, result)
            return True
        return False

    if perturber is not None:
        base = {"question": context.question or trajectory.question,
                "ground_truth": context.ground_truth if context.ground_truth is not None else trajectory.ground_truth,
                **trajectory_vars(trajectory, max_prompt_chars)}
        for _ in range(budget.max_candidates):
            stop = meter.cannot_replay()
            if stop:
                notes.append(f"perturber proposals stopped: {stop}")
                break
            tried_list = [{"step": a.corruption.step, "description": a.corruption.description} for a in attempts]
            tried = {(a.corruption.step, " ".join(a.corruption.content.split())) for a in attempts}
            corruption, why = ask_valid(
                perturber,
                lambda prev, problem: render("perturber.j2", **base, tried=tried_list, previous_answer=prev, problem=problem),
                lambda answer: validate_corruption(trajectory, answer, tried),
                meter, asked, "perturber.j2",
            )
            if corruption is None:
                notes.append(f"perturber proposals stopped: {why}")
                break
            if attempt(corruption):
                break

    if flipped is None and programmatic:
        candidates = programmatic_perturbations(trajectory, seed)
        if not candidates:
            notes.append("no programmatic perturbation applies to this run's agent steps")
        for p in candidates:
            stop = meter.cannot_replay()
            if stop:
                notes.append(f"programmatic candidates stopped: {stop}")
                break
            if attempt(Corruption.of(p)):
                break

    replays = [a.replay for a in attempts]
    cost = meter.cost()
    if flipped is None:
        notes.append(f"no corruption flipped the run ({len(attempts)} tried)")
        return InjectionResult(replays=replays, attempts=attempts, asked=asked, notes=notes, cost=cost)
    proof, failed_run = flipped
    c = proof.corruption
    annotator = model_name(perturber, "perturber") if c.source == "perturber" else f"programmatic:{c.name}"
    annotation = Annotation(
        run_id=failed_run.id,
        framework=failed_run.framework,
        benchmark=failed_run.benchmark,
        method="fault_injection",
        agent=c.agent,
        step=c.step,
        verified=True,
        annotator=annotator,
        evidence=Evidence(
            reason=c.description,
            corruption=c.content,
            replay_ids=[r.id for r in replays],
            notes=[f"step {a.corruption.step} ({a.corruption.source}{':' + a.corruption.name if a.corruption.name else ''}): "
                   + ("flipped the run to failure" if a.flipped else "diverged" if a.replay.divergence
                      else "replay error" if a.replay.error else "run still succeeded") + f" [{a.replay.id}]"
                   for a in attempts] + notes,
        ),
        cost=cost,
        metadata={"source_run_id": trajectory.id, "proof_replay_id": proof.replay.id, "corruption_source": c.source,
                  "perturbation": c.name, "tool_calls_changed": c.tool_calls is not None},
    )
    return InjectionResult(annotation=annotation, failed_run=failed_run, replays=replays, attempts=attempts,
                           asked=asked, notes=notes, cost=cost)
