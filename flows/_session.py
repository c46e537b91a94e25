"""What every flow of one pipeline run shares: the warehouse, the gateway, the adapters and the limits.

A `Session` is opened by the outermost flow and handed to its subflows (`session=`) and to the units of
work it runs in its thread pool (Prefect's default `ThreadPoolTaskRunner`): an object passed along, not
a registry looked up by name. Prefect records a flow's parameters; a session is recorded as `<Session>`
(its `__slots__` keep Prefect's JSON encoder from walking the gateway and warehouse), and Prefect ships
them with each task it sends to a Dask / Ray worker, where a session arrives as None (`__reduce__`: its
gateway, locks and warehouse belong to the flow's process; a unit there opens a worker session).

Concurrency limits are the session's `Scheduler` (`rootstep.flows._scheduler`): FIFO slots for searches,
per model and per sandbox pool, not Prefect global concurrency limits: with the ephemeral API (the default `rootstep pipeline`) the Prefect server lives
inside this process anyway, a global limit must be created on a server before use (an unknown name
does not limit), every acquisition is an API round trip, and a crashed process leaves its slots leased
until they expire. The gateway (and the in-process local model) are per process too, so a per-process
limit is the one that matches the resource.

Warehouse access is serialised with one lock: the store's writes are atomic per file, but the
catalog file is one DuckDB database that two threads of one process must not open at once.

With `--runner dask|ray` (`rootstep.flows._runner`) the units run in other processes, which cannot be
handed this session: each opens a *worker session* there (`rootstep.flows._remote`), with its own
gateway and limits and no warehouse. Whatever runs a unit, it returns an `Outcome` and the flow writes
it with `Session.store` (the warehouse keeps one writer; `rootstep.flows._unit`).

Stopping (`Session.stop`, on SIGINT / SIGTERM): no unit starts any more, and every Docker sandbox of this
process is closed, which removes the containers of the running episodes (their units then end at once
with `Stopped`). What was stored stays; a unit's outcome is written whole or not at all.
"""

from __future__ import annotations

import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from rootstep.model import LLMCall
from rootstep.warehouse import Warehouse

from ._scheduler import Scheduler

if TYPE_CHECKING:
    from rootstep.adapters.base import Adapter
    from rootstep.gateway import Gateway, GatewayServer

    from ._unit import Outcome

from rootstep.gateway import DEFAULT_ANNOTATOR_MODEL, DEFAULT_MODEL  # noqa: F401


class Limits(BaseModel):
    """How many framework episodes (or analyzer calls) may run at once."""

    model_config = ConfigDict(extra="forbid")

    per_model: int = Field(default=2, ge=1)
    """Concurrent episodes / LLM proposals per model string (a provider's rate limit)."""
    searches: int | None = Field(default=None, ge=1)
    """Counterfactual searches and fault injections at once. None: fitted to the machine
    (`rootstep.flows._scheduler.fitted_searches`: one per core on the offline models, 4 with remote ones)."""
    per_local_model: int = Field(default=2, ge=1)
    """For `local/...` models, which run inside this process on the CPU: two episodes at once share the
    engine's slots (one batch per decoding step) and keep it busy while the other waits on its sandbox
    (bench/local_model.py: 2 and 4 requests at once gave 1.10x and 1.47x the tokens/s of one on 2 cores)."""
    sandboxes: int = Field(default=2, ge=1)
    """Concurrent Docker containers (the sandbox pool)."""
    episode_seconds: float = Field(default=600.0, gt=0)
    """Wall clock of one framework episode in its sandbox (`Adapter.timeout_s`): raise it for slow models."""
    llm_seconds: float = Field(default=600.0, gt=0)
    """Wall clock of one analyzer / perturber call (the gateway's provider `timeout`): raise it for slow or
    hand-answered models (a call cut by it fails, and the gateway's retry asks the same question again)."""


class Stopped(RuntimeError):
    """The session was stopped (SIGINT / SIGTERM) before or while this unit ran: nothing of it is stored."""


_T = TypeVar("_T")


def _held(value: "_T | None", what: str) -> "_T":
    """`value`, which a worker process's shared session (its limits only) does not hold."""
    if value is None:
        raise RuntimeError(f"this session (a worker process's shared limits) has no {what}")
    return value


