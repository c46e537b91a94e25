"""Verifiers and benchmarks from outside this repository (pip-installed plugins), through entry points:

    [project.entry-points."rootstep.verifiers"]
    my-check = "my_pkg.verify:check"                # fn(answer, task, **options) -> Verdict
    [project.entry-points."rootstep.benchmarks"]
    my-bench = "my_pkg.bench:BENCHMARK"             # (BenchmarkInfo, loader), or a module that registers it

Each group is loaded on first use of its registry; a plugin that fails is recorded with the reason
(`rootstep._plugins`) and the rest keep working.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

from rootstep import load_entry_points


def load_verifier_plugins() -> None:
    def one(ep: EntryPoint, obj: Any) -> str:
        from ._registry import _VERIFIERS, verifier

        if ep.name not in _VERIFIERS:
            if not callable(obj):
                raise TypeError(f"{ep.value} is not a verifier function")
            verifier(ep.name)(obj)
        return ep.name

    load_entry_points("rootstep.verifiers", one)


def load_benchmark_plugins() -> None:
    def one(ep: EntryPoint, obj: Any) -> str:
        from ._registry import _BENCHMARKS, BenchmarkInfo, benchmark

        if ep.name in _BENCHMARKS:  # the module registered it when it was imported
            return ep.name
        if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], BenchmarkInfo) and callable(obj[1]):
            info = obj[0].model_copy(update={"builtin": False})
            benchmark(info)(obj[1])
            return info.name
        raise TypeError(f"{ep.value} is not a (BenchmarkInfo, loader) pair and registers no benchmark {ep.name!r}")

    load_entry_points("rootstep.benchmarks", one)
