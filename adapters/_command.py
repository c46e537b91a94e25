"""The command adapter: any program whose agents call an OpenAI-compatible endpoint, run as a framework.

`system_adapter(load_system("my_system.toml"))` is an `Adapter` class named after the system file's
`name`. An episode copies the program's folder into a sandbox container of the system's image, runs its
`command` there (`_drivers/command_driver.py` sets the environment: task file, gateway URLs), and reads
the final answer. The steps come from the gateway's journal, not from the program:

| step | from |
|---|---|
| 0, `user`, `human` | the task's prompt |
| `tool` steps | tool-role messages a request carries that no earlier request carried (the result of a tool call an earlier reply made), attributed to the agent whose reply called the tool |
| one `agent` step per LLM call | the reply's content and tool calls; the agent comes from the call's URL, header or system prompt (`attribution.by`) |

So one LLM call is one agent step, interventions address the call that made the step, and exact replay,
divergence reports and sandbox limits work as for the built-in frameworks. Images: `requirements` or
`pyproject` are resolved once to a pinned closure of binary wheels (`pip download`, kept under the cache
as a lock file) and built offline like the built-in images; `image` gets the sandbox runner added on top.
"""

from __future__ import annotations

import hashlib
import platform
import shutil
import tempfile
import tomllib
from datetime import timezone
from pathlib import Path
from typing import Any, ClassVar, Mapping

from rootstep.adapters._system import SystemFileError, SystemSpec
from rootstep.adapters.base import Adapter, AdapterError, EpisodeTimedOut, _digest
from rootstep.model import LLMCall, Step, SystemRef, Task

DRIVER = "command_driver.py"


# ------------------------------------------------------------------------------------------- images


def _requirement_lines(spec: SystemSpec) -> list[str]:
    env = spec.environment
    if env.requirements:
        lines = (spec.folder / env.requirements).read_text(encoding="utf-8").splitlines()
        return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]
    if env.pyproject:
        file = spec.folder / env.pyproject
        try:
            deps = tomllib.loads(file.read_text(encoding="utf-8")).get("project", {}).get("dependencies", [])
        except tomllib.TOMLDecodeError as exc:
            raise SystemFileError(f"{spec.path}: field `environment.pyproject`: {file} is not valid TOML: {exc}") from None
        if not isinstance(deps, list):
            raise SystemFileError(f"{spec.path}: field `environment.pyproject`: {file} [project].dependencies is not a list")
        return [str(d) for d in deps]
    return []


def _lock_path(spec: SystemSpec, lines: list[str]) -> Path:
    from rootstep.sandboxes import BaseSpec, cache_dir

    key = hashlib.sha256("\n".join([*lines, BaseSpec().python_version, platform.machine()]).encode()).hexdigest()[:16]
    return cache_dir() / "systems" / f"{spec.name}-{key}.lock"


def locked_pins(spec: SystemSpec) -> tuple[str, ...] | None:
    """The pinned closure of the system's requirements when it was resolved before; None otherwise."""
    lines = _requirement_lines(spec)
    if not lines:
        return ()
    lock = _lock_path(spec, lines)
    return tuple(lock.read_text().split()) if lock.exists() else None


def resolve_pins(spec: SystemSpec, report: Any) -> tuple[str, ...]:
    """Resolve the requirements to every wheel they need (`pip download`, binary wheels for the image's
    Python), once: the closure is kept as a lock file keyed by the requirements' text."""
    from rootstep.sandboxes import binary_wheels_download
    from rootstep.sandboxes import BaseSpec, stream_command
    from rootstep.sandboxes import SandboxUnavailableError

    found = locked_pins(spec)
    if found is not None:
        return found
    lines = _requirement_lines(spec)
    field = "requirements" if spec.environment.requirements else "pyproject"
    version = BaseSpec().python_version
    report.step(f"resolving {len(lines)} requirement(s) of {spec.name} to pinned wheels (pip download, python {version})")
    with tempfile.TemporaryDirectory(prefix="rootstep-resolve-") as tmp:
        (Path(tmp) / "requirements.txt").write_text("\n".join(lines) + "\n")
        cmd = binary_wheels_download(version, Path(tmp) / "wheels", Path(tmp) / "requirements.txt")
        try:
            stream_command(cmd, report, f"resolving {spec.path} [environment] {field}")
        except SandboxUnavailableError as exc:
            raise SystemFileError(f"{spec.path}: field `environment.{field}`: the requirements do not resolve to "
                                  f"binary wheels for Python {version}: {exc}") from None
        pins = sorted({"==".join(w.name.split("-")[:2]) for w in (Path(tmp) / "wheels").glob("*.whl")})
    lock = _lock_path(spec, lines)
    lock.parent.mkdir(parents=True, exist_ok=True)
    part = lock.with_suffix(".part")
    part.write_text("\n".join(pins) + "\n")
    part.replace(lock)
    report.step(f"{spec.name}: {len(pins)} pinned wheels (lock {lock})")
    return tuple(pins)


