"""Golden-path cells recorded from the real local model (issue 23, point 9): beside each scripted team of
the matrix (tests/_golden_teams.py), real runs of the framework with every agent on
Qwen2.5-Coder-0.5B-Instruct, one that the verifier judged right and one it judged wrong.

A recording is a fixture, tests/fixtures/golden_real/<framework>-<benchmark>-<right|wrong>.json: the task,
the verdict the run got when it was recorded, and every LLM reply of the run in the order each agent
received them, copied from the gateway's journal (nothing written by hand; a person's reading of why the
verdict is right is kept apart, in `judgement`). tests/test_golden_path.py replays it through the real
framework in Docker: each agent is a `scripted/` model serving its recorded replies in order (a reply the
recording does not have is an error naming the agent), and asserts that the verdict is what it was when
recorded, and that a wrong answer is a plain failure, not a suspect one. Unlike the gateway's replay,
this does not match requests by hash: a prompt that changes since the recording still replays, and what
is tested is that real output still meets the framework's answer contract and the verifier.

Record one cell at a time (the local model takes most of a small machine):

    ROOTSTEP_LOCAL_THREADS=1 .venv/bin/python -m tests._golden_recorded record -f metagpt -b gsm8k \\
        --task test-1101 --task test-120

runs each task in turn and keeps the first right and the first wrong run of the cell that has none yet.
A run already stored in a warehouse (`rootstep collect --model local/...`) is turned into a fixture with

    .venv/bin/python -m tests._golden_recorded export --warehouse ../slice-data --run-id ag2-gsm8k-test-1101

which reads a copy of the warehouse (the given one is never written to).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from rootstep.model import LLMCall, Trajectory

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "golden_real"
MODEL = "local/qwen2.5-coder-0.5b"
PRIORITY = [(framework, benchmark) for framework in ("ag2", "smolagents", "agentprune", "metagpt")
            for benchmark in ("gsm8k", "mbppplus")]
"""Recorded first: the frameworks whose real output broke contracts before (MetaGPT on GSM8K answers with
code), on the slice's benchmarks."""


class Reply(BaseModel):
    """One recorded reply to one agent: the assistant message as the model sent it, or the error."""

    agent: str
    purpose: str = "step"
    content: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    """In the OpenAI form, ids included (later requests quote them)."""
    finish_reason: str | None = None
    error: str | None = None
    status_code: int | None = None


class Recording(BaseModel):
    framework: str
    benchmark: str
    task_id: str
    model: str
    success: bool
    details: dict[str, Any]
    """The verifier's details when the run was recorded (what the replay must reproduce)."""
    final_answer: str | None = None
    source: str
    """Where the replies come from: the rootstep commit that recorded them, or the warehouse and run id."""
    judgement: str = ""
    """A person's reading of the run: why its verdict is right (not model output)."""
    known_issue: str = ""
    """Set by the person who read the run when the recorded verdict is wrong, saying why: the replay must then
    give the other verdict, and its test is an expected failure (strict) until the contract is fixed."""
    replies: list[Reply]

    @property
    def outcome(self) -> Literal["right", "wrong"]:
        return "right" if self.success else "wrong"

    @property
    def id(self) -> str:
        return f"{self.framework}-{self.benchmark}-{self.outcome}" + ("-misjudged" if self.known_issue else "")

    def scripts(self) -> dict[str, list[Any]]:
        """{agent: its replies in order}, as `register_script` responses (a recorded error is raised again)."""
        from litellm.llms.custom_llm import CustomLLMError

        out: dict[str, list[Any]] = {}
        for r in self.replies:
            if r.error is not None:
                response: Any = CustomLLMError(status_code=r.status_code or 500, message=r.error)
            else:
                response = {"content": r.content, "tool_calls": r.tool_calls, "finish_reason": r.finish_reason}
            out.setdefault(r.agent, []).append(response)
        return out


