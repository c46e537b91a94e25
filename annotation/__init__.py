"""The annotation stage: pure algorithms that label a run (no Prefect, no Docker, no I/O of their own).

They take a chat function (the analyzer or perturber model) and a replay function (a framework
adapter's `replay`, or a scripted one in tests) and return typed results; the Prefect flows in
`rootstep.flows` run them and write what they return.

A search runs in three phases, a module each: proposing a fix or a corruption (`_propose`: asking the
analyzer or perturber, re-asking, checking the text, retaking or rewriting a step), trying it (`_trial`:
replay, controls, confidence, edit size) and the searches themselves (`_counterfactual`, `_injection`),
which only order the phases and build the result.

Public face:
- `find_decisive_step`: counterfactual search on a failure -> `CounterfactualResult` (verified label or
  unresolved); `sequential_scan`: the naive from-step-0 baseline; `TaskContext`, `Diagnosis`, `Attempt`.
- `inject_fault`: fault injection on a success -> `InjectionResult` (a failure labelled by construction);
  `Corruption`, `InjectionAttempt`, `InjectionMode`.
- `programmatic_perturbations` and the perturbations in `PERTURBATIONS` (no LLM needed).
- `Budget` (limits per label: the search's own work, and an outer wall clock), `Meter` (what a search spent, in
  `rootstep.model.Usage`, and the limit that cut it: `Cut`; its record `rootstep.model.SearchStats`), `ReplayOutcome`
  (what a replay callable reports: its `Usage`, a divergence or an error), and `ReplayFn`, what a search calls
  to try an intervention (over a framework adapter: `rootstep.flows.adapter_replay`; the core imports no
  adapter).
- `Asked`, `with_transcript`: the analyzer's / perturber's calls, kept on the annotation as evidence.
- `Effect`, `effect`, `band`, `probability_greater`, `wilson`: the confidence of a label (the probability
  that the intervention raised the flip rate against the controls, and a Wilson interval on the difference).
See docs/annotation.md.
"""


from ._budget import Budget, Cut, Meter
from ._confidence import Effect, band, effect, probability_greater, wilson
from ._counterfactual import CounterfactualResult, find_decisive_step, sequential_scan
from ._injection import InjectionAttempt, InjectionMode, InjectionResult, inject_fault
from ._perturbations import (
    PERTURBATIONS,
    Perturbation,
    alter_tool_argument,
    drop_tool_call,
    repeat_tool_call,
    change_constant,
    drop_code_line,
    flip_operator,
    programmatic_perturbations,
    truncate_message,
)
from ._propose import (
    Asked,
    Corruption,
    Diagnosis,
    TaskContext,
    answer_leaks,
    failed_turn,
    rewrite_budget,
    validate_corruption,
    validate_diagnosis,
    with_transcript,
)
from ._trial import Attempt, ReplayFn, ReplayOutcome, proven_identical

__all__ = [
    "PERTURBATIONS",
    "Asked",
    "Attempt",
    "Budget",
    "Cut",
    "Corruption",
    "CounterfactualResult",
    "Diagnosis",
    "Effect",
    "InjectionAttempt",
    "InjectionMode",
    "InjectionResult",
    "Meter",
    "Perturbation",
    "ReplayFn",
    "ReplayOutcome",
    "TaskContext",
    "alter_tool_argument",
    "drop_tool_call",
    "failed_turn",
    "repeat_tool_call",
    "answer_leaks",
    "band",
    "change_constant",
    "drop_code_line",
    "effect",
    "find_decisive_step",
    "flip_operator",
    "inject_fault",
    "programmatic_perturbations",
    "proven_identical",
    "rewrite_budget",
    "with_transcript",
    "sequential_scan",
    "truncate_message",
    "validate_corruption",
    "validate_diagnosis",
    "probability_greater",
    "wilson",
]