def _runner_layer(base_image: str) -> str:
    from rootstep.sandboxes import RUNNER_PATH, SANDBOX_UID

    return "\n".join([
        f"FROM {base_image}",
        f"COPY runner.py {RUNNER_PATH}",
        f"USER {SANDBOX_UID}:{SANDBOX_UID}",
        "WORKDIR /work",
        f'CMD ["python3", "{RUNNER_PATH}"]',
    ]) + "\n"


def _user_image_id(spec: SystemSpec) -> str | None:
    from rootstep.sandboxes import SandboxUnavailableError

    try:
        import docker.errors

        from rootstep.sandboxes import docker_client

        return docker_client().images.get(spec.environment.image).id
    except SandboxUnavailableError:
        return None
    except docker.errors.ImageNotFound:
        return None


def image_tag(spec: SystemSpec) -> str:
    """The system's image tag: a hash of its inputs (pins, or the given image's id, and the runner)."""
    from rootstep.sandboxes import RUNNER_SOURCE

    if spec.environment.image:
        image_id = _user_image_id(spec) or f"missing:{spec.environment.image}"
        digest = hashlib.sha256("\0".join([image_id, _runner_layer(spec.environment.image),
                                           RUNNER_SOURCE.read_text()]).encode()).hexdigest()[:16]
        return f"rootstep-sys-{spec.name}:{digest}"
    pins = locked_pins(spec)
    if pins is None:  # not resolved yet: a tag no image has, so the image counts as not built
        return f"rootstep-sys-{spec.name}:unresolved-{_lock_path(spec, _requirement_lines(spec)).stem[-16:]}"
    return _pinned_spec(spec, pins).tag()


def _pinned_spec(spec: SystemSpec, pins: tuple[str, ...]) -> Any:
    """The image of a system with these pins (systems with no requirements share one: the sandbox base)."""
    from rootstep.sandboxes import ImageSpec

    return ImageSpec(name=f"sys-{spec.name}" if pins else "sys-stdlib", requirements=pins)


def build_system_image(spec: SystemSpec, client: Any, *, report: Any, force: bool = False) -> str:
    """Build the system's image unless its tag exists; return the tag. A SystemFileError names the field."""
    from rootstep.sandboxes import RUNNER_SOURCE, build_image, docker_build, image_exists
    from rootstep.sandboxes import SandboxUnavailableError

    if spec.environment.image:
        if _user_image_id(spec) is None:
            raise SystemFileError(f"{spec.path}: field `environment.image`: image {spec.environment.image!r} is not "
                                  "in the local Docker daemon (build or load it first)")
        tag = image_tag(spec)
        if not force and image_exists(client, tag):
            report.step(f"image {tag} is up to date")
            return tag
        with tempfile.TemporaryDirectory(prefix="rootstep-ctx-") as ctx_dir:
            ctx = Path(ctx_dir)
            (ctx / "Dockerfile").write_text(_runner_layer(spec.environment.image))
            shutil.copy(RUNNER_SOURCE, ctx / "runner.py")
            report.step(f"docker build {tag} ({spec.environment.image} + the sandbox runner)")
            try:
                docker_build(client, ctx, tag, f"sys-{spec.name}", report)
            except SandboxUnavailableError as exc:
                raise SystemFileError(f"{spec.path}: field `environment.image`: adding the sandbox runner to "
                                      f"{spec.environment.image!r} failed (it needs python3): {exc}") from None
        return tag
    pins = resolve_pins(spec, report)
    field = "requirements" if spec.environment.requirements else ("pyproject" if spec.environment.pyproject else None)
    try:
        return build_image(client, _pinned_spec(spec, pins), report=report, force=force)
    except SandboxUnavailableError as exc:
        where = f"field `environment.{field}`" if field else "the base image"
        raise SystemFileError(f"{spec.path}: {where}: the image does not build: {exc}") from None