def reply_of(call: LLMCall) -> Reply:
    """The reply `call` gave its agent, copied from the journaled response."""
    if call.error is not None:
        code = (call.response.get("error") or {}).get("code")
        return Reply(agent=call.agent, purpose=call.purpose, error=call.error,
                     status_code=code if isinstance(code, int) else None)
    choice = (call.response.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    return Reply(agent=call.agent, purpose=call.purpose, content=message.get("content"),
                 tool_calls=list(message.get("tool_calls") or []), finish_reason=choice.get("finish_reason"))


def recording_of(trajectory: Trajectory, calls: list[LLMCall], source: str) -> Recording:
    """The fixture of a real run: its verdict and its calls' replies (in the order they were made)."""
    if trajectory.verdict is None:
        raise ValueError(f"run {trajectory.id}: no verdict to record")
    if "error" in trajectory.metadata:
        raise ValueError(f"run {trajectory.id}: the framework failed ({trajectory.metadata['error']}); not a golden cell")
    simulated = [c for c in calls if c.simulated or c.mode != "live"]
    if simulated or not calls:
        raise ValueError(f"run {trajectory.id}: {len(simulated)} of {len(calls)} calls are not live real-model calls")
    return Recording(
        framework=trajectory.framework, benchmark=trajectory.benchmark, task_id=trajectory.task_id,
        model=trajectory.model or calls[0].model, success=trajectory.verdict.success,
        details=trajectory.verdict.details, final_answer=trajectory.final_answer, source=source,
        replies=[reply_of(c) for c in sorted(calls, key=lambda c: c.created_at)])


def fixture_path(recording: Recording) -> Path:
    return FIXTURES / f"{recording.id}.json"


def load_recordings(root: Path = FIXTURES) -> list[Recording]:
    """Every recording under `root`; a malformed one is an error naming the file and the field."""
    out = []
    for path in sorted(root.glob("*.json")):
        try:
            recording = Recording.model_validate_json(path.read_text(encoding="utf-8"))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ValueError(f"{path}: {'.'.join(map(str, first['loc'])) or '<json>'}: {first['msg']}") from None
        if path.stem != recording.id:
            raise ValueError(f"{path}: holds a {recording.id} recording; name it {recording.id}.json")
        out.append(recording)
    return out


_LATER = ("not recorded yet: a real episode of the 0.5B takes 5-15 minutes on the 2-core project machine shared "
          "by seven agents, and the session of 2026-11-25 recorded the pairs where real output broke contracts "
          "before (PRIORITY) first")
_NOT_YET = {
    "aflow": ("gsm8k", "math500", "hotpotqa", "mbpp", "mbppplus", "humaneval", "humanevalplus"),
    "owl": ("gsm8k", "math500", "mbpp", "mbppplus", "humaneval", "humanevalplus"),
    "ag2": ("math500",),
    "smolagents": ("math500", "mbpp", "humaneval", "humanevalplus"),
    "agentprune": ("math500", "hotpotqa", "mbpp", "humaneval", "humanevalplus"),
    "metagpt": ("math500", "mbpp", "humaneval", "humanevalplus"),
}
LEFT: dict[tuple[str, str], str] = {
    **{(framework, benchmark): _LATER for framework, benchmarks in _NOT_YET.items() for benchmark in benchmarks},
    ("agentprune", "mbppplus"): (
        "right: on Mbpp/404, Mbpp/309 and Mbpp/127 the 0.5B team handed in a function that type-checks its inputs "
        "or special-cases zero (returning None or raising), which MBPP+'s float and zero inputs break; no right run "
        "in the session's time"),
}
"""Framework x benchmark pairs without a right or a wrong recording, and why (tests/test_golden_path.py checks
that every pair is recorded or named here, and that a recorded pair is taken off)."""


# ------------------------------------------------------------------------------------------- recording


def _write(recording: Recording, replace: bool) -> str:
    path = fixture_path(recording)
    if path.exists() and not replace:
        return f"kept the existing {path.name}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(recording.model_dump_json(indent=1, exclude_defaults=True) + "\n", encoding="utf-8")
    return f"wrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}"


def _commit() -> str:
    here = Path(__file__).resolve().parent
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True)
    return found.stdout.strip() or "unknown"


def _show(t: Trajectory) -> str:
    answer = (t.final_answer or "").strip().replace("\n", " | ")
    return f"{t.framework}/{t.benchmark}/{t.task_id}: {t.verdict.success if t.verdict else None}  answer: {answer[:300]}"


