"""Content-derived ids: the same content always yields the same id, so re-imports never duplicate rows."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values always give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def content_id(prefix: str, *parts: Any, length: int = 20) -> str:
    """`prefix_` + the first `length` hex digits of the sha256 of the canonical JSON of `parts`."""
    digest = hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()
    return f"{prefix}_{digest[:length]}"
