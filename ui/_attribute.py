"""The attribute page's work: read an uploaded trace, run a tracer on it (or on a stored run) in the
background, and store the prediction as `rootstep evaluate` does (`method=tracer`, never a label).

An uploaded trace is stored first as `rootstep import` would store it (the run and, when the file
carries one, its human label), because a prediction is an annotation of a stored run. Uploading the same
file twice stores nothing new (ids are content-derived).

Jobs run one at a time in a worker thread (a local model uses the machine's cores; a remote one its
rate limit); the page polls `/api/jobs/<id>` for the state and the phase, and shows the result when
the job is done. Every text a job keeps (answers, errors) is scrubbed of the environment's secrets
before it is stored or shown.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rootstep.tracers import tracer_fn
from rootstep.tracers import predict
from rootstep.model import Annotation, InputError, Trajectory
from rootstep.warehouse import Warehouse
from rootstep.traces.whowhen import parse_record

from ._safety import redact_text

UPLOAD_FORMATS = ("Who&When JSON (Algorithm-Generated or Hand-Crafted), a plain trace {\"history\": [...], \"question\", "
                  "\"ground_truth\"}, or any format of `rootstep import traces` (OTLP JSON with GenAI or OpenInference "
                  "attributes, Langfuse, LangSmith, Inspect .eval/.json, smolagents memory, AG2 logs, ATIF)")


def parse_upload(filename: str, data: bytes) -> tuple[Trajectory, Annotation | None]:
    """An uploaded trace file -> its trajectory and, when the file is labelled, its human label.

    The one place the UI reads uploads: what `rootstep import whowhen` reads (Who&When files and plain
    `{"history": [...]}` traces) and every format of `rootstep import traces` (OTLP JSON, Langfuse,
    LangSmith, Inspect logs, smolagents memory, AG2 logs, ATIF). A file holding several traces gives its
    first one that did not succeed. Raises `InputError` naming the file, the field and the problem.
    """
    name = os.path.basename(filename or "") or "upload.json"
    if not data.strip():
        raise InputError(name, "<file>", "is empty")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:  # binary: an Inspect .eval (zip) or an AG2 SQLite log, or garbage
        return _as_trace(name, data, InputError(name, "<file>", f"not UTF-8 text ({exc.reason} at byte {exc.start})"))
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:  # JSON Lines (OTLP) or broken JSON
        return _as_trace(name, data, InputError(
            name, "<json>", f"malformed JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"))
    if isinstance(record, dict) and ("history" in record or "conversation" in record):
        trajectory, label = parse_record(record, name, raw=text)
        return trajectory.model_copy(update={"source": f"upload:{name}"}), label
    try:
        return _as_trace(name, data, None)
    except InputError:
        trajectory, label = parse_record(record, name, raw=text)  # raises what a Who&When file lacks
        return trajectory.model_copy(update={"source": f"upload:{name}"}), label


def _as_trace(name: str, data: bytes, otherwise: InputError | None) -> tuple[Trajectory, None]:
    """The upload read by the trace importers (`load_traces`, format detected); `otherwise` is raised when no
    trace format reads it (the importers' own error when None)."""
    from rootstep.traces import load_traces

    with tempfile.TemporaryDirectory(prefix="rootstep-upload-") as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        try:
            trajectories = load_traces(path)
        except InputError as exc:
            if otherwise is not None:
                raise otherwise from None
            raise InputError(name, exc.field, exc.problem) from None  # name the upload, not its temporary copy
    if not trajectories:
        raise InputError(name, "<file>", "holds no trace")
    chosen = next((t for t in trajectories if t.success is not True), trajectories[0])
    return chosen.model_copy(update={"source": f"upload:{name}"}), None


def expected_calls(method: str, trajectory: Trajectory) -> str:
    """How many model calls a method makes on this run, as far as it is known in advance."""
    n = sum(s.kind == "agent" for s in trajectory.steps)
    return {
        "all_at_once": "1 call",
        "step_by_step": f"up to {n} calls, one per agent step, stopping at the first yes",
        "binary_search": f"{max(math.ceil(math.log2(n)), 0) if n else 0} calls, halving {n} agent steps",
    }.get(method, "")


State = Literal["queued", "running", "done", "failed"]


@dataclass
class Job:
    id: str
    source: str
    method: str
    model: str
    with_ground_truth: bool
    max_prompt_chars: int
    max_tokens: int
    trajectory: Trajectory
    upload_label: Annotation | None = None
    store_run: bool = False
    state: State = "queued"
    phase: str = "waiting for the previous job"
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    run_id: str = ""
    expected: str = ""
    annotation: Annotation | None = None
    gold: Annotation | None = None
    error: str | None = None

    @property
    def elapsed(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.time()) - self.started

    def status(self) -> dict[str, Any]:
        """What the polling page reads."""
        return {
            "id": self.id, "state": self.state, "phase": self.phase, "elapsed_s": round(self.elapsed, 1),
            "expected": self.expected, "run_id": self.run_id, "done": self.state in ("done", "failed"),
            "error": self.error,
        }


def _scrubbed(annotation: Annotation) -> Annotation:
    evidence = annotation.evidence.model_copy(update={
        "reason": None if annotation.evidence.reason is None else redact_text(annotation.evidence.reason),
        "notes": [redact_text(n) for n in annotation.evidence.notes],
        "transcript": [asked.model_copy(update={"answer": redact_text(asked.answer)})
                       for asked in annotation.evidence.transcript],
    })
    return annotation.model_copy(update={"evidence": evidence})


class Jobs:
    """Attribution jobs of this server: run one at a time, the latest `keep` remembered."""

    def __init__(self, warehouse: Warehouse, keep: int = 50):
        self.warehouse = warehouse
        self.keep = keep
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rootstep-ui-attribute")

    def submit(self, trajectory: Trajectory, *, source: str, method: str, model: str, with_ground_truth: bool = True,
               max_prompt_chars: int = 60_000, max_tokens: int = 512, upload_label: Annotation | None = None,
               store_run: bool = False, run_id: str | None = None) -> Job:
        tracer_fn(method)  # ValueError listing the methods
        job = Job(id=uuid.uuid4().hex[:12], source=source, method=method, model=model,
                  with_ground_truth=with_ground_truth, max_prompt_chars=max_prompt_chars, max_tokens=max_tokens,
                  trajectory=trajectory, upload_label=upload_label, store_run=store_run,
                  run_id=run_id or trajectory.id, expected=expected_calls(method, trajectory))
        with self._lock:
            self._jobs[job.id] = job
            while len(self._jobs) > self.keep:
                self._jobs.popitem(last=False)
        self._pool.submit(self._run, job)
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def recent(self) -> list[Job]:
        with self._lock:
            return list(reversed(self._jobs.values()))

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self, job: Job) -> None:
        job.state, job.started = "running", time.time()
        try:
            if job.store_run:
                job.phase = "storing the uploaded run"
                self.warehouse.write_trajectories([job.trajectory])
                if job.upload_label is not None:
                    self.warehouse.write_annotations([job.upload_label])
            job.gold = self.warehouse.label(job.run_id)
            job.phase = f"asking {job.model} ({job.method.replace('_', ' ')}: {job.expected or 'calls as needed'})"
            annotation = _scrubbed(predict(
                job.run_id, job.trajectory, job.method, job.model, with_ground_truth=job.with_ground_truth,
                max_prompt_chars=job.max_prompt_chars, max_tokens=job.max_tokens, warehouse=self.warehouse,
            ))
            job.phase = "storing the prediction"
            self.warehouse.write_annotations([annotation])
            job.annotation = annotation
            job.state, job.phase = "done", "done"
        except Exception as exc:  # the job's own failure (the warehouse), shown on its page
            job.error = redact_text(f"{type(exc).__name__}: {exc}")
            job.state, job.phase = "failed", "failed"
        finally:
            job.finished = time.time()
