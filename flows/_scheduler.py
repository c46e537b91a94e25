"""One scheduler for what shares the machine: searches, framework episodes (collection and replays) and
analyzer / perturber calls.

An offline model (`local/...`) runs on this machine's cores, in this process: every episode, replay and
analyzer call of a pipeline competes for the same CPU. Left alone, every queued search starts at once,
each with its own clock, and on two cores six searches measured one analyzer token per second and were
cut by their clocks after 0-2 replays (issue 30): concurrency made every search lose. The scheduler
hands out slots instead:

* **searches** (`search`): how many counterfactual searches and fault injections run at once. A search
  waits for a slot before it starts (its meter, and so its outer wall clock, starts when it is admitted)
  and the slots are handed out in arrival order. Fitted to the machine (`fitted_searches`) unless
  `Limits.searches` says otherwise: on the offline models one search per core (measured on 2 cores,
  `bench/scheduler.py`: two searches at once finished a queue of four 1.83x as fast as one at a time while
  each search took 1.09x as long from its admission; four at once, 2.43x and 1.64x: llama.cpp decodes the
  searches' sequences in one batch); with remote models only (an endpoint's GPUs do the work),
  `REMOTE_SEARCHES`.
* **episodes** (`episode`): one framework episode or replay holds a slot of its agents' model and one of
  the sandbox pool (`Limits.per_local_model` / `per_model`, `Limits.sandboxes`).
* **calls** (`call`): one analyzer / perturber call holds a slot of its model.

Slots are FIFO (`Slots`): a thread that arrives later never takes a slot before one that waits, so the
searches of a queue finish in the queue's order. A thread waiting for a slot gives up with `Stopped` as
soon as the session stops.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from contextlib import contextmanager
from typing import Callable, Iterator

REMOTE_SEARCHES = 4
"""Searches at once when no model of the search runs on this machine (a remote endpoint's throughput is not
this machine's; the per-model limit still bounds its concurrent calls)."""

CORES_PER_LOCAL_SEARCH = 1
"""Cores per search on the offline models. Measured on 2 cores (`bench/scheduler.py`, 2026-11-27): 2 at once gave
the queue 1.83x the throughput of 1 at a time for 1.09x each search's own time; 4 at once 2.43x for 1.64x. Two
keep each search close to its time alone (what its outer wall clock sees) and take most of the gain."""


def is_local(model: str | None) -> bool:
    """A model that runs on this machine's cores (`local/...`)."""
    return bool(model) and str(model).startswith("local/")


def fitted_searches(models: list[str | None], cores: int | None = None) -> int:
    """Searches at once that fit this machine when their LLM calls go to `models`: one per
    `CORES_PER_LOCAL_SEARCH` cores (at least one) when any of them is an offline model, else `REMOTE_SEARCHES`."""
    if any(is_local(m) for m in models):
        return max(1, (cores or os.cpu_count() or 1) // CORES_PER_LOCAL_SEARCH)
    return REMOTE_SEARCHES


class Slots:
    """`size` slots handed out in arrival order (first come, first served), unlike `threading.Semaphore`,
    whose `release` lets a newly arriving thread take the slot before the ones waiting.

    `acquire(stopping)` waits in short steps and raises what `stopping()` returns (an exception) once it
    returns one, so that a stopped run's waiting units end at once."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"slots: size must be at least 1, got {size}")
        self.size = size
        self._free = size
        self._waiting: deque[object] = deque()
        self._cond = threading.Condition()

    @property
    def busy(self) -> int:
        with self._cond:
            return self.size - self._free

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._waiting)

    def acquire(self, stopping: Callable[[], BaseException | None] = lambda: None) -> None:
        ticket = object()
        with self._cond:
            self._waiting.append(ticket)
            try:
                while not (self._free > 0 and self._waiting[0] is ticket):
                    stop = stopping()
                    if stop is not None:
                        raise stop
                    self._cond.wait(timeout=0.5)
            except BaseException:
                self._waiting.remove(ticket)
                self._cond.notify_all()
                raise
            self._waiting.popleft()
            self._free -= 1
            self._cond.notify_all()  # the next in line may take a further free slot

    def release(self) -> None:
        with self._cond:
            if self._free >= self.size:
                raise RuntimeError("slots: released more often than acquired")
            self._free += 1
            self._cond.notify_all()

    @contextmanager
    def held(self, stopping: Callable[[], BaseException | None] = lambda: None) -> Iterator[None]:
        self.acquire(stopping)
        try:
            yield
        finally:
            self.release()


class Scheduler:
    """The slots of one process's flows (see the module docstring); a session owns one and its worker
    sessions share it. `searches`: `Limits.searches` (None: fitted per search to its models)."""

    def __init__(self, *, per_model: int, per_local_model: int, sandboxes: int, searches: int | None = None,
                 stopping: Callable[[], BaseException | None] = lambda: None, cores: int | None = None):
        self.per_model, self.per_local_model, self.sandboxes = per_model, per_local_model, sandboxes
        self.searches = searches
        self.cores = cores
        self._stopping = stopping
        self._slots: dict[str, Slots] = {}
        self._lock = threading.Lock()

    def slots(self, key: str, size: int) -> Slots:
        """The slots named `key` (made with `size` on first use)."""
        with self._lock:
            if key not in self._slots:
                self._slots[key] = Slots(size)
            return self._slots[key]

    def search_slots(self, models: list[str | None]) -> Slots:
        """The search slots for a search whose LLM calls go to `models`: searches on an offline model share one
        pool sized to the cores, searches on remote models another."""
        local = any(is_local(m) for m in models)
        size = self.searches if self.searches is not None else fitted_searches(models, self.cores)
        return self.slots("search:local" if local else "search:remote", size)

    def model_slots(self, model: str) -> Slots:
        return self.slots(f"model:{model}", self.per_local_model if is_local(model) else self.per_model)

    @contextmanager
    def search(self, models: list[str | None]) -> Iterator[None]:
        """Admission of one search (a counterfactual search or a fault injection) whose calls go to `models`."""
        with self.search_slots(models).held(self._stopping):
            yield

    @contextmanager
    def episode(self, model: str) -> Iterator[None]:
        """One framework episode or replay: a slot of its model and one of the sandbox pool (in this order)."""
        with self.model_slots(model).held(self._stopping), \
                self.slots("sandbox:docker", self.sandboxes).held(self._stopping):
            yield

    @contextmanager
    def call(self, model: str) -> Iterator[None]:
        """One analyzer / perturber call: a slot of its model."""
        with self.model_slots(model).held(self._stopping):
            yield
