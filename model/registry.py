"""One registry type behind every named, pluggable thing of rootstep: framework adapters (with system
files), verifiers, benchmarks, tracers, trace formats and perturbations.

A `Registry[T]` maps names to values and remembers, per name, where the value came from (`Origin`: built
in, an entry point of an installed package, a system file, or code that called `register`) and, per
plugin that failed, why. Each registry knows its entry-point group; a package extends it from its
pyproject.toml:

    [project.entry-points."rootstep.adapters"]
    my-team = "my_pkg.adapter:MyTeamAdapter"        # an Adapter subclass, or a system file's path (str)
    [project.entry-points."rootstep.verifiers"]
    my-check = "my_pkg.verify:check"                # fn(answer, task, **options) -> Verdict
    [project.entry-points."rootstep.benchmarks"]
    my-bench = "my_pkg.bench:BENCHMARK"             # (BenchmarkInfo, loader), or a module that registers it
    [project.entry-points."rootstep.tracers"]
    my-tracer = "my_pkg.trace:attribute"            # fn(trace, model, ...) -> Attribution
    [project.entry-points."rootstep.trace_formats"]
    my-format = "my_pkg.fmt:FORMAT"                 # a rootstep.traces.TraceFormat
    [project.entry-points."rootstep.perturbations"]
    my-perturbation = "my_pkg.perturb:perturb"      # fn(step, random.Random) -> Perturbation | None

A registry loads lazily, on the first lookup of a name it does not hold and on every listing: first its
built-ins (`builtins`, once), then its entry points (once per process), then `discover` (every time:
system files named by `$ROOTSTEP_SYSTEMS`). A plugin that fails to load is kept under `group:name` (a
system file under its path) with the reason and logged (`plugin_errors`, shown by `rootstep frameworks`);
the rest keep working. `scoped()` lets a test register what it needs and gives the registry back as it
was, so nothing leaks into other tests.
"""

from __future__ import annotations

import inspect
import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import Enum
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from typing import Any, ClassVar, Generic, TypeVar

log = logging.getLogger("rootstep.plugins")

T = TypeVar("T")


