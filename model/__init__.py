"""The bottom floor: the types every stage speaks, and what every stage is built on.

- the trajectory model (`Trajectory` with its `Recording` and `ReplayProvenance`, `Step`, `LLMCall`, `Replay`,
  `Intervention`, `Annotation`, `Task`, `Verdict`, `Usage`: the one cost type), content ids and agent matching,
  text that loops to its end (`looping_tail`);
- the errors that name the file, the field and the problem (`RootstepError` and its kinds);
- `Registry`, the one registry type behind every named, pluggable thing (adapters, verifiers, benchmarks,
  tracers, trace formats, perturbations), and `lazy_exports`, the lazy public face of a stage.

It imports pydantic and the standard library, nothing of the other stages: every stage may import it.
"""

from ._agents import match_agent
from ._ids import canonical_json, content_id
from ._lazy import lazy_exports
from ._repetition import MAX_PERIOD, MIN_COPIES, MIN_SPAN, LoopingTail, collapse_loop, loop_period, looping_tail
from ._models import (
    Annotation,
    AnnotationMethod,
    Asked,
    CallMode,
    CallPurpose,
    CUT_LIMIT_NAMES,
    CutLimit,
    EarliestRule,
    Edit,
    Evidence,
    FlipProof,
    Intervention,
    LLMCall,
    Recording,
    Replay,
    ReplayProvenance,
    ReplayPurpose,
    Step,
    SearchStats,
    StepKind,
    SystemRef,
    Task,
    TaskKind,
    Trajectory,
    Usage,
    Verdict,
    utcnow,
)
from .errors import InputError, MissingRecording, RootstepError, WarehouseError
from .registry import Entry, Origin, Registry, UnknownName, entry_point_dist, plugin_errors

__all__ = [
    "LoopingTail",
    "MAX_PERIOD",
    "MIN_COPIES",
    "MIN_SPAN",
    "collapse_loop",
    "loop_period",
    "looping_tail",
    "Annotation",
    "AnnotationMethod",
    "Asked",
    "CallMode",
    "CallPurpose",
    "CUT_LIMIT_NAMES",
    "CutLimit",
    "EarliestRule",
    "Edit",
    "Entry",
    "Evidence",
    "FlipProof",
    "InputError",
    "Intervention",
    "LLMCall",
    "MissingRecording",
    "Origin",
    "Recording",
    "Registry",
    "Replay",
    "ReplayProvenance",
    "ReplayPurpose",
    "RootstepError",
    "SearchStats",
    "Step",
    "StepKind",
    "SystemRef",
    "Task",
    "TaskKind",
    "Trajectory",
    "UnknownName",
    "Usage",
    "Verdict",
    "WarehouseError",
    "canonical_json",
    "content_id",
    "entry_point_dist",
    "lazy_exports",
    "match_agent",
    "plugin_errors",
    "utcnow",
]