def record(framework: str, benchmark: str, task_ids: list[str], model: str, timeout_s: float, replace: bool,
           wanted: set[str] | None = None) -> None:
    """Run the tasks one at a time, keeping the first right and the first wrong run the cell lacks, until it
    has the `wanted` outcomes (default both)."""
    from rootstep.adapters import get_adapter
    from rootstep.adapters.base import default_verifier
    from rootstep.benchmarks import load_tasks
    from rootstep.gateway import Gateway, GatewayServer
    from rootstep.sandboxes import SandboxLimits, get_sandbox

    tasks = {t.task_id: t for t in load_tasks(benchmark)}
    missing = [t for t in task_ids if t not in tasks]
    if missing:
        sys.exit(f"error: {benchmark} has no task {', '.join(missing)}")
    have = {o for o in ("right", "wrong") if (FIXTURES / f"{framework}-{benchmark}-{o}.json").exists() and not replace}
    wanted = wanted or {"right", "wrong"}
    sandbox = get_sandbox("docker", limits=SandboxLimits(timeout_s=120, memory_mb=2048), pool=1)
    with tempfile.TemporaryDirectory(prefix="golden-record-") as journal:
        gateway = Gateway(Path(journal), fsync=False)
        server = GatewayServer(gateway).start()
        try:
            adapter = get_adapter(framework, gateway=server, verifier=default_verifier(sandbox), timeout_s=timeout_s)
            for task_id in task_ids:
                if have >= wanted:
                    break
                t = adapter.run(tasks[task_id], model)
                print(_show(t), flush=True)
                if "error" in t.metadata or t.verdict is None:
                    print(f"  the episode failed: {t.metadata.get('error')}", flush=True)
                    continue
                recording = recording_of(t, gateway.calls(t.recording.gateway_run_id),
                                         source=f"recorded by tests/_golden_recorded.py at rootstep {_commit()}")
                if recording.outcome in have:
                    print(f"  a {recording.outcome} run is recorded already", flush=True)
                    continue
                print("  " + _write(recording, replace), flush=True)
                have.add(recording.outcome)
        finally:
            server.stop()
            gateway.close()
            sandbox.close()


def export(warehouse: str, run_id: str, replace: bool) -> None:
    """Turn a run stored in `warehouse` into a fixture, reading a copy of the warehouse."""
    from rootstep.gateway import Journal
    from rootstep.warehouse import Warehouse, llm_call_from_row

    with tempfile.TemporaryDirectory(prefix="golden-export-") as tmp:
        copy = Path(tmp) / "warehouse"
        shutil.copytree(warehouse, copy, ignore=shutil.ignore_patterns("catalog.duckdb*", "*.lock"))
        wh = Warehouse(str(copy))
        run = wh.resolve_run_id(run_id)
        t = wh.trajectory(run)
        gateway_run = t.recording.gateway_run_id
        calls = Journal(copy / "gateway" / "journal").calls(gateway_run) if (copy / "gateway" / "journal").is_dir() else []
        calls = calls or [llm_call_from_row(r) for r in wh.rows(
            "SELECT * FROM llm_calls WHERE run_id = ? ORDER BY created_at", [gateway_run])]
        print(_show(t))
        recording = recording_of(t, calls, source=f"warehouse {Path(warehouse).resolve()} run {run}")
        print("  " + _write(recording, replace))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests._golden_recorded", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run tasks on the real model and keep a right and a wrong run")
    rec.add_argument("-f", "--framework", required=True)
    rec.add_argument("-b", "--benchmark", required=True)
    rec.add_argument("--task", action="append", required=True, help="a task id; repeat, tried in order")
    rec.add_argument("--model", default=MODEL)
    rec.add_argument("--timeout", type=float, default=1800.0, help="seconds per episode")
    rec.add_argument("--outcome", action="append", choices=["right", "wrong"],
                     help="stop once this outcome is recorded (repeat for both; default both)")
    rec.add_argument("--replace", action="store_true", help="overwrite an existing recording of the outcome")
    exp = sub.add_parser("export", help="turn a run stored in a warehouse into a fixture")
    exp.add_argument("--warehouse", required=True)
    exp.add_argument("--run-id", required=True)
    exp.add_argument("--replace", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.framework, args.benchmark, args.task, args.model, args.timeout, args.replace,
               set(args.outcome) if args.outcome else None)
    else:
        export(args.warehouse, args.run_id, args.replace)


if __name__ == "__main__":
    main()
