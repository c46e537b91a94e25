"""Prefect flows and tasks: collect, annotate (counterfactual, inject), pipeline, backfill, deployments.

The flows run the pure algorithms of the annotation stage (`rootstep.annotation`) and are the only
writers of what they return. Each flow lives in its own module, imported on demand (importing this
package does not import Prefect): `rootstep.flows.collect.collect`, `rootstep.flows.annotate.annotate` (the
one annotate flow that `rootstep annotate`, the pipeline and deployments run; `.counterfactual`, `.inject` and
`.recheck` run it with one stage), `rootstep.flows.pipeline.pipeline`, `rootstep.flows.deploy` (deployments, backfill).
What one search does is in `_searches` (its unit spec, its analyzer and its replay); the defaults every
command reads are `DEFAULTS` (`_defaults`). See
docs/pipeline.md. `Runner` says where their units of work run (`runner=`): threads of the flow's
process, or a Dask / Ray cluster; `open_session` opens the gateway, warehouse and limits a unit runs in,
and `perform(spec, session)` runs one unit (`rootstep run` collects this way, without Prefect; the
caller stores the outcome with `session.store`). `adapter_replay(adapter, trajectory)` is the annotation
searches' `ReplayFn` over a framework adapter (imported on first use).
"""

from rootstep.model import lazy_exports

from ._defaults import DEFAULTS, Defaults
from ._runner import Runner
from ._session import open_session
from ._unit import perform

__getattr__ = lazy_exports(__name__, {"adapter_replay": "_replay"})

__all__ = ["DEFAULTS", "Defaults", "Runner", "adapter_replay", "open_session", "perform"]