class Origin(str, Enum):
    """Where a registered value came from."""

    BUILTIN = "builtin"
    ENTRY_POINT = "entry point"
    SYSTEM_FILE = "system file"
    CODE = "code"


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One name of a registry: its value (None while a built-in is not imported yet, or when it failed to
    load), its origin, the source (`<dist> <version>` of an entry point, a system file's path, the
    `module:attr` of a lazy built-in) and the load error of a plugin that failed."""

    name: str
    origin: Origin
    value: T | None = None
    source: str | None = None
    error: str | None = None
    ref: str | None = None
    """`module:attr` of a built-in imported on first use."""

    @property
    def label(self) -> str:
        """What `rootstep frameworks` shows: `built in`, `plugin <dist> <version>`, `system <file>`, or
        `registered in code`."""
        if self.origin is Origin.BUILTIN:
            return "built in"
        if self.origin is Origin.ENTRY_POINT:
            return f"plugin {self.source}"
        if self.origin is Origin.SYSTEM_FILE:
            return f"system {self.source}"
        return "registered in code"


class UnknownName(KeyError):
    """A name the registry does not hold; the message names the known ones."""

    def __init__(self, kind: str, name: str, known: list[str]):
        self.kind, self.name, self.known = kind, name, known
        super().__init__(f"unknown {kind} {name!r}; known: {', '.join(known)}")

    def __str__(self) -> str:
        return str(self.args[0])


def entry_point_dist(ep: EntryPoint) -> str:
    """`<distribution> <version>` of an entry point (its value when it has no distribution)."""
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else ep.value


class Registry(Generic[T]):
    """Named values of one kind, with their origins and the plugins that failed (see the module docstring).

    Reads are dict-like (`name in r`, `r[name]`, `list(r)`, `len(r)`), so a registry can stand where a
    dict of names stood.

    Args:
        kind: what a value is, for messages (`framework adapter`, `verifier`, `trace format`).
        group: the entry-point group that extends it (`rootstep.adapters`); None: no plugins.
        builtins: run once before the first lookup; importing the built-in modules registers them.
        adopt: `adopt(entry_point, loaded_object) -> (name, value)`: checks and converts what an entry
            point loaded (raises on a bad one); default: the entry point's name and the object as is.
        discover: run on every load after the entry points (`discover(registry)`), for sources that can
            grow while the process runs (`$ROOTSTEP_SYSTEMS`).
    """

    _all: ClassVar["weakref.WeakSet[Registry[Any]]"] = weakref.WeakSet()

    def __init__(self, kind: str, *, group: str | None = None, builtins: Callable[[], Any] | None = None,
                 adopt: Callable[[EntryPoint, Any], tuple[str, T]] | None = None,
                 discover: Callable[["Registry[T]"], None] | None = None):
        self.kind = kind
        self.group = group
        self._builtins = builtins
        self._adopt = adopt
        self._discover = discover
        self._entries: dict[str, Entry[T]] = {}
        self._failures: dict[str, Entry[T]] = {}
        self._done: set[str] = set()
        self._loading: Origin | None = None
        self._lock = threading.RLock()
        Registry._all.add(self)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, group={self.group!r}, {len(self._entries)} entries)"

    # ------------------------------------------------------------------------------------ writing

    def register(self, name: str, value: T, *, origin: Origin | None = None, source: str | None = None,
                 module: str | None = None, replace_existing: bool = True) -> T:
        """Make `value` available as `name`; returns `value` (so a decorator can return it).

        `origin` defaults to `Origin.ENTRY_POINT` while an entry point is being loaded (a plugin module
        that registers itself when imported), else to `Origin.BUILTIN` when `module` (default: the module
        of a function or class value) is one of rootstep's own, else `Origin.CODE`.
        `replace_existing=False` refuses a name already taken (ValueError)."""
        if module is None:
            module = value.__module__ if inspect.isfunction(value) or inspect.isclass(value) else ""
        with self._lock:  # `_loading` is set while this thread (holding the lock) loads an entry point
            if origin is None:
                origin = self._loading or (Origin.BUILTIN if module.startswith("rootstep.") else Origin.CODE)
            if not replace_existing and name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = Entry(name, origin, value, source)
        return value

    def register_lazy(self, name: str, ref: str) -> None:
        """A built-in imported on first use: `ref` is `module:attr`."""
        with self._lock:
            self._entries[name] = Entry(name, Origin.BUILTIN, None, ref, ref=ref)

    def fail(self, key: str, name: str, error: str, *, origin: Origin, source: str | None = None) -> None:
        """Record that the plugin `key` (`group:name`, or a system file's path) did not load, and log it."""
        with self._lock:
            self._failures[key] = Entry(name, origin, None, source, error)
        log.warning("rootstep plugin %s (%s) did not load: %s", key, source or name, error)

    def once(self, key: str) -> bool:
        """True the first time `key` is asked about (then it counts as loaded): what to load once per
        process (the entry points, one system file). `scoped()` forgets what was loaded inside it."""
        with self._lock:
            if key in self._done:
                return False
            self._done.add(key)
            return True

    # ------------------------------------------------------------------------------------ loading

    def load(self) -> None:
        """The built-ins (once), the entry points of `group` (once), then `discover`."""
        with self._lock:
            self._load_once()
            if self._discover is not None:
                self._discover(self)

    def _load_once(self) -> None:
        if self._builtins is not None and self.once("builtins"):
            self._builtins()
        if self.group and self.once("entry points"):
            self._load_entry_points()

    def _load_entry_points(self) -> None:
        if not self.group:
            return
        for ep in entry_points(group=self.group):
            key, source = f"{self.group}:{ep.name}", entry_point_dist(ep)
            self._loading = Origin.ENTRY_POINT
            try:
                loaded = ep.load()
                name, value = self._adopt(ep, loaded) if self._adopt else (ep.name, loaded)
                self.register(name, value, origin=Origin.ENTRY_POINT, source=source)
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the CLI
                self.fail(key, ep.name, f"{type(exc).__name__}: {exc}", origin=Origin.ENTRY_POINT, source=source)
            finally:
                self._loading = None

    # ------------------------------------------------------------------------------------ reading

    def entry(self, name: str) -> Entry[T] | None:
        """The entry of `name` as registered so far (nothing is loaded)."""
        return self._entries.get(name)

    def get(self, name: str) -> T:
        """The value registered as `name` (loading plugins when it is not there yet); `UnknownName`
        naming the known ones otherwise."""
        entry = self._entries.get(name)
        if entry is None:
            self.load()
            entry = self._entries.get(name)
        if entry is None:
            raise UnknownName(self.kind, name, self.names())
        if entry.ref is not None:
            module, _, attr = entry.ref.partition(":")
            value = getattr(import_module(module), attr)
            with self._lock:
                if self._entries.get(name) is entry:
                    self._entries[name] = replace(entry, value=value, ref=None)
            return value
        return entry.value  # type: ignore[return-value]

    def names(self, origin: Origin | None = None) -> list[str]:
        """Every registered name (of `origin`, when given), in registration order (built-ins first)."""
        self.load()
        return [name for name, entry in self._entries.items() if origin is None or entry.origin is origin]

    def entries(self) -> list[Entry[T]]:
        """Every entry, in registration order."""
        self.load()
        return list(self._entries.values())

    def errors(self) -> dict[str, str]:
        """`group:name` (or a system file's path) -> why it did not load."""
        return {key: str(entry.error) for key, entry in self._failures.items()}

    def failures(self) -> list[Entry[T]]:
        return list(self._failures.values())

    def __contains__(self, name: object) -> bool:
        if name in self._entries:
            return True
        self.load()
        return name in self._entries

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def items(self) -> list[tuple[str, T]]:
        return [(name, self.get(name)) for name in self.names()]

    def values(self) -> list[T]:
        return [self.get(name) for name in self.names()]

    # ------------------------------------------------------------------------------------ tests

    @contextmanager
    def scoped(self) -> Iterator["Registry[T]"]:
        """A copy to change freely: whatever is registered, failed or loaded inside the block is forgotten
        when it ends. The built-ins and entry points are loaded first, so that what importing a module
        registers once is not lost with the copy."""
        with self._lock:
            self._load_once()
            entries, failures, done = dict(self._entries), dict(self._failures), set(self._done)
        try:
            yield self
        finally:
            with self._lock:
                self._entries, self._failures, self._done = entries, failures, done

    @classmethod
    def every(cls) -> list["Registry[Any]"]:
        """Every registry of this process (the stages' live as long as their modules)."""
        return list(cls._all)


def plugin_errors() -> dict[str, str]:
    """What did not load, over every registry: `group:name` (or a system file's path) -> why."""
    out: dict[str, str] = {}
    for registry in Registry.every():
        out.update(registry.errors())
    return out
