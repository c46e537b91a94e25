"""Opt-in, content-addressed response cache: an identical temperature-0 request costs nothing twice.

The key is the model string plus the canonical request (see `_hashing`), so a cached answer is only ever
reused for the same model and the same messages, tools and options. Only requests that set
`temperature` to 0 explicitly and ask for one choice are cached: anything else is meant to vary.
Entries are JSON files written atomically (temporary file, then rename), one per key.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from rootstep.model import canonical_json

from ._hashing import canonical_request


def cacheable(request: dict[str, Any]) -> bool:
    return request.get("temperature") == 0 and request.get("n", 1) in (None, 1)


class ResponseCache:
    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def key(self, model: str, request: dict[str, Any]) -> str:
        return hashlib.sha256(canonical_json([model, canonical_request(request)]).encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, model: str, request: dict[str, Any]) -> dict[str, Any] | None:
        path = self._path(self.key(model, request))
        try:
            return json.loads(path.read_text("utf-8"))
        except (FileNotFoundError, ValueError):
            return None

    def put(self, model: str, request: dict[str, Any], response: dict[str, Any]) -> None:
        path = self._path(self.key(model, request))
        path.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(response, f, ensure_ascii=False)
        os.replace(tmp, path)
