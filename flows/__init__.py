"""Prefect flows and tasks: collect, annotate (counterfactual, inject), pipeline, backfill, deployments.

Public face of the annotation core (pure functions, no Prefect):
- `find_decisive_step`: counterfactual search on a failure -> `CounterfactualResult` (verified label or
  unresolved); `sequential_scan`: the naive from-step-0 baseline; `TaskContext`, `Diagnosis`, `Attempt`.
- `inject_fault`: fault injection on a success -> `InjectionResult` (a failure labelled by construction);
  `Corruption`, `InjectionAttempt`.
- `programmatic_perturbations` and the perturbations in `PERTURBATIONS` (no LLM needed).
- `Budget` (limits per label), `ReplayCost` (what a replay callable reports), `ReplayFn`, and
  `adapter_replay(adapter, trajectory)`, the `ReplayFn` over a framework adapter's `replay`.

The Prefect flows are in their own modules, imported on demand (importing this package does not import
Prefect): `rootstep.flows.collect.collect`, `rootstep.flows.annotate.counterfactual` / `.inject`,
`rootstep.flows.pipeline.pipeline`, `rootstep.flows.deploy` (deployments, backfill). See docs/pipeline.md.
`Runner` says where their tasks run (`runner=`): threads of the flow's process, or a Dask / Ray cluster.
"""

from ._attempt import Asked, ReplayCost, ReplayFn, adapter_replay
from ._budget import Budget, Meter
from ._counterfactual import (
    Attempt,
    CounterfactualResult,
    Diagnosis,
    TaskContext,
    find_decisive_step,
    sequential_scan,
    validate_diagnosis,
)
from ._injection import Corruption, InjectionAttempt, InjectionResult, inject_fault, validate_corruption
from ._perturbations import (
    PERTURBATIONS,
    Perturbation,
    alter_tool_argument,
    change_constant,
    drop_code_line,
    flip_operator,
    programmatic_perturbations,
    truncate_message,
)
from ._runner import Runner

__all__ = [
    "PERTURBATIONS",
    "Asked",
    "Attempt",
    "Budget",
    "Corruption",
    "CounterfactualResult",
    "Diagnosis",
    "InjectionAttempt",
    "InjectionResult",
    "Meter",
    "Perturbation",
    "ReplayCost",
    "ReplayFn",
    "Runner",
    "TaskContext",
    "adapter_replay",
    "alter_tool_argument",
    "change_constant",
    "drop_code_line",
    "find_decisive_step",
    "flip_operator",
    "inject_fault",
    "programmatic_perturbations",
    "sequential_scan",
    "truncate_message",
    "validate_corruption",
    "validate_diagnosis",
]
