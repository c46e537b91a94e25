"""One unit of work, whatever runs it: a spec in, an `Outcome` out, the flow the only writer.

A unit is one episode to collect (`collect.CollectSpec`), one failure to search
(`_searches.CounterfactualSpec`) or one success to corrupt (`_searches.InjectSpec`): a pydantic model
holding what to do, its settings and everything the work reads (the task; the run and its recorded
LLM calls, read by the flow). `perform(spec, host)` runs it in the session `host.open()` gives:

* in a thread of the flow's process, and in `rootstep run` (no Prefect): `host` is the flow's `Session`;
* in a Dask or Ray worker process: `host` is a `WorkerSpec` (plain data), which opens a worker session
  there (`rootstep.flows._remote`).

A unit writes nothing: it returns an `Outcome` (its report row, the runs it made, their LLM calls as its
gateway journaled them, replays, annotations), and the flow writes it with `Session.store`, in the same
order whatever ran the unit. `gather` is the one loop that waits for a flow's units and stores them.

Stopping: a unit of a stopping session does not start (`Stopped`), and one whose episode was ended by
the stop raises `Stopped` (never retried); `gather` holds SIGINT / SIGTERM while it writes an outcome,
so an outcome is stored whole or not at all (`Session.stop`, `open_session`).
"""

from __future__ import annotations

import queue
import signal
import threading
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Generic, Iterator, Protocol, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from rootstep.model import Annotation, LLMCall, Replay, Trajectory

from ._session import Session, Stopped

if TYPE_CHECKING:
    from ._remote import WorkerSpec

RowT = TypeVar("RowT", bound=BaseModel)


class Outcome(BaseModel, Generic[RowT]):
    """What one unit produced, for the flow to store (`Session.store`) and report (`row`)."""

    row: RowT
    """The unit's line of the flow's report (`CollectedRun`, `AnnotatedRun`)."""
    runs: list[Trajectory] = Field(default_factory=list)
    """The runs the unit made: the collected episode, or the replayed runs of a search."""
    calls: list[LLMCall] = Field(default_factory=list)
    """Their LLM calls and the analyzer's / perturber's (the annotations' transcripts), as the unit's gateway
    journaled them (filled by `perform`)."""
    replays: list[Replay] = Field(default_factory=list)
    annotations: list[Annotation] = Field(default_factory=list)


class UnitSpec(BaseModel):
    """One unit of work: what to do and its settings (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    @property
    def label(self) -> str:
        """The unit's name in Prefect's task runs and in errors."""
        raise NotImplementedError

    def run(self, session: Session) -> Outcome:
        """Do the work in `session`; write nothing."""
        raise NotImplementedError

    def failed(self, error: str) -> BaseModel:
        """The report row of this unit when it raised `error` (nothing of it was stored)."""
        raise NotImplementedError


class Host(Protocol):
    """Where a unit runs: the flow's `Session`, or a `WorkerSpec` that opens one in a worker process."""

    def open(self) -> AbstractContextManager[Session]: ...


def perform(spec: UnitSpec, host: "Session | WorkerSpec") -> Outcome:
    """Run one unit in the session `host` opens and return its outcome with its LLM calls (nothing written)."""
    with host.open() as session:
        session.check()
        try:
            outcome = spec.run(session)
        except Exception as exc:
            if session.stopping:
                raise Stopped(f"{spec.label}: stopped ({type(exc).__name__}: {str(exc)[:200]})") from exc
            raise
        ids = [r.recording.gateway_run_id for r in outcome.runs if r.recording is not None]
        ids += [a.evidence.transcript_run_id for a in outcome.annotations if a.evidence.transcript_run_id]
        return outcome.model_copy(update={"calls": [c for i in ids for c in session.gateway.calls(i)]})


def infrastructure_error(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect `retry_condition_fn`: retry only the adapter's infrastructure errors (a container that
    died, timed out, or printed no trajectory); a wrong answer is a result, `Stopped` is final. An episode
    that timed out is retried once (a loaded machine can slow one episode past its limit), not again: on the
    seed-5 slice of 2026-11-28 smolagents on MATH-500 1408 looped to the 600 s limit three times (30 minutes)."""
    from rootstep.adapters.base import AdapterError, EpisodeTimedOut

    try:
        exc = state.result(raise_on_failure=False)
    except Exception as raised:  # a result that cannot be read back is the exception itself
        exc = raised
    if isinstance(exc, EpisodeTimedOut):
        return int(getattr(task_run, "run_count", 1) or 1) < 2
    return isinstance(exc, AdapterError)


def unit_task(name: str, retries: int) -> Any:
    """`perform` as a Prefect task named `name`, retried `retries` times on infrastructure errors. The
    warehouse is the result store (`cache_policy=NONE`, nothing persisted by Prefect)."""
    from prefect import task
    from prefect.cache_policies import NONE

    return task(perform, name=name, retries=retries, retry_delay_seconds=1,  # type: ignore[call-overload]
                retry_condition_fn=infrastructure_error,  # called as (task, task run, state): Prefect's overloads say less
                cache_policy=NONE, persist_result=False, task_run_name="{spec.label}")


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is done, then are delivered to the handlers they had (in
    the main thread; elsewhere signals cannot be handled and the block runs as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)


def gather(session: Session, pending: Sequence[tuple[UnitSpec, Any]]) -> list[Any]:
    """Store each submitted unit's outcome (`(spec, Prefect future)`) as soon as it finishes, whatever the
    order they were submitted in, and return the report rows in submission order; a unit that raised
    (after its retries), or whose outcome could not be stored, is reported by `spec.failed`. Storing in
    completion order means a stopped or crashed flow keeps every unit that finished before it (waiting in
    submission order lost an injection finished behind a slower search when the flow was stopped). A
    signal's exception propagates (`open_session` then stops the session); once the session is stopping
    (the signal came to another thread) nothing more is stored (`Stopped`)."""
    finished: queue.Queue[int] = queue.Queue()
    for i, (_, future) in enumerate(pending):
        future.add_done_callback(lambda _future, i=i: finished.put(i))
    rows: list[Any] = [None] * len(pending)
    for _ in pending:
        while True:  # short waits: the main thread runs a signal's handler at once and sees `stopping`
            if session.stopping:  # another thread took the signal: nothing more is written
                raise Stopped("the run was stopped: the outcomes not yet stored are not stored")
            try:
                i = finished.get(timeout=0.5)
                break
            except queue.Empty:
                continue
        spec, future = pending[i]
        future.wait()  # done: this only takes its final state (the API's copy may still say PENDING)
        state = future.state
        if state.is_completed():
            outcome = future.result()
            try:
                with signals_held():
                    session.store(outcome)
                rows[i] = outcome.row
                continue
            except Exception as raised:  # nothing of the unit is committed: reported like a failed unit
                error: BaseException = raised
        else:
            error = state.result(raise_on_failure=False)
        rows[i] = spec.failed(f"{type(error).__name__}: {str(error)[:500]}")
    return rows
