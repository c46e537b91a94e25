"""Registries: verifiers (the success function Omega) by name (`VERIFIERS`), and benchmarks (task sets) by
name (`BENCHMARKS`), each a `rootstep.model.Registry` (origin, entry-point plugins, load errors).

A verifier is a plain function `fn(answer, task, **options) -> Verdict`, registered with `@verifier`.
Code verifiers also take `sandbox=` (a `rootstep.sandboxes.Sandbox`). A benchmark is a `BenchmarkInfo`
plus a loader that returns every task of its file(s) in file order; `load_tasks` then applies
seed (shuffle), slice and limit, always in that order.
"""

from __future__ import annotations

import inspect
import random
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from pydantic import BaseModel, ConfigDict

from rootstep.model import Registry, Task, TaskKind, Verdict

from ._errors import BenchmarkError

from ._settings import shared_data_dir


class VerifierFn(Protocol):
    def __call__(self, answer: str | None, task: Task, /, **options: Any) -> Verdict: ...


class VerifierInfo(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    fn: Callable[..., Verdict]
    needs_sandbox: bool
    summary: str


def _builtin_verifiers() -> None:
    from . import _bfcl, _code, _gaia, _math, _numeric, _qa  # noqa: F401 - importing registers them


def _adopt_verifier(ep: Any, obj: Any) -> tuple[str, VerifierInfo]:
    from ._plugins import adopt_verifier

    return adopt_verifier(ep, obj)


VERIFIERS: Registry[VerifierInfo] = Registry("verifier", group="rootstep.verifiers", builtins=_builtin_verifiers,
                                             adopt=_adopt_verifier)
"""Every verifier by name: the built-ins, pip-installed plugins (entry point `rootstep.verifiers`) and
functions registered in code with `@verifier`."""


def verifier_of(name: str, fn: Callable[..., Verdict]) -> VerifierInfo:
    """`fn` described as the verifier `name` (a `sandbox` keyword parameter marks a code verifier)."""
    doc = inspect.getdoc(fn) or ""
    return VerifierInfo(name=name, fn=fn, needs_sandbox="sandbox" in inspect.signature(fn).parameters,
                        summary=doc.splitlines()[0] if doc else "")


def verifier(name: str) -> Callable[[Callable[..., Verdict]], Callable[..., Verdict]]:
    """Register `fn` as the verifier `name` (a `sandbox` keyword parameter marks a code verifier)."""

    def register(fn: Callable[..., Verdict]) -> Callable[..., Verdict]:
        VERIFIERS.register(name, verifier_of(name, fn), module=fn.__module__, replace_existing=False)
        return fn

    return register


def get_verifier(name: str) -> Callable[..., Verdict]:
    """The verifier function registered as `name`; `BenchmarkError` naming the known ones otherwise."""
    return verifier_info(name).fn


def verifier_info(name: str) -> VerifierInfo:
    if name not in VERIFIERS:
        raise BenchmarkError(f"unknown verifier {name!r}; known: {', '.join(sorted(VERIFIERS.names()))}")
    return VERIFIERS.get(name)


def list_verifiers() -> list[VerifierInfo]:
    return [VERIFIERS.get(n) for n in sorted(VERIFIERS.names())]


def verify(task: Task, answer: str | None, *, sandbox: Any = None, **options: Any) -> Verdict:
    """Run `task.verifier` on `answer`. Code verifiers need `sandbox`; the others ignore it."""
    info = verifier_info(task.verifier)
    if info.needs_sandbox:
        if sandbox is None:
            raise BenchmarkError(f"verifier {info.name!r} runs code: pass a sandbox (rootstep.sandboxes)")
        return info.fn(answer, task, sandbox=sandbox, **options)
    return info.fn(answer, task, **options)


# ------------------------------------------------------------------------------------ benchmarks


class BenchmarkInfo(BaseModel):
    """What `rootstep benchmark list` shows, and where a benchmark's data is."""

    model_config = ConfigDict(frozen=True)

    name: str
    title: str
    kind: TaskKind
    verifier: str
    licence: str
    source: str
    files: tuple[str, ...]
    """Data files, relative to the shared data dir (built-ins) or absolute (user benchmarks)."""
    builtin: bool = True

    def paths(self) -> list[Path]:
        base = shared_data_dir()
        return [Path(f) if Path(f).is_absolute() else base / f for f in self.files]

    def available(self) -> bool:
        return all(p.exists() for p in self.paths())

    def task(self, task_id: str, prompt: str, ground_truth: str | None, metadata: dict[str, Any]) -> Task:
        """One task of this benchmark (its name, verifier and kind)."""
        return Task(benchmark=self.name, task_id=task_id, prompt=prompt, ground_truth=ground_truth,
                    verifier=self.verifier, kind=self.kind, metadata=metadata)


Loader = Callable[[list[Path], BenchmarkInfo], list[Task]]


def _builtin_benchmarks() -> None:
    from . import _bfcl, _code_loaders, _loaders  # noqa: F401 - importing registers them

    _bfcl.register_benchmarks()


def _adopt_benchmark(ep: Any, obj: Any) -> tuple[str, tuple[BenchmarkInfo, Loader]]:
    from ._plugins import adopt_benchmark

    return adopt_benchmark(ep, obj)


BENCHMARKS: Registry[tuple[BenchmarkInfo, Loader]] = Registry(
    "benchmark", group="rootstep.benchmarks", builtins=_builtin_benchmarks, adopt=_adopt_benchmark)
"""The registered benchmarks by name, each with its loader: the built-ins and pip-installed plugins (entry
point `rootstep.benchmarks`). Benchmarks added with `add_benchmark` live in the user folder instead."""


def benchmark(info: BenchmarkInfo) -> Callable[[Loader], Loader]:
    """Register a built-in benchmark and its loader (`loader(paths, info) -> all tasks in file order`)."""

    def register(loader: Loader) -> Loader:
        BENCHMARKS.register(info.name, (info, loader), module=loader.__module__)
        return loader

    return register


def _lookup(name: str) -> tuple[BenchmarkInfo, Loader]:
    if name in BENCHMARKS:
        return BENCHMARKS.get(name)
    from ._custom import user_benchmark

    found = user_benchmark(name)
    if found is None:
        known = ", ".join(b.name for b in list_benchmarks())
        raise BenchmarkError(f"unknown benchmark {name!r}; known: {known}")
    return found


def get_benchmark(name: str) -> BenchmarkInfo:
    return _lookup(name)[0]


def list_benchmarks() -> list[BenchmarkInfo]:
    """Built-in benchmarks (whether or not their data is present), then user-added ones."""
    from ._custom import user_benchmarks

    return [info for info, _ in BENCHMARKS.values()] + [info for info, _ in user_benchmarks()]


def load_tasks(
    name: str,
    *,
    limit: int | None = None,
    seed: int | None = None,
    start: int | None = None,
    stop: int | None = None,
    paths: Iterable[str | Path] | None = None,
) -> list[Task]:
    """Tasks of benchmark `name`.

    Args:
        limit: at most this many tasks (after shuffling and slicing).
        seed: shuffle with `random.Random(seed)` first; None keeps file order.
        start, stop: a Python slice of the (shuffled) list, e.g. `start=10, stop=20`.
        paths: read these files instead of the registered ones (tests, or data kept elsewhere).

    Raises `BenchmarkError` when the data files are missing, naming them.
    """
    info, loader = _lookup(name)
    files = [Path(p) for p in paths] if paths is not None else info.paths()
    missing = [str(p) for p in files if not p.exists()]
    if missing:
        raise BenchmarkError(
            f"benchmark {name!r}: data file(s) missing: {', '.join(missing)} "
            "(set ROOTSTEP_SHARED_DATA or pass the files explicitly)"
        )
    return select(loader(files, info), limit=limit, seed=seed, start=start, stop=stop)


def select(
    tasks: list[Task],
    *,
    limit: int | None = None,
    seed: int | None = None,
    start: int | None = None,
    stop: int | None = None,
) -> list[Task]:
    """Shuffle (when `seed` is given), then slice `[start:stop]`, then keep the first `limit`."""
    if limit is not None and limit < 0:
        raise BenchmarkError(f"limit must be >= 0, not {limit}")
    chosen = list(tasks)
    if seed is not None:
        random.Random(seed).shuffle(chosen)
    chosen = chosen[start:stop]
    return chosen if limit is None else chosen[:limit]


def count_tasks(name: str) -> int | None:
    """How many tasks the benchmark has, or None when its data files are missing."""
    info = get_benchmark(name)
    if not info.available():
        return None
    return len(load_tasks(name))