# ------------------------------------------------------------------------------------------- steps


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def steps_from_calls(prompt: str, calls: list[LLMCall]) -> list[Step]:
    """The trajectory of a command system: the task, then per answered call its new tool results (tool
    steps) and its reply (an agent step linked to the call). Failed calls make no step."""
    steps: list[Step] = [Step(index=0, agent="user", kind="human", content=prompt, role="user")]
    seen_results: set[str] = set()
    caller: dict[str, str] = {}  # tool call id -> the agent whose reply made it
    for call in calls:
        if call.error is not None or not call.response.get("choices"):
            continue
        messages = [m for m in call.request.get("messages") or [] if isinstance(m, dict)]
        last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
        for message in messages[last_assistant + 1:]:
            if message.get("role") not in ("tool", "function"):
                continue
            content = _text(message.get("content"))
            key = str(message.get("tool_call_id") or "") + "\0" + content
            if key in seen_results:
                continue
            seen_results.add(key)
            tool_id = message.get("tool_call_id")
            steps.append(Step(
                index=len(steps), agent=caller.get(str(tool_id), call.agent), kind="tool", role="tool",
                content=content,
                metadata={"tool_call_id": tool_id, "name": message.get("name")},
            ))
        reply = call.response["choices"][0].get("message") or {}
        tool_calls = list(reply.get("tool_calls") or [])
        for tc in tool_calls:
            if isinstance(tc, dict) and tc.get("id"):
                caller[str(tc["id"])] = call.agent
        steps.append(Step(
            index=len(steps), agent=call.agent, kind="agent", role="assistant", content=_text(reply.get("content")),
            tool_calls=tool_calls, call_ids=[call.id], started_at=call.created_at.astimezone(timezone.utc),
            metadata={"purpose": call.purpose},
        ))
    return steps


def public_task(task: Task, instruction: str) -> dict[str, Any]:
    """What the program may see of a task: never the ground truth or hidden tests."""
    from rootstep.benchmarks import visible_tests

    return {
        "benchmark": task.benchmark, "task_id": task.task_id, "kind": task.kind, "prompt": task.prompt,
        "answer_instruction": instruction, "entry_point": task.metadata.get("entry_point"),
        "visible_tests": visible_tests(task) if task.kind == "coding" else [],
    }


# ------------------------------------------------------------------------------------------- adapter


