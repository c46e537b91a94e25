"""The web UI (`rootstep ui`): look at labelled runs, their evidence and replays; attribute a trace.

Public face: `create_app` and `UISettings` (the ASGI app over one warehouse), `serve` (run it in this
process), `parse_upload` (how an uploaded trace file is read), `run_query` / `QueryRefused` /
`sandbox_connection` (the read-only SQL box), `align` (the side-by-side alignment of a run and one of
its replays). The command line is `rootstep.ui.cli`; see docs/ui.md.
"""

from typing import TYPE_CHECKING

from rootstep.model import lazy_exports

# Lazy public face: `rootstep --help` imports `rootstep.ui.cli`, which must not pay for FastAPI.
_EXPORTS = {
    "Alignment": "_align",
    "Row": "_align",
    "align": "_align",
    "UISettings": "_app",
    "create_app": "_app",
    "parse_upload": "_attribute",
    "serve": "_serve",
    "QueryRefused": "_sql",
    "QueryResult": "_sql",
    "run_query": "_sql",
    "sandbox_connection": "_sql",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:
    from ._align import Alignment, Row, align
    from ._app import UISettings, create_app
    from ._attribute import parse_upload
    from ._serve import serve
    from ._sql import QueryRefused, QueryResult, run_query, sandbox_connection

__all__ = [
    "Alignment", "QueryRefused", "QueryResult", "Row", "UISettings", "align", "create_app", "parse_upload",
    "run_query", "sandbox_connection", "serve",
]
assert sorted(__all__) == sorted(_EXPORTS), "ui: __all__ and the lazy exports disagree"
