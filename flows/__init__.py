"""Prefect flows and tasks: collect, annotate (counterfactual, inject), pipeline, backfill, deployments.

The flows run the pure algorithms of the annotation stage (`rootstep.annotation`) and are the only
writers of what they return. Each flow lives in its own module, imported on demand (importing this
package does not import Prefect): `rootstep.flows.collect.collect`, `rootstep.flows.annotate.counterfactual`
/ `.inject`, `rootstep.flows.pipeline.pipeline`, `rootstep.flows.deploy` (deployments, backfill). See
docs/pipeline.md. `Runner` says where their tasks run (`runner=`): threads of the flow's process, or a
Dask / Ray cluster; `open_session` opens the gateway, warehouse and limits a unit of work runs in
(`rootstep run` collects through it without Prefect).
"""

from ._runner import Runner
from ._session import open_session

__all__ = ["Runner", "open_session"]