class CommandAdapter(Adapter):
    """The adapter of one system file (`system_adapter` makes the subclass; `system` holds the spec)."""

    system: ClassVar[SystemSpec]
    driver = DRIVER
    origin: ClassVar[str] = "system file"

    def episode_config(self, task: Task) -> dict[str, Any]:
        spec = self.system
        return {
            "command": list(spec.command),
            "task_env": spec.task.env,
            "answer": {"source": spec.answer.source, "file": spec.answer.file},
            "agents": list(spec.agent_names),
            "program_task": public_task(task, self.answer_contract(task).instruction),
            "timeout_s": max(1.0, min(spec.timeout_s, self.timeout_s) - 5),
            "version": spec.version,
        }

    def gateway_rules(self) -> dict[str, Any]:
        spec = self.system
        return {
            "agents": spec.agent_names,
            "agent_header": spec.attribution.header if spec.attribution.by == "header" else None,
            "agent_prompts": [(a.system_prompt, a.name) for a in spec.agents if a.system_prompt]
            if spec.attribution.by == "system_prompt" else [],
            "attribution_source": str(spec.path),
        }

    def episode_files(self, task: Task) -> dict[str, str | bytes]:
        return {f"program/{rel}": data for rel, data in self.system.program_files().items()}

    def image_tag(self) -> str:
        return image_tag(self.system)

    @classmethod
    def build(cls, client: Any, *, report: Any, force: bool = False) -> str:
        return build_system_image(cls.system, client, report=report, force=force)

    def config_hash(self, task: Task) -> str:
        from rootstep.adapters.base import DRIVERS_DIR

        driver = (DRIVERS_DIR / DRIVER).read_text()
        return _digest([self.name, self.image_tag(), self.system.digest(), {**self.episode_config(task), **self.options},
                        hashlib.sha256(driver.encode()).hexdigest()])

    def _sandbox(self, server: Any, sandbox: Any) -> Any:
        if sandbox is None and self.sandbox is None and self.image_built() is False:
            from rootstep.sandboxes import docker_client
            from rootstep.sandboxes import QuietReporter

            self.build(docker_client(), report=QuietReporter())
        return super()._sandbox(server, sandbox)

    def episode_metadata(self, out: Mapping[str, Any]) -> dict[str, Any]:
        program = out.get("program") or {}
        return {"program": {"exit_code": program.get("exit_code"), "stderr_tail": str(program.get("stderr_tail") or "")[-1000:]}}

    def system_ref(self) -> SystemRef:
        return describe(self.system)

    def steps_from(self, task: Task, ctx: Any, out: Mapping[str, Any], calls: list[LLMCall],
                   stats: Any) -> tuple[list[Step], list[dict[str, Any]]]:
        spec = self.system
        program = out.get("program") or {}
        where = f"system {spec.name} ({spec.path}), run {ctx.run_id}"
        if stats.unattributed:
            raise AdapterError(f"{where}: {stats.unattributed} request(s) matched no agent: {stats.unattributed_reason}. "
                               f"Fix [attribution] / [[agents]] in {spec.path} (docs/your-system.md)")
        if stats.divergence:  # the program may have died of the refused request: the divergence is the cause
            raise AdapterError(f"{where}: the replay diverged from the recording: {stats.divergence[:3000]}")
        if out.get("error"):
            raise AdapterError(f"{where}: the driver failed: {out['error']}")
        if program.get("timed_out"):
            raise EpisodeTimedOut(f"{where}: the program did not finish within {spec.timeout_s:g} s (field `timeout_s`)"
                               f"; stderr ends:\n{program.get('stderr_tail', '')[-1500:]}")
        if program.get("exit_code") not in (0, None):
            raise AdapterError(f"{where}: the program (`command` = {list(spec.command)}) exited with code "
                               f"{program['exit_code']}; stderr ends:\n{program.get('stderr_tail', '')[-2000:]}")
        if not calls:
            raise AdapterError(f"{where}: the program never called the gateway: its agents must send their requests "
                               "to $OPENAI_BASE_URL or $ROOTSTEP_AGENT_URL_<AGENT> (docs/your-system.md)")
        if not out.get("final_answer"):
            how = (f"the answer file {spec.answer.file!r} (field `answer.file`) is missing or empty"
                   if spec.answer.source == "file" else "it printed nothing on stdout (field `answer.from` = \"stdout\")")
            raise AdapterError(f"{where}: the program gave no answer: {how}")
        steps = steps_from_calls(task.prompt, calls)
        unlinked = [{"id": c.id, "agent": c.agent, "purpose": c.purpose, "step_index": c.step_index, "mode": c.mode,
                     "error": c.error} for c in calls if c.error is not None]
        return steps, unlinked


def system_adapter(spec: SystemSpec) -> type[CommandAdapter]:
    """The adapter class of a system file."""
    return type(f"System_{spec.name.replace('-', '_')}", (CommandAdapter,), {
        "system": spec,
        "name": spec.name,
        "package": str(spec.path),
        "version": spec.version,
        "agents": ("user", *spec.agent_names),
        "answer_agents": tuple(a.name for a in spec.agents if a.answer),
        "step_kinds": {"user": ("human",), **{a: ("agent", "tool") for a in spec.agent_names}},
        "task_kinds": tuple(spec.task_kinds),
        "__module__": __name__,
        "__doc__": spec.description or f"The system of {spec.path}.",
    })


def describe(spec: SystemSpec) -> SystemRef:
    """The system as stored in a trajectory's recording (`Recording.system`), so a later process can rebuild it."""
    return SystemRef(file=str(spec.path), name=spec.name, digest=spec.digest())


__all__ = ["CommandAdapter", "build_system_image", "describe", "image_tag", "public_task", "resolve_pins",
           "steps_from_calls", "system_adapter"]
