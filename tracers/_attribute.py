"""One trace, one method: what `rootstep attribute FILE_OR_RUN --method M` runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from rootstep.model import RootstepError, Trajectory
from rootstep.warehouse import Warehouse
from rootstep.traces.whowhen import load_file

from ._methods import NO_PROVIDER, Attribution, TracerError, default_model, run_tracer


def load_trace(source: str, warehouse: Callable[[], Warehouse]) -> tuple[str | None, Trajectory]:
    """`(run id or None, trajectory)` of a Who&When / plain-trace JSON file, or of a run id (or unambiguous
    prefix) in the warehouse. `warehouse` opens it, only when a run id has to be looked up."""
    if Path(source).is_file():
        return None, load_file(source)[0]
    if Path(source).exists():
        raise TracerError(f"{source}: not a file (give a JSON trace or a run id)")
    wh = warehouse()
    try:
        run_id = wh.resolve_run_id(source)
    except RootstepError:
        raise TracerError(f"{source}: no such file, and no run id in {wh.location} starts with it") from None
    return run_id, wh.trajectory(run_id)


def attribute(
    source: str,
    method: str,
    warehouse: Callable[[], Warehouse],
    *,
    model: str | None = None,
    with_ground_truth: bool = True,
    counterpart: str | None = None,
    **options: Any,
) -> tuple[str | None, Trajectory, Attribution]:
    """Attribute the trace at `source` (file or run id) with `method`; see `load_trace` for `warehouse`.

    `model` means what the method uses a model for: the LLM (all_at_once, step_by_step, binary_search),
    the local scoring model (confidence), a model directory or id (learned); divergence takes none and
    compares with `counterpart` (a file or run id) or a successful run of the task in the warehouse.
    Raises `TracerError` (or `InputError` for a bad file) when the method cannot attribute the trace.
    """
    run_id, trajectory = load_trace(source, warehouse)
    kwargs: dict[str, Any] = {"with_ground_truth": with_ground_truth, "run_id": run_id, **options}
    if model is not None or method not in NO_PROVIDER:
        kwargs["model"] = model or default_model(method)
    if counterpart is not None:
        kwargs["counterpart"] = load_trace(counterpart, warehouse)[1]
    needs_warehouse = run_id is not None or (method == "learned" and not (model and Path(model).is_dir())) or (
        method == "divergence" and counterpart is None)
    if needs_warehouse:
        kwargs["warehouse"] = warehouse()
    return run_id, trajectory, run_tracer(method, trajectory, **kwargs)
