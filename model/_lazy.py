"""Lazy public faces: a package re-exports names from its private modules without importing them
until first use, so `rootstep --help` does not pay for litellm or FastAPI."""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module-level `__getattr__` for `package`: `name` is imported from `package.<exports[name]>` on
    first use and kept in the package's namespace."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
