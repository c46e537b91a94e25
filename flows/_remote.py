"""The side of a task that runs in another process (a Dask or Ray worker): what it gets, what it opens.

A task submitted to a cluster cannot use the flow's `Session` (a registry of this process). It gets a
`WorkerSpec` (plain data: the limits, the adapter options, setup hooks) and everything its work needs
as arguments (the task; for an annotation, the trajectory and its recorded LLM calls, read by the flow),
and opens a *worker session* for the time of the task:

* its own gateway, journaling to a scratch folder, served on the worker's loopback: the framework's
  container runs on the worker's Docker host and reaches it through the gateway-only network, exactly
  as it reaches the flow's gateway with the thread runner (no LLM traffic crosses the cluster, provider
  keys are read from the worker's environment, `local/...` models run on the worker's CPU);
* the limits (`Limits`) as semaphores shared by every task of that worker process, and one shared
  verification sandbox;
* no warehouse: the task returns its trajectories, the LLM calls its gateway journaled, replays and
  annotations, and the flow process writes them (one writer for the catalog, see `_session`).

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
from contextlib import contextmanager
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

    def key(self) -> str:
        return self.model_dump_json()


_SETUP_DONE: set[str] = set()
_SETUP_LOCK = threading.Lock()
_SHARED: dict[str, Session] = {}
_SHARED_LOCK = threading.Lock()


def run_setup(hooks: tuple[str, ...] | list[str]) -> None:
    """Call each `module:function` hook once in this process (later calls do nothing)."""
    with _SETUP_LOCK:
        for entry in hooks:
            if entry in _SETUP_DONE:
                continue
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
            _SETUP_DONE.add(entry)


def _shared(spec: WorkerSpec) -> Session:
    """This process's limits and verification sandbox for `spec` (created once)."""
    key = spec.key()
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = Session(None, None, None, limits=spec.limits, adapter_options=spec.adapter_options)
        return _SHARED[key]


@contextmanager
def open_worker_session(spec: WorkerSpec) -> Iterator[Session]:
    """A session for one task in this process: a fresh gateway (scratch journal, loopback server),
    the process's shared limits, no warehouse. Closed, and its journal removed, on exit: the task
    returns what the flow must store."""
    from rootstep.gateway import Gateway, GatewayServer

    run_setup(spec.setup)
    shared = _shared(spec)
    journal = tempfile.mkdtemp(prefix="rootstep-worker-journal-")
    gateway = Gateway(journal)
    server = None
    try:
        server = GatewayServer(gateway).start()
        yield Session(None, gateway, server, limits=spec.limits, adapter_options=spec.adapter_options, shared=shared)
    finally:
        if server is not None:
            server.stop()
        gateway.close()
        shutil.rmtree(journal, ignore_errors=True)
