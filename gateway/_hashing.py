"""The canonical form of a chat-completion request, its hash, and the redaction of secrets.

Replay matches a request by the hash of its canonical form. The canonical form keeps what decides the
model's answer (messages, tools, sampling options) and drops what does not (`stream`, `stream_options`,
`user`, credentials). Inside strings, uuids, ISO-8601 timestamps and the memory addresses of Python object
reprs (`<function f at 0x7f0f59145bc0>`) are replaced by placeholders: a framework that stamps each message
with a fresh uuid or the current time, or shows an agent a repr of the object its code returned
(smolagents' observations), still replays. The replacement is made for hashing only; the stored request
keeps the original text.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from rootstep.model import canonical_json

SECRET_KEYS = frozenset(
    {"api_key", "apikey", "authorization", "proxy-authorization", "x-api-key", "api-key", "headers", "extra_headers"}
)
"""Keys whose values never leave the gateway: dropped from stored requests and from the hash."""

NON_SEMANTIC_KEYS = frozenset({"stream", "stream_options", "user", "metadata", "store", "service_tier"})
"""Request fields that do not change the answer: left out of the hash (`stream` replays either way)."""

_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]{6,16}\b")
"""CPython's default repr ends `at 0x<id>`: a different address in every process (smolagents showed the
manager `<function create_function.<locals>.new_func at 0x7f0f59145bc0>`, and every replay past that step
diverged from the recording). Recordings made before this normalisation keep their stored hashes (a call's
id is made from its hash): a request of theirs that shows an address never matched a replay and still
does not; runs recorded since replay past such observations."""
_TIMESTAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"
)


def normalise_text(text: str) -> str:
    """Replace uuids by `<uuid>`, ISO-8601 date-times by `<timestamp>` (dates alone are kept) and object
    addresses (`at 0x7f...`) by `at <address>`."""
    return _ADDRESS.sub("at <address>", _TIMESTAMP.sub("<timestamp>", _UUID.sub("<uuid>", text)))


def _normalise(value: Any) -> Any:
    if isinstance(value, str):
        return normalise_text(value)
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    return value


def redact(request: dict[str, Any]) -> dict[str, Any]:
    """A copy of `request` without credentials (`api_key`, `Authorization`, header maps), at any depth."""
    return _redact(request)


def _redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _redact(v) for k, v in value.items() if str(k).lower() not in SECRET_KEYS}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    return value


def canonical_request(request: dict[str, Any]) -> dict[str, Any]:
    """The part of a request that decides the answer, with uuids and timestamps normalised.

    `model` is left out: a replay may name the model differently (the gateway routes by the run's
    context, not by the framework's model field). Tool-call ids inside earlier assistant messages are
    kept: providers make them, so they replay identically when the prefix is served from the recording.
    """
    kept = {k: v for k, v in redact(request).items() if k not in NON_SEMANTIC_KEYS and k != "model"}
    return _normalise(kept)


def request_hash(request: dict[str, Any]) -> str:
    """sha256 (first 24 hex digits) of the canonical JSON of `canonical_request(request)`."""
    return hashlib.sha256(canonical_json(canonical_request(request)).encode("utf-8")).hexdigest()[:24]


def scrub(text: str, secrets: list[str]) -> str:
    """`text` with every occurrence of each non-empty secret replaced by `***`."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
