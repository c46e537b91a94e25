"""The built-in benchmarks' cards (`catalog.toml`): title, kind, verifier, licence, source and data files.

A card is data, not code: adding a built-in benchmark is a table in catalog.toml and a loader registered
with `@benchmark(catalog("<name>"))`.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from ._registry import BenchmarkInfo

CATALOG = Path(__file__).with_name("catalog.toml")


@lru_cache(maxsize=1)
def _cards() -> dict[str, dict[str, Any]]:
    return tomllib.loads(CATALOG.read_text(encoding="utf-8"))


def catalog(name: str, **computed: Any) -> BenchmarkInfo:
    """`name`'s card as a `BenchmarkInfo`; `computed`: fields only known here (a file inside an installed package)."""
    card = {**_cards()[name], **computed}
    return BenchmarkInfo(name=name, **{**card, "files": tuple(card["files"])})
