"""The call journal: one append-only JSONL file per run, each line a complete `LLMCall`.

A line is written whole with a single `write` on a file opened in append mode, then flushed and
fsync'd before the gateway answers the client, so a call that a framework saw is on disk. A crash can
at worst leave a torn last line (a write the kernel cut short): reading skips a line that does not parse
as an `LLMCall`, so a torn line is never taken for a call. The journal survives a gateway restart;
`flush_to_warehouse` copies it into the warehouse, whose content-derived ids make that idempotent.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from rootstep.model import LLMCall

if TYPE_CHECKING:  # pragma: no cover
    from rootstep.warehouse import Warehouse, WriteReport


class Journal:
    """Append-only per-run JSONL files under `root` (`<root>/<run_id>.jsonl`)."""

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self._lock = threading.Lock()
        self._files: dict[str, int] = {}

    def path(self, run_id: str) -> Path:
        return self.root / f"{run_id}.jsonl"

    def append(self, call: LLMCall) -> None:
        """Write `call` as one line and make it durable before returning."""
        line = (call.model_dump_json() + "\n").encode("utf-8")
        with self._lock:
            fd = self._files.get(call.run_id)
            if fd is None:
                fd = os.open(self.path(call.run_id), os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
                self._repair_torn_tail(fd)
                self._files[call.run_id] = fd
            written = os.write(fd, line)
            if written != len(line):  # pragma: no cover - a full disk; never leave half a line behind
                os.ftruncate(fd, os.fstat(fd).st_size - written)
                raise OSError(f"journal {self.path(call.run_id)}: short write ({written} of {len(line)} bytes)")
            if self.fsync:
                os.fdatasync(fd)

    @staticmethod
    def _repair_torn_tail(fd: int) -> None:
        """Start a new line if a crash left the file without a final newline (the torn line stays skipped)."""
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            os.write(fd, b"\n")

    def calls(self, run_id: str) -> list[LLMCall]:
        """The run's calls in the order they were written; torn or invalid lines are skipped."""
        path = self.path(run_id)
        if not path.exists():
            return []
        calls: list[LLMCall] = []
        with path.open("rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    continue  # torn last line: its write never completed, so no client saw this call
                try:
                    calls.append(LLMCall.model_validate(json.loads(raw)))
                except (ValueError, ValidationError):
                    continue
        return calls

    def run_ids(self) -> list[str]:
        return sorted(p.stem for p in self.root.glob("*.jsonl"))

    def flush_to_warehouse(self, warehouse: "Warehouse", run_ids: list[str] | None = None) -> "WriteReport":
        """Write the journaled calls of `run_ids` (default: all) as `llm_calls` rows; repeats write nothing new."""
        calls = [c for run_id in (run_ids or self.run_ids()) for c in self.calls(run_id)]
        return warehouse.write_llm_calls(calls)

    def close(self) -> None:
        with self._lock:
            for fd in self._files.values():
                os.close(fd)
            self._files.clear()
