"""Where the flows' tasks run: `--runner thread` (default), `dask` or `ray`.

    from rootstep.flows import Runner
    collect(["ag2"], "gsm8k", runner=Runner(kind="dask", workers=4))               # a local cluster
    pipeline(runner=Runner(kind="dask", address="tcp://scheduler:8786"))           # a running cluster
    pipeline(runner=Runner(kind="ray"))                                            # local Ray (extra `ray`)

* `thread`: Prefect's default `ThreadPoolTaskRunner` in the flow's process; units share the flow's
  `Session` (gateway, limits, warehouse).
* `dask` / `ray`: `prefect_dask.DaskTaskRunner` / `prefect_ray.RayTaskRunner`. Without an address a
  local multi-process cluster is started for the flow (`workers` processes, `threads_per_worker`
  tasks each) and stopped after it; a pipeline starts one and its subflows (collect, annotate) share
  it. Each unit opens a worker session in its process (`rootstep.flows._remote`) and returns its
  outcome; the flow process writes it (the warehouse has one writer; `rootstep.flows._unit`).

Each task run reports its state to the Prefect API of the flow: with the ephemeral API (no
`PREFECT_API_URL`) that is the flow's temporary server on 127.0.0.1, which local workers reach; a
cluster on other machines needs a Prefect server they can reach (`PREFECT_API_URL`), the rootstep
package (and the framework images) installed on every worker, and Docker on each worker's host.
"""

from __future__ import annotations

import importlib
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._remote import WorkerSpec, check_hook, run_setup

if TYPE_CHECKING:
    from ._session import Session

RunnerKind = Literal["thread", "dask", "ray"]


class RunnerUnavailable(RuntimeError):
    """The runner's package is not installed (or the cluster cannot be reached)."""


class Runner(BaseModel):
    """Which task runner the flows use, and the cluster it runs on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: RunnerKind = "thread"
    address: str | None = None
    """dask: a running scheduler (`tcp://host:8786`); ray: a running Ray cluster (`ray://host:10001`,
    `auto`). None: start a local cluster for the flow."""
    workers: int = Field(default=2, ge=1)
    """Worker processes of the local cluster (ignored with `address`)."""
    threads_per_worker: int = Field(default=1, ge=1)
    """Tasks each local worker process runs at once (Ray: CPUs per worker)."""
    setup: tuple[str, ...] = ()
    """`module:function` hooks run once in each process that runs tasks before its first one (for
    example registering scripted models, which live in one process)."""

    _check_setup = field_validator("setup")(lambda v: tuple(check_hook(e) for e in v))

    @model_validator(mode="after")
    def _check(self) -> "Runner":
        if self.kind == "thread" and self.address is not None:
            raise ValueError("runner.address: the thread runner runs in this process; an address is for dask or ray")
        return self

    @property
    def remote(self) -> bool:
        return self.kind != "thread"

    def require(self) -> "Runner":
        """Raise `RunnerUnavailable` (saying what to install) unless this runner's packages import."""
        if self.kind in _EXTRAS:
            _import_extra(self.kind)
        return self


_EXTRAS = {  # runner kind: (cluster package, Prefect task runner module and class, what to install)
    "dask": ("distributed", "prefect_dask", "DaskTaskRunner",
             "needs prefect-dask and dask.distributed ({exc}): pip install 'rootstep[dask]' "
             "(pinned: pip install -c requirements.lock -e '.[dask]')"),
    "ray": ("ray", "prefect_ray", "RayTaskRunner",
            "needs prefect-ray and ray ({exc}); it is an optional extra (the ray wheel is about "
            "80 MB): pip install 'rootstep[ray]' (pinned: pip install -c requirements.lock -e '.[ray]')"),
}


def _import_extra(kind: str) -> tuple[Any, Any]:
    """The cluster package of runner `kind` and its Prefect task runner class; `RunnerUnavailable`,
    saying what to install, when they do not import."""
    package, module, runner_class, needs = _EXTRAS[kind]
    try:
        return importlib.import_module(package), getattr(importlib.import_module(module), runner_class)
    except ImportError as exc:
        raise RunnerUnavailable(f"--runner {kind} {needs.format(exc=exc)}") from exc


@contextmanager
def start_cluster(runner: Runner | None) -> Iterator[Runner | None]:
    """Start the local cluster `runner` asks for (none with an address, or for the thread runner) and
    yield the runner that subflows should use to share it; stop the cluster on exit."""
    if runner is None or not runner.remote or runner.address is not None:
        yield runner
        return
    if runner.kind == "dask":
        distributed, _ = _import_extra("dask")
        with distributed.LocalCluster(n_workers=runner.workers, threads_per_worker=runner.threads_per_worker,
                                      processes=True, host="127.0.0.1", dashboard_address=None) as cluster:
            yield runner.model_copy(update={"address": cluster.scheduler_address})
        return
    ray, _ = _import_extra("ray")
    if ray.is_initialized():  # started by the caller (or an enclosing flow): used as it is
        yield runner
        return
    ray.init(num_cpus=runner.workers * runner.threads_per_worker, include_dashboard=False, namespace="prefect")
    try:
        yield runner
    finally:
        ray.shutdown()


class Placement:
    """Where a flow's units go: its own thread pool (the host is the flow's `Session`), or a cluster
    through Prefect's task runner (the host is a `WorkerSpec`; `rootstep.flows._unit`)."""

    def __init__(self, host: "Session | WorkerSpec", task_runner: Any = None):
        self.host = host
        self.task_runner = task_runner

    def submit(self, task: Any, spec: Any) -> Any:
        """Submit one unit (`task` wraps `perform`): a Prefect future."""
        if self.task_runner is None:
            return task.submit(spec, self.host)
        return self.task_runner.submit(task, {"spec": spec, "host": self.host})


def _prefect_api_for_workers(stack: ExitStack) -> None:
    """Make the task runs in worker processes report to this flow's Prefect API.

    A worker process gets the flow's settings with each task; without `PREFECT_API_URL` (the ephemeral
    API) each worker would start an ephemeral server of its own. Point them at the flow's instead."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the flow's own ephemeral server (one per process), started if need be
    server.start()
    stack.enter_context(temporary_settings(updates={PREFECT_API_URL: server.api_url}))


@contextmanager
def open_runner(runner: Runner | None, session: "Session") -> Iterator[Placement]:
    """Inside a flow: where its units go. The thread runner: the flow's task runner, units share
    `session` (setup hooks run here); else the cluster (a local one started if `runner` has no address)."""
    if runner is None or not runner.remote:
        if runner is not None:
            run_setup(runner.setup)
        yield Placement(session)
        return
    assert runner is not None  # a remote runner (the thread runner returned above)
    worker = WorkerSpec(limits=session.limits, adapter_options=session.adapter_options, setup=runner.setup)
    with ExitStack() as stack:
        _, task_runner_class = _import_extra(runner.kind)
        resolved = stack.enter_context(start_cluster(runner))
        assert resolved is not None  # start_cluster yields the runner it was given, with its cluster's address
        task_runner = task_runner_class(address=resolved.address)
        _prefect_api_for_workers(stack)
        stack.enter_context(task_runner)
        yield Placement(worker, task_runner)
