"""Turning `run()` arguments into one checked request, shared by the Docker and local sandboxes."""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from pathlib import PurePosixPath

MAX_CODE_BYTES = 120_000  # one argv string may be at most 128 KiB (MAX_ARG_STRLEN)

# The only environment code in a sandbox sees: nothing is inherited from the host (no secrets).
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/work",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "TMPDIR": "/tmp",
}


@dataclass(frozen=True)
class Request:
    argv: list[str]
    files: dict[str, bytes]
    stdin: bytes | None
    timeout: float

    def wire(self, *, env: dict[str, str], output_bytes: int, clean: bool) -> dict:
        """The JSON request the in-container runner reads."""
        return {
            "argv": self.argv,
            "files": {k: base64.b64encode(v).decode() for k, v in self.files.items()},
            "stdin": base64.b64encode(self.stdin).decode() if self.stdin is not None else None,
            "timeout": self.timeout,
            "output_bytes": output_bytes,
            "env": env,
            "clean": clean,
        }


def check_env(env: dict[str, str] | None) -> dict[str, str]:
    """`env` given by the caller, added to BASE_ENV; keys and values must be strings."""
    out = dict(BASE_ENV)
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise ValueError(f"env: invalid variable name {key!r}")
        if not isinstance(value, str) or "\0" in value:
            raise ValueError(f"env[{key!r}]: value must be a string without NUL bytes")
        out[key] = value
    return out


def make_request(
    command: list[str] | str | None,
    code: str | None,
    files: dict[str, str | bytes] | None,
    stdin: str | None,
    timeout: float,
    *,
    max_timeout: float,
) -> Request:
    """Check the arguments of `Sandbox.run` and build the request; errors name the argument."""
    if command is not None and code is not None:
        raise ValueError("command and code: pass one of them, not both")
    if command is None and code is None:
        raise ValueError("command: pass a command (string or argv list) or `code` (Python source)")
    if code is not None:
        if not isinstance(code, str):
            raise ValueError(f"code: expected Python source as str, got {type(code).__name__}")
        if "\0" in code:
            raise ValueError("code: contains a NUL byte")
        if len(code.encode()) > MAX_CODE_BYTES:
            raise ValueError(
                f"code: {len(code.encode())} bytes is over {MAX_CODE_BYTES}; write it with `files` "
                "and run it with a command such as ['python3', 'main.py']"
            )
        argv = ["python3", "-c", code]
    elif isinstance(command, str):
        if not command.strip():
            raise ValueError("command: empty string")
        argv = ["/bin/sh", "-c", command]
    elif isinstance(command, (list, tuple)):
        if not command or not all(isinstance(a, str) for a in command):
            raise ValueError("command: expected a non-empty list of strings")
        argv = list(command)
    else:
        raise ValueError(f"command: expected str or list[str], got {type(command).__name__}")
    if any("\0" in a for a in argv):
        raise ValueError("command: contains a NUL byte")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout: expected a positive number of seconds, got {timeout!r}")
    if stdin is not None and not isinstance(stdin, (str, bytes)):
        raise ValueError(f"stdin: expected str, got {type(stdin).__name__}")
    return Request(
        argv=argv,
        files=check_files(files),
        stdin=stdin.encode() if isinstance(stdin, str) else stdin,
        timeout=float(min(timeout, max_timeout)),  # the limit is a hard cap on every run
    )


def check_files(files: dict[str, str | bytes] | None) -> dict[str, bytes]:
    """Relative POSIX paths that stay inside the work dir; str contents are written as UTF-8."""
    if files is None:
        return {}
    if not isinstance(files, dict):
        raise ValueError(f"files: expected a dict of path -> content, got {type(files).__name__}")
    out: dict[str, bytes] = {}
    for path, content in files.items():
        if not isinstance(path, str) or not path or "\0" in path:
            raise ValueError(f"files: invalid path {path!r}")
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts or str(pure) in ("", "."):
            raise ValueError(f"files[{path!r}]: must be a relative path inside the work dir (no '/' start, no '..')")
        if isinstance(content, str):
            out[str(pure)] = content.encode()
        elif isinstance(content, (bytes, bytearray)):
            out[str(pure)] = bytes(content)
        else:
            raise ValueError(f"files[{path!r}]: content must be str or bytes, got {type(content).__name__}")
    return out
