"""What keeps the web UI safe to leave running: loopback binding, no secret in any response, a bounded
request body, and no cross-site use.

`Guard` is one ASGI middleware in front of the app:

* **secrets**: every text response (HTML, JSON, plain text) is scanned for the values of the process's
  credential-like environment variables (`*_API_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`, ...) and each
  occurrence is replaced by `***` before it leaves, whatever produced it (a provider error quoting a key,
  a row of the warehouse, a template);
* **host**: when the server is bound to loopback, a request whose `Host` is not a loopback name is
  refused (a DNS-rebinding page cannot read the UI through its own domain);
* **origin**: a state-changing request (POST, ...) that a browser marks as coming from another site
  (`Origin` not this host, or `Sec-Fetch-Site: cross-site`) is refused: another page cannot start a paid
  attribution in your name. No CORS headers are ever sent, so no other origin can read a response;
* **size**: a request body over `max_body_bytes` is refused with 413, from its `Content-Length` before
  anything is read, or as soon as the bytes streamed exceed the limit;
* **headers**: `Content-Security-Policy` (scripts and styles from this server only, no framing),
  `X-Content-Type-Options: nosniff`, `Referrer-Policy: same-origin`.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from rootstep.gateway import scrub

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL)", re.IGNORECASE)
MIN_SECRET_CHARS = 8
"""Shorter values (`x`, `true`, a port) are not treated as secrets: replacing them would garble pages."""

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}

SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; "
     b"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # "no-referrer" would make the browser send `Origin: null`
    (b"x-frame-options", b"DENY"),
]
_TEXT_TYPES = (b"text/", b"application/json", b"application/javascript", b"image/svg+xml")

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ErrorPage = Callable[[int, str, str], bytes]


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of credential-like environment variables (longest first, so a key is replaced whole)."""
    environ = os.environ if environ is None else environ
    values = {v for k, v in environ.items() if _SECRET_NAME.search(k) and len(v.strip()) >= MIN_SECRET_CHARS}
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """`text` with every secret of the environment replaced by `***`."""
    return scrub(text, env_secrets() if secrets is None else secrets)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and the usual names of the loopback host."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class UploadTooLarge(Exception):
    """The request body grew past the limit while it was being read."""

    def __init__(self, limit: int):
        super().__init__(f"the upload is larger than the limit of {limit / 1e6:g} MB")
        self.limit = limit


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


class Guard:
    """The middleware described in the module docstring."""

    def __init__(self, app: Any, *, loopback_only: bool, max_body_bytes: int, error_page: ErrorPage,
                 secrets: list[str] | None = None):
        self.app = app
        self.loopback_only = loopback_only
        self.max_body_bytes = max_body_bytes
        self.error_page = error_page
        self.secrets = env_secrets() if secrets is None else secrets

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            await self.respond(send, *refusal)
            return
        await self.app(scope, self.limited(receive), self.redacting(send))

    def refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        host = _header(scope, b"host") or ""
        hostname = urlsplit(f"//{host}").hostname or ""
        if self.loopback_only and not is_loopback(hostname):
            return 400, "Unexpected host", (f"This server only answers requests addressed to the loopback host, "
                                            f"not {host!r}.")
        if scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            origin = _header(scope, b"origin")
            cross_site = (_header(scope, b"sec-fetch-site") or "").lower() == "cross-site"
            if cross_site or (origin is not None and urlsplit(origin).netloc != host):  # "null" too
                return 403, "Cross-site request refused", "A page of another site cannot send requests to this UI."
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            return 413, "Upload too large", (f"The request is {int(length) / 1e6:.1f} MB; the limit is "
                                             f"{self.max_body_bytes / 1e6:g} MB (rootstep ui --max-upload-mb).")
        return None

    def limited(self, receive: Receive) -> Receive:
        seen = 0

        async def receive_limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    raise UploadTooLarge(self.max_body_bytes)
            return message

        return receive_limited

    def redacting(self, send: Send) -> Send:
        start: Message | None = None
        chunks: list[bytes] = []

        async def send_redacted(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k not in {h for h, _ in SECURITY_HEADERS}]
                start = {**message, "headers": headers + SECURITY_HEADERS}
                return
            if message["type"] != "http.response.body" or start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            content_type = dict(start["headers"]).get(b"content-type", b"")
            if content_type.startswith(_TEXT_TYPES) and any(secret.encode() in body for secret in self.secrets):
                body = scrub(body.decode("utf-8", "replace"), self.secrets).encode("utf-8")
                headers = [(k, v) for k, v in start["headers"] if k != b"content-length"]
                start = {**start, "headers": headers + [(b"content-length", str(len(body)).encode())]}
            await send(start)
            await send({"type": "http.response.body", "body": body})

        return send_redacted

    async def respond(self, send: Send, status: int, title: str, message: str) -> None:
        out = self.redacting(send)
        await out({"type": "http.response.start", "status": status,
                   "headers": [(b"content-type", b"text/html; charset=utf-8")]})
        await out({"type": "http.response.body", "body": self.error_page(status, title, message)})
