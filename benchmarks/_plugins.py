"""Verifiers and benchmarks from outside this repository (pip-installed plugins), through entry points:

    [project.entry-points."rootstep.verifiers"]
    my-check = "my_pkg.verify:check"                # fn(answer, task, **options) -> Verdict
    [project.entry-points."rootstep.benchmarks"]
    my-bench = "my_pkg.bench:BENCHMARK"             # (BenchmarkInfo, loader), or a module that registers it

Each group is loaded on first use of its registry (`VERIFIERS`, `BENCHMARKS`, `rootstep.model.Registry`); a
plugin that fails is recorded with the reason and the rest keep working. These check what an entry point
loaded and turn it into the registry's value.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

from ._registry import BENCHMARKS, VERIFIERS, BenchmarkInfo, Loader, VerifierInfo, verifier_of


def adopt_verifier(ep: EntryPoint, obj: Any) -> tuple[str, VerifierInfo]:
    """A verifier function, or a module that registered `ep.name` when it was imported."""
    registered = VERIFIERS.entry(ep.name)
    if registered is not None and registered.value is not None:
        return ep.name, registered.value
    if not callable(obj):
        raise TypeError(f"{ep.value} is not a verifier function")
    return ep.name, verifier_of(ep.name, obj)


def adopt_benchmark(ep: EntryPoint, obj: Any) -> tuple[str, tuple[BenchmarkInfo, Loader]]:
    """A (BenchmarkInfo, loader) pair, or a module that registered `ep.name` when it was imported."""
    registered = BENCHMARKS.entry(ep.name)
    if registered is not None and registered.value is not None:
        return ep.name, registered.value
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], BenchmarkInfo) and callable(obj[1]):
        info = obj[0].model_copy(update={"builtin": False})
        return info.name, (info, obj[1])
    raise TypeError(f"{ep.value} is not a (BenchmarkInfo, loader) pair and registers no benchmark {ep.name!r}")
