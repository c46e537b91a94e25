"""The side of a unit of work that runs in another process (a Dask or Ray worker): what it opens there.

A unit submitted to a cluster cannot be handed the flow's `Session` (live objects of the flow's
process). Its spec carries everything its work needs (the task; for an annotation, the trajectory and
its recorded LLM calls, read by the flow), and its host is a `WorkerSpec` (plain data: the limits, the
adapter options, setup hooks), which opens a *worker session* for the time of the unit:

* its own gateway, journaling to a scratch folder, served on the worker's loopback: the framework's
  container runs on the worker's Docker host and reaches it through the gateway-only network, exactly
  as it reaches the flow's gateway with the thread runner (no LLM traffic crosses the cluster, provider
  keys are read from the worker's environment, `local/...` models run on the worker's CPU);
* the limits (`Limits`) as semaphores shared by every unit of that worker process, and one shared
  verification sandbox: `WORKERS`, this process's `Workers`, keeps one shared session per `WorkerSpec`
  (the spec itself is the key);
* no warehouse: the unit returns its `Outcome` and the flow process writes it (one writer for the
  catalog, see `_session`).

`WorkerSpec.setup` lists `module:function` hooks run once in each process before its first task: what a
process needs that is not data, such as the scripted models of a simulation (`register_script` is
per process).
"""

from __future__ import annotations

import importlib
import os
import shutil
import socket
import tempfile
import threading
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ._session import Limits, Session


def worker_id() -> str:
    """`host:pid` of this process (reported with each task's result)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def check_hook(entry: str) -> str:
    module, sep, name = entry.partition(":")
    if not sep or not module.strip() or not name.strip() or not name.isidentifier():
        raise ValueError(f"setup hook {entry!r}: use MODULE:FUNCTION (for example mypackage.models:register)")
    return entry


class WorkerSpec(BaseModel):
    """What a task in another process needs to open its worker session (sent with every task)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    limits: Limits = Field(default_factory=Limits)
    adapter_options: dict[str, Any] = Field(default_factory=dict)
    setup: tuple[str, ...] = ()

    _check_setup = field_validator("setup")(lambda v: tuple(check_hook(e) for e in v))

    def __hash__(self) -> int:  # the key of this process's shared worker session (`Workers`)
        return hash(self.model_dump_json())

    def open(self) -> AbstractContextManager[Session]:
        """The session a unit runs in on this worker (the `host` of `rootstep.flows._unit.perform`)."""
        return WORKERS.open(self)


class Workers:
    """What the units of one worker process share: the setup hooks already run, and per `WorkerSpec` one
    session holding its limits' semaphores and verification sandbox."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._setup_done: set[str] = set()
        self._shared: dict[WorkerSpec, Session] = {}

    def run_setup(self, hooks: tuple[str, ...] | list[str]) -> None:
        """Call each `module:function` hook once in this process (later calls do nothing)."""
        with self._lock:
            for entry in hooks:
                if entry not in self._setup_done:
                    _call_hook(entry)
                    self._setup_done.add(entry)

    def shared(self, spec: WorkerSpec) -> Session:
        """This process's limits and verification sandbox for `spec` (created once)."""
        with self._lock:
            if spec not in self._shared:
                self._shared[spec] = Session(None, None, None, limits=spec.limits, adapter_options=spec.adapter_options)
            return self._shared[spec]

    @contextmanager
    def open(self, spec: WorkerSpec) -> Iterator[Session]:
        """A session for one unit in this process: a fresh gateway (scratch journal, loopback server),
        the process's shared limits, no warehouse. Closed, and its journal removed, on exit: the unit
        returns what the flow must store."""
        from rootstep.gateway import Gateway, GatewayServer

        self.run_setup(spec.setup)
        shared = self.shared(spec)
        journal = tempfile.mkdtemp(prefix="rootstep-worker-journal-")
        gateway = Gateway(journal)
        server = None
        try:
            server = GatewayServer(gateway).start()
            yield Session(None, gateway, server, limits=spec.limits, adapter_options=spec.adapter_options,
                          shared=shared)
        finally:
            if server is not None:
                server.stop()
            gateway.close()
            shutil.rmtree(journal, ignore_errors=True)


WORKERS = Workers()
"""This process's `Workers` (a worker process runs units of one flow, or of several in turn)."""


def run_setup(hooks: tuple[str, ...] | list[str]) -> None:
    """Call each `module:function` hook once in this process (later calls do nothing)."""
    WORKERS.run_setup(hooks)


def _call_hook(entry: str) -> None:
    module_name, _, name = check_hook(entry).partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RuntimeError(f"setup hook {entry!r}: cannot import {module_name!r} in process {worker_id()} "
                           f"({exc}); it must be importable on every worker") from exc
    hook = getattr(module, name, None)
    if not callable(hook):
        raise RuntimeError(f"setup hook {entry!r}: {module_name} has no function {name!r}")
    hook()
