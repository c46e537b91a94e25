"""The warehouse (Parquet + DuckDB) that stores trajectories, calls, replays and annotations.

Public face: `Warehouse`, its Arrow schemas and views. The types it stores
are `rootstep.model`'s.
"""

from ._catalog import PUBLIC_VIEWS, view_statements
from ._schemas import PARTITION_COLUMNS, SCHEMAS, annotation_from_row, llm_call_from_row
from ._store import DEFAULT_LOCATION, Warehouse, WriteReport, default_location

__all__ = [
    "DEFAULT_LOCATION",
    "PARTITION_COLUMNS",
    "PUBLIC_VIEWS",
    "SCHEMAS",
    "Warehouse",
    "WriteReport",
    "annotation_from_row",
    "default_location",
    "llm_call_from_row",
    "view_statements",
]