class Session:
    """The shared state of one flow run (see the module docstring)."""

    __slots__ = ("_warehouse", "_gateway", "_server", "limits", "sandbox", "adapter_options", "_owner", "lock",
                 "scheduler", "_verify_sandbox", "_verifier", "_stopping", "_images_ready", "_images_lock",
                 "__weakref__")

    def __init__(self, warehouse: Warehouse | None, gateway: "Gateway | None", server: "GatewayServer | None", *,
                 limits: Limits | None = None, sandbox: Any = None, verifier: Any = None,
                 adapter_options: dict[str, Any] | None = None, shared: "Session | None" = None):
        """`shared`: a session whose lock, scheduler and verification sandbox this one uses (a worker
        process's sessions, one per unit with its own gateway, share one set of limits)."""
        self._warehouse = warehouse
        self._gateway = gateway
        self._server = server
        self.limits = limits or Limits()
        self.sandbox = sandbox
        self.adapter_options = dict(adapter_options or {})
        self._owner: Session = shared._owner if shared is not None else self
        self.lock: threading.RLock = self._owner.lock if shared is not None else threading.RLock()
        self._verify_sandbox: Any = sandbox
        self._verifier = verifier
        self._images_ready: set[str] = set()
        """Frameworks whose image `ensure_images` found or built (on the owner session)."""
        self._images_lock = threading.Lock()
        """Held while `ensure_images` checks or builds (on the owner session): not `lock`, which the warehouse's
        writers take and which a build of minutes would hold up."""
        self._stopping: threading.Event = self._owner._stopping if shared is not None else threading.Event()
        self.scheduler: Scheduler = self._owner.scheduler if shared is not None else Scheduler(
            per_model=self.limits.per_model, per_local_model=self.limits.per_local_model,
            sandboxes=self.limits.sandboxes, searches=self.limits.searches, stopping=self._stopped)

    @property
    def warehouse(self) -> Warehouse:
        """The warehouse the flow writes; a worker process's session has none (its units return what they made)."""
        return _held(self._warehouse, "a warehouse: its units return what they made and the flow's session writes it")

    @property
    def gateway(self) -> "Gateway":
        return _held(self._gateway, "a gateway: a unit runs in a session of its own that has one")

    @property
    def server(self) -> "GatewayServer":
        return _held(self._server, "a gateway server: a unit runs in a session of its own that has one")

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _not_shipped, ()

    @contextmanager
    def open(self) -> Iterator["Session"]:
        """The session a unit runs in: this one (the `host` of `rootstep.flows._unit.perform`)."""
        yield self

    # ------------------------------------------------------------------ stopping

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def _stopped(self) -> "Stopped | None":
        """What a unit waiting for a slot raises once the session is stopping (`Scheduler`)."""
        return Stopped("the run was stopped while this unit waited for its turn") if self._stopping.is_set() else None

    def check(self) -> None:
        """Raise `Stopped` once the session is stopping (a unit about to start)."""
        if self._stopping.is_set():
            raise Stopped("the run was stopped before this unit started")

    def stop(self) -> None:
        """Stop: no unit starts any more, and the running episodes' containers are removed (every Docker
        sandbox of this process is closed), so their units end now instead of at their timeout."""
        self._stopping.set()
        from rootstep.sandboxes import close_all

        close_all()

    # ------------------------------------------------------------------ adapters and verification

    def adapter(self, framework: str) -> "Adapter":
        """A fresh adapter bound to this session's gateway (adapters hold no per-run state)."""
        from rootstep.adapters import get_adapter

        options = {"timeout_s": self.limits.episode_seconds, **self.adapter_options}
        return get_adapter(framework, gateway=self.server, verifier=self.verifier, **options)

    def ensure_images(self, frameworks: Iterable[str]) -> None:
        """Build each framework's sandbox image that the Docker daemon lacks, before its episodes or replays are
        submitted, its phases logged: `rootstep pipeline -f smolagents` after the main job (which built AG2's
        image only) builds smolagents' image instead of failing every episode with "not built". An image that
        exists, a framework that is not an adapter (an imported trace's), an adapter given a sandbox, or no
        reachable daemon (the episode says so) builds nothing. A build that fails raises naming the framework."""
        from rootstep.adapters import adapter_class, list_adapters
        from rootstep.model import RootstepError
        from rootstep.sandboxes import SandboxUnavailableError, docker_client

        known = set(list_adapters())
        for name in sorted(set(frameworks) & known):
            with self._owner._images_lock:
                if name in self._owner._images_ready:
                    continue
                adapter = self.adapter(name)
                if adapter.sandbox is None and adapter.image_built() is False:
                    log = _flow_logger()
                    log.info(f"building the {name} sandbox image {adapter.image_tag()} (once; `rootstep frameworks build`)")
                    try:
                        adapter_class(name).build(docker_client(), report=_LogReporter(log, name))
                    except (SandboxUnavailableError, RootstepError) as exc:
                        raise RootstepError(f"the {name} sandbox image could not be built: {exc}") from exc
                self._owner._images_ready.add(name)

    def verifier(self, task: Any, answer: str | None) -> Any:
        """Omega: `rootstep.benchmarks.verify`, code verifiers in one shared no-network sandbox."""
        if self._verifier is not None:
            return self._verifier(task, answer)
        from rootstep.benchmarks import verify
        from rootstep.benchmarks import verifier_info

        if verifier_info(task.verifier).needs_sandbox:
            self.verification_sandbox()
        return verify(task, answer, sandbox=self._owner._verify_sandbox)

    def verification_sandbox(self) -> Any:
        """The one no-network sandbox of the session's checks (code verifiers, a math or QA text's program:
        `rootstep.benchmarks.sandbox_runner`), made on first use."""
        owner = self._owner
        with owner.lock:
            if owner._verify_sandbox is None:
                from rootstep.sandboxes import get_sandbox

                owner._verify_sandbox = get_sandbox()
            return owner._verify_sandbox

    # ------------------------------------------------------------------ limits

    def episode_slot(self, model: str) -> Any:
        """One framework episode or replay (`Scheduler.episode`)."""
        return self.scheduler.episode(model)

    # ------------------------------------------------------------------ recordings

    def recording(self, gateway_run_id: str) -> list[LLMCall]:
        """A recorded run's calls for a replay: the gateway's journal, else the warehouse's `llm_calls` (an
        annotation flow started after the collection, with another journal)."""
        calls = self.gateway.calls(gateway_run_id)
        if calls or self._warehouse is None:  # a worker session has no warehouse: the spec carries the calls
            return calls
        from rootstep.warehouse import llm_call_from_row

        with self.lock:
            rows = self.warehouse.rows("SELECT * FROM llm_calls WHERE run_id = ? ORDER BY counter, created_at",
                                       [gateway_run_id])
        return [llm_call_from_row(r) for r in rows]

    def store(self, outcome: "Outcome") -> None:
        """Write what a unit produced, in this order: the LLM calls (journaled here when another process's
        gateway made them, then flushed), the runs (steps, then the run row), the `Replay` rows, the
        annotations last (what takes a run out of its queue). The warehouse's one writer."""
        run_ids = sorted({c.run_id for c in outcome.calls})
        with self.lock:
            if run_ids:
                journaled = {c.id for run_id in run_ids for c in self.gateway.calls(run_id)}
                for call in outcome.calls:
                    if call.id not in journaled:
                        self.gateway.journal.append(call)
                        journaled.add(call.id)
                self.gateway.flush(self.warehouse, run_ids)
            if outcome.runs:
                self.warehouse.write_trajectories(outcome.runs)
            if outcome.replays:
                self.warehouse.write_replays(outcome.replays)
            if outcome.annotations:
                self.warehouse.write_annotations(outcome.annotations)


