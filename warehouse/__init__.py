"""The trajectory data model and the warehouse (Parquet + DuckDB) that stores it.

Public face: the models (`Trajectory`, `Step`, `LLMCall`, `Replay`, `Intervention`, `Annotation`,
`Task`, `Verdict`), `Warehouse`, and the Who&When importer/exporter.
"""

from ._ids import canonical_json, content_id
from ._models import (
    Annotation,
    AnnotationMethod,
    CallMode,
    CallPurpose,
    Cost,
    Evidence,
    Intervention,
    LLMCall,
    Replay,
    ReplayPurpose,
    Step,
    StepKind,
    Task,
    TaskKind,
    Trajectory,
    Verdict,
    utcnow,
)
from ._store import DEFAULT_LOCATION, Warehouse, WriteReport, default_location
from .errors import InputError, RootstepError, WarehouseError

__all__ = [
    "Annotation",
    "AnnotationMethod",
    "CallMode",
    "CallPurpose",
    "Cost",
    "DEFAULT_LOCATION",
    "Evidence",
    "InputError",
    "Intervention",
    "LLMCall",
    "Replay",
    "ReplayPurpose",
    "RootstepError",
    "Step",
    "StepKind",
    "Task",
    "TaskKind",
    "Trajectory",
    "Verdict",
    "Warehouse",
    "WarehouseError",
    "WriteReport",
    "canonical_json",
    "content_id",
    "default_location",
    "utcnow",
]
