"""The warehouse (Parquet + DuckDB) that stores trajectories, calls, replays and annotations.

Public face: `Warehouse`, its Arrow schemas and views, and the flows' queues as named queries
(`counterfactual_queue`, `inject_queue`, `recheck_queue`), the exports (`rootstep.warehouse.export`) and the atomic
file writers every export uses (`write_text`, `write_jsonl`, `write_parquet`). The warehouse's files are written here
only: other stages write through `Warehouse.write_*`. The types it stores
are `rootstep.model`'s (reading them from here still works, with a `DeprecationWarning`: plugins written
before they moved keep loading).
"""

from ._catalog import PUBLIC_VIEWS, view_statements
from ._schemas import PARTITION_COLUMNS, SCHEMAS, annotation_from_row, llm_call_from_row
from ._queues import counterfactual_queue, inject_queue, recheck_queue, suspect_left_out
from ._store import DEFAULT_LOCATION, Warehouse, WriteReport, default_location
from .export import write_jsonl, write_parquet, write_text



def __getattr__(name: str):
    """The shared types that lived here before `rootstep.model` (`rootstep.warehouse.Verdict`, ...)."""
    import warnings

    import rootstep.model as model

    if name in model.__all__ and name not in ("lazy_exports", "Registry", "Entry", "Origin", "UnknownName",
                                               "entry_point_dist", "plugin_errors"):
        warnings.warn(f"rootstep.warehouse.{name} moved to rootstep.model.{name}", DeprecationWarning, stacklevel=2)
        return getattr(model, name)
    raise AttributeError(f"module 'rootstep.warehouse' has no attribute {name!r}")


__all__ = [
    "DEFAULT_LOCATION",
    "PARTITION_COLUMNS",
    "PUBLIC_VIEWS",
    "SCHEMAS",
    "Warehouse",
    "WriteReport",
    "annotation_from_row",
    "counterfactual_queue",
    "default_location",
    "inject_queue",
    "llm_call_from_row",
    "recheck_queue",
    "suspect_left_out",
    "view_statements",
    "write_jsonl",
    "write_parquet",
    "write_text",
]