def journal_dir_for(warehouse: Warehouse) -> Path:
    """Where the gateway journals: beside a local warehouse (so a later annotation run finds the
    recordings), else a temporary folder (the recordings are read back from `llm_calls`)."""
    if getattr(warehouse, "local", False):
        return Path(warehouse.root) / "gateway" / "journal"
    return Path(tempfile.mkdtemp(prefix="rootstep-journal-"))


def _not_shipped() -> None:
    """What a pickled `Session` becomes in another process (see the module docstring)."""
    return None


@contextmanager
def stopped_by_signals(session: Session) -> Iterator[None]:
    """Stop `session` when a signal's exception leaves the block (SIGINT's `KeyboardInterrupt`, Prefect's
    `TerminationSignal` for SIGTERM: not an `Exception`), before the flow waits for its running units."""
    try:
        yield
    except BaseException as exc:
        if not isinstance(exc, Exception):
            session.stop()
        raise


@contextmanager
def open_session(warehouse: str | None = None, *, session: Session | None = None, limits: Limits | None = None,
                 sandbox: Any = None, verifier: Any = None, journal_dir: str | Path | None = None,
                 adapter_options: dict[str, Any] | None = None) -> Iterator[Session]:
    """`session` when given (a subflow of a pipeline: its owner closes it), else a new one: a warehouse,
    a gateway journaling beside it and its server on a free loopback port, closed on exit. Left by a
    signal's exception, the session is stopped first (`Session.stop`)."""
    if session is not None:
        with stopped_by_signals(session):
            yield session
        return
    from rootstep.gateway import Gateway, GatewayServer

    wh = Warehouse(warehouse)
    gateway = Gateway(journal_dir or journal_dir_for(wh))
    server = GatewayServer(gateway).start()
    session = Session(wh, gateway, server, limits=limits, sandbox=sandbox, verifier=verifier,
                      adapter_options=adapter_options)
    try:
        with stopped_by_signals(session):
            yield session
    finally:
        server.stop()
        gateway.close()
        if session._verify_sandbox is not None and session._verify_sandbox is not sandbox:
            close = getattr(session._verify_sandbox, "close", None)
            if close is not None:
                close()


class _LogReporter:
    """An image build's phases on the flow's log (the tool output of pip and docker is left out)."""

    def __init__(self, log: Any, name: str):
        self.log, self.name = log, name

    def step(self, message: str) -> None:
        self.log.info(f"{self.name} image: {message}")

    def line(self, message: str) -> None:
        pass


def _flow_logger() -> Any:
    """The running flow's logger, or this module's outside a flow."""
    import logging

    try:
        from prefect import get_run_logger

        return get_run_logger()
    except Exception:  # prefect's MissingContextError: not inside a flow or task run
        return logging.getLogger(__name__)
