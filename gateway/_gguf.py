"""A GGUF file's metadata, read without loading the model: the keys asked for, the others skipped.

llama.cpp's binding exposes neither the tokenizer nor the metadata; the confidence tracer reads a base
model's SentencePiece vocabulary from it (`rootstep.tracers._spm`), and the engine checks that a draft
model shares the verifying model's vocabulary (`_local_model.same_vocabulary`).
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class GGUFError(ValueError):
    """The file is not a GGUF file this reader understands (or not the vocabulary asked for)."""


def _read(f: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize("<" + fmt)
    return struct.unpack("<" + fmt, f.read(size))[0]


def _string(f: BinaryIO) -> str:
    return f.read(int(_read(f, "Q"))).decode("utf-8", "replace")


def _value(f: BinaryIO, kind: int, keep: bool) -> object:
    if kind == 8:
        return _string(f)
    if kind == 9:
        item, count = int(_read(f, "I")), int(_read(f, "Q"))
        if item == 8:
            strings = [_string(f) for _ in range(count)]
            return strings if keep else None
        fmt = _SCALARS[item]
        data = f.read(struct.calcsize("<" + fmt) * count)
        return list(struct.unpack(f"<{count}{fmt}", data)) if keep else None
    return _read(f, _SCALARS[kind])


def gguf_metadata(path: str, keys: tuple[str, ...] | frozenset[str] | set[str]) -> dict[str, object]:
    """The values of `keys` in a GGUF file's metadata (the others are skipped, not kept)."""
    wanted = frozenset(keys)
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise GGUFError(f"{path}: not a GGUF file")
        version = _read(f, "I")
        if version not in (2, 3):
            raise GGUFError(f"{path}: GGUF version {version} is not supported")
        _read(f, "Q")  # tensor count
        found: dict[str, object] = {}
        for _ in range(int(_read(f, "Q"))):
            key, kind = _string(f), int(_read(f, "I"))
            value = _value(f, kind, key in wanted)
            if key in wanted:
                found[key] = value
    return found
