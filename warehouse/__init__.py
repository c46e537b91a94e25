"""The trajectory data model and the warehouse (Parquet + DuckDB) that stores it.

Public face: the models (`Trajectory` with its `Recording` and `ReplayProvenance`, `Step`, `LLMCall`,
`Replay`, `Intervention`, `Annotation`, `Task`, `Verdict`, `Usage`: the one cost type), `Warehouse`, and the
Who&When importer/exporter.
"""

from ._catalog import PUBLIC_VIEWS, view_statements
from ._ids import canonical_json, content_id
from ._models import (
    Annotation,
    AnnotationMethod,
    Asked,
    CallMode,
    CallPurpose,
    Evidence,
    Intervention,
    LLMCall,
    Replay,
    ReplayPurpose,
    Step,
    StepKind,
    Task,
    TaskKind,
    Recording,
    ReplayProvenance,
    SystemRef,
    Trajectory,
    Usage,
    Verdict,
    utcnow,
)
from ._schemas import PARTITION_COLUMNS, SCHEMAS, annotation_from_row, llm_call_from_row
from ._store import DEFAULT_LOCATION, Warehouse, WriteReport, default_location
from .errors import InputError, MissingRecording, RootstepError, WarehouseError

__all__ = [
    "DEFAULT_LOCATION",
    "PARTITION_COLUMNS",
    "PUBLIC_VIEWS",
    "SCHEMAS",
    "Annotation",
    "AnnotationMethod",
    "Asked",
    "CallMode",
    "CallPurpose",
    "Evidence",
    "InputError",
    "Intervention",
    "LLMCall",
    "MissingRecording",
    "Recording",
    "Replay",
    "ReplayProvenance",
    "ReplayPurpose",
    "RootstepError",
    "Step",
    "SystemRef",
    "StepKind",
    "Task",
    "TaskKind",
    "Trajectory",
    "Usage",
    "Verdict",
    "Warehouse",
    "WarehouseError",
    "WriteReport",
    "annotation_from_row",
    "canonical_json",
    "content_id",
    "default_location",
    "llm_call_from_row",
    "utcnow",
    "view_statements",
]
