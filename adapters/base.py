"""The `Adapter` contract every framework adapter implements, and the machinery they share.

An adapter runs one multi-agent framework on one task and returns a `Trajectory`:

    from rootstep.adapters import get_adapter
    adapter = get_adapter("ag2", gateway=server)                  # server: a started GatewayServer
    trajectory = adapter.run(task, "openai/gpt-4o-mini")          # recorded through the gateway
    again = adapter.replay(trajectory)                            # exact: zero live calls, same steps
    fixed = adapter.replay(trajectory, Intervention(run_id=..., step=3, new_content="..."))

How a run goes (`Adapter.run`):
1. the framework's pinned image (`image`, an `ImageSpec`: the sandbox base plus the framework's wheels)
   must exist (`rootstep frameworks build`);
2. the run is registered with the gateway (`RunContext`, record mode) under a fresh gateway run id;
3. one sandbox session (a container of that image, gateway-only network: `ROOTSTEP_GATEWAY_URL` inside)
   gets `episode.json` (task, run id, prompts and options), the shared `_episode.py` and the framework's
   driver, and runs the driver; the driver prints the framework's steps as one JSON line;
4. every LLM-produced step is linked to the gateway calls that produced it: the driver sends
   `X-Rootstep-Step: <index>` with every request, so the journal says which step each call made; calls
   whose step is not an agent step of that agent (planning, speaker selection, ...) are kept in
   `metadata["unlinked_calls"]` with their purpose;
5. the verifier (Task x final answer -> Verdict) decides success; a failure whose verdict may be the
   verifier's misreading of a right answer carries the reason in `verdict.details["suspect"]`
   (`rootstep.benchmarks._suspect`).

`Adapter.replay` re-runs the framework from the start against a replay run of the gateway: the recorded
calls serve the prefix, the intervention is forced at its step, later calls go live.

What a replay needs is the run's typed `Trajectory.recording` (gateway run id, the full Task, per-agent
models, image, framework version, system file); a replayed run also carries `Trajectory.replay` (the
recorded gateway run, the intervention, the gateway's counts and divergence, whether the steps before
the intervention equal the recording's). What the data model has no field for is kept in
`Trajectory.metadata`: `gateway_stats`, `llm_calls`, `unlinked_calls`, `episode`, `error`, `traceback`.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from abc import ABC
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence, cast

from pydantic import TypeAdapter, ValidationError

from rootstep.benchmarks import executed_calls_answer, mark_suspect, reads_calls
from rootstep.model import (
    Intervention,
    LLMCall,
    Recording,
    ReplayProvenance,
    RootstepError,
    Step,
    StepKind,
    SystemRef,
    Task,
    TaskKind,
    Trajectory,
    Verdict,
)

from ._drivers._episode import MARKER, DriverOutput, DriverStep
from ._tool_tasks import tool_files, tool_files_digest

if TYPE_CHECKING:
    from rootstep.gateway import GatewayServer
    from rootstep.benchmarks import AnswerContract
    from rootstep.sandboxes import ImageSpec, Sandbox

DRIVERS_DIR = Path(__file__).resolve().parent / "_drivers"
_DRIVER_OUTPUT = TypeAdapter(DriverOutput)

Verifier = Callable[[Task, "str | None"], Verdict]
"""Omega: (task, final answer) -> Verdict."""


MODEL_CAUSED = frozenset({"context_window_exceeded", "bad_request"})
"""Provider error kinds the agents' own requests cause (a transcript grown past the context, a malformed
request): part of the run. Any other kind (timeout, rate limit, connection, service unavailable, key) is the
infrastructure failing."""


def provider_failures(calls: Sequence[LLMCall]) -> list[str]:
    """The errors of calls that failed at the provider for reasons of the infrastructure (not `MODEL_CAUSED`)
    and were not answered on a retry of the same request: the framework saw them (smolagents writes "Error in
    generating final LLM output: Connection error." as its final answer), so the run says nothing about the
    agents. The gateway's own retries of a transient error leave no error row."""
    answered = {c.request_hash for c in calls if c.error is None}
    out = []
    for call in calls:
        kind = str((call.response.get("error") or {}).get("type") or "") if isinstance(call.response, dict) else ""
        if call.error is not None and kind not in MODEL_CAUSED and call.request_hash not in answered:
            out.append(f"{kind or 'error'}: {call.error}")
    return out


class AdapterError(RootstepError):
    """The framework episode could not be run or its output not read (infrastructure, not a verdict)."""


class EpisodeTimedOut(AdapterError):
    """The episode ran out of its time limit before printing a trajectory. Unlike a container that died, a team
    that looped to the limit mostly loops again: the flows retry it once, not twice (`infrastructure_error`)."""


def _tool_use_adapters() -> list[str]:
    from rootstep.adapters import ADAPTERS

    return sorted(name for name in ADAPTERS.names() if getattr(ADAPTERS.get(name), "tool_use", False))


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def default_verifier(sandbox: "Sandbox | None" = None) -> Verifier:
    """`rootstep.benchmarks.verify` with a sandbox for code verifiers (made on first use, no network)."""
    holder: dict[str, Any] = {"sandbox": sandbox}

    def verify(task: Task, answer: str | None) -> Verdict:
        from rootstep.benchmarks import verify as benchmark_verify
        from rootstep.benchmarks import verifier_info

        if verifier_info(task.verifier).needs_sandbox and holder["sandbox"] is None:
            from rootstep.sandboxes import get_sandbox

            holder["sandbox"] = get_sandbox()
        return benchmark_verify(task, answer, sandbox=holder["sandbox"])

    return verify


def with_reads(trajectory: Trajectory, reads: dict[int, list[int]]) -> Trajectory:
    """`trajectory` with each agent step's inputs (`reads`: step -> the earlier steps its agent was shown)
    in `Step.metadata["reads"]`; the same trajectory when `reads` is empty (a shared chat)."""
    if not reads:
        return trajectory
    steps = [s.model_copy(update={"metadata": {**s.metadata, "reads": reads[s.index]}}) if s.index in reads else s
             for s in trajectory.steps]
    return trajectory.model_copy(update={"steps": steps})


class Adapter(ABC):
    """Runs one framework inside its sandbox image, through the gateway, and replays it.

    Subclasses set the class attributes and `episode_config`; the rest is shared. Per-call arguments
    (`gateway`, `sandbox`, `verifier`) override the ones given to the constructor.

    Args:
        gateway: a started `GatewayServer`; the adapter registers its runs with `gateway.gateway`.
        sandbox: a sandbox whose `session()` runs the episode. Default: a `DockerSandbox` of `image`
            with the gateway-only network to the gateway's port and `limits` (made per run, then closed).
        verifier: Omega (Task x final answer -> Verdict). Default: `rootstep.benchmarks.verify`.
        timeout_s: wall clock of one episode inside the sandbox.
        memory_mb, cpus: the episode container's limits.
        options: framework options merged into the episode config (for example `max_round`).
    """

    name: ClassVar[str]
    """Registry name, also `Trajectory.framework`."""
    package: ClassVar[str]
    """The PyPI distribution of the framework."""
    version: ClassVar[str]
    """The pinned version in `image`."""
    agents: ClassVar[tuple[str, ...]]
    """The agents' names as they appear in `Step.agent` (and in the gateway's URLs)."""
    step_kinds: ClassVar[dict[str, tuple[StepKind, ...]]]
    """Agent -> the step kinds it produces (only `agent` steps are LLM-produced)."""
    task_kinds: ClassVar[tuple[TaskKind, ...]]
    driver: ClassVar[str]
    """The file in `_drivers/` that runs an episode inside the container."""
    answer_agents: ClassVar[tuple[str, ...]] = ()
    """The agents whose last step gives the final answer (AG2's coder, AFlow's sc_ensemble / test):
    fault injection ends its injection points there. Empty: the last step whose content holds it."""
    independent_agents: ClassVar[tuple[str, ...]] = ()
    """Agents whose steps are independent candidates of an ensemble (sampled without seeing each other,
    then voted on): fault injection does not corrupt a candidate whose answer the majority repeats."""
    image: ClassVar["ImageSpec"]
    tool_use: ClassVar[bool] = False
    """Whether the driver has a tool-use team for tasks whose tools run in the sandbox (BFCL multi-turn: the
    offered functions, `tool_files`), and `episode_config` sets `tools` for them."""

    @classmethod
    def reads(cls, trajectory: Trajectory) -> dict[int, list[int]]:
        """Who reads whom: agent step -> the earlier steps its agent was shown, for frameworks whose agents
        do not all share one chat (AgentPrune's sampled graph). Empty (the default): every step saw every
        earlier one. `with_reads` puts it in `Step.metadata["reads"]`, which the analyzer's and perturber's
        prompts show beside each step."""
        return {}

    def __init__(
        self,
        gateway: "GatewayServer | None" = None,
        sandbox: "Sandbox | None" = None,
        verifier: Verifier | None = None,
        *,
        timeout_s: float = 600.0,
        memory_mb: int = 1536,
        cpus: float = 1.0,
        **options: Any,
    ):
        self.gateway = gateway
        self.sandbox = sandbox
        self.verifier = verifier
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.cpus = cpus
        self.options = options

    # ------------------------------------------------------------------ what subclasses provide

    def episode_config(self, task: Task) -> dict[str, Any]:
        """Framework options and prompts passed to the driver (inside `episode.json`)."""
        raise NotImplementedError

    def answer_contract(self, task: Task) -> "AnswerContract":
        """The answer format this framework's prompts ask for on `task` (they render its `instruction`),
        which the task's verifier reads (`rootstep.benchmarks._answer`)."""
        from rootstep.benchmarks import answer_contract

        return answer_contract(task)

    def final_answer(self, task: Task, steps: list[Step], driver_answer: str | None) -> str | None:
        """The answer Omega judges; by default what the driver reported, with the output of the program
        the framework ran appended when a math or QA answer is code that states no answer of its own
        (`program_answer`: never a number lifted from the code's text)."""
        from rootstep.benchmarks import program_answer

        return program_answer(task, driver_answer, steps)

    def gateway_rules(self) -> dict[str, Any]:
        """`RunContext` fields that tell the gateway how to attribute this framework's calls to agents
        (`agents`, `agent_header`, `agent_prompts`); the built-in drivers put the agent in the URL."""
        return {}

    def episode_files(self, task: Task) -> dict[str, str | bytes]:
        """Files the episode needs besides `episode.json`, `_episode.py` and the driver."""
        return {}

    def episode_metadata(self, out: Mapping[str, Any]) -> dict[str, Any]:
        """What this framework adds to `Trajectory.metadata` from the driver's output."""
        return {}

    def system_ref(self) -> SystemRef | None:
        """The system file this adapter runs (`Recording.system`); None for a built-in framework."""
        return None

    def steps_from(self, task: Task, ctx: Any, out: Mapping[str, Any], calls: list[LLMCall],
                   stats: Any) -> tuple[list[Step], list[dict[str, Any]]]:
        """The trajectory's steps from the driver's output and the run's journaled calls (`link_steps`)."""
        return link_steps(out.get("steps", []), calls)

    # ------------------------------------------------------------------ the contract

    def run(
        self,
        task: Task,
        model: str,
        sandbox: "Sandbox | None" = None,
        gateway: "GatewayServer | None" = None,
        *,
        agent_models: dict[str, str] | None = None,
        verifier: Verifier | None = None,
        run_id: str | None = None,
        **context: Any,
    ) -> Trajectory:
        """Run the framework on `task` with `model` (a litellm model string, or per agent
        `agent_models`), record every LLM call through the gateway, verify, return the trajectory.

        `context` goes to the gateway's `RunContext` (`api_key`, `api_base`, `litellm_kwargs`, `cache`).
        """
        from rootstep.gateway import RunContext

        self._check_task(task)
        server = self._server(gateway)
        run_id = run_id or self._new_run_id(task)
        ctx = RunContext(run_id=run_id, framework=self.name, benchmark=task.benchmark, model=model,
                         agent_models=dict(agent_models or {}), **self.gateway_rules(), **context)
        return self._episode(task, ctx, server, sandbox, verifier, parent=None)

    def replay(
        self,
        trajectory: Trajectory,
        intervention: Intervention | None = None,
        *,
        model: str | None = None,
        sandbox: "Sandbox | None" = None,
        gateway: "GatewayServer | None" = None,
        verifier: Verifier | None = None,
        run_id: str | None = None,
        until_turn: int | None = None,
        **context: Any,
    ) -> Trajectory:
        """Re-run `trajectory`'s task from the start, the gateway serving its recorded calls.

        Without an intervention the replay must reproduce the recording with zero live calls. With one,
        the step `intervention.step` (an `agent` step) is forced to `new_content`, earlier steps are
        served from the recording, and calls after it go live to `model` (default: the recorded one).
        `intervention.run_id` may be the trajectory's id or its gateway run id. `until_turn` (a multi-turn
        task): the episode stops after that user turn (0-based); a replay that passed every turn up to it
        fails at the next with `verdict_details.stopped_after_turn`.
        """
        from rootstep.gateway import RunContext

        recording = trajectory.recorded()
        if trajectory.framework != self.name:
            raise AdapterError(f"a {trajectory.framework} trajectory cannot be replayed by the {self.name} adapter")
        task = recording.task
        recorded_run = recording.gateway_run_id
        if intervention is not None:
            if not 0 <= intervention.step < len(trajectory.steps):
                raise ValueError(f"intervention.step {intervention.step} is outside the trajectory (0..{len(trajectory.steps) - 1})")
            target = trajectory.steps[intervention.step]
            if target.kind != "agent" or not target.call_ids:
                raise ValueError(f"step {intervention.step} is a {target.kind} step of {target.agent} with no LLM call: "
                                 "only LLM-produced agent steps can be intervened on")
            also = []
            for extra in intervention.also:
                if not intervention.step < extra.step < len(trajectory.steps):
                    raise ValueError(f"a joint fix's step {extra.step} must be after step {intervention.step} and "
                                     f"inside the trajectory (0..{len(trajectory.steps) - 1})")
                other = trajectory.steps[extra.step]
                if other.kind != "agent" or not other.call_ids:
                    raise ValueError(f"joint fix step {extra.step} is a {other.kind} step of {other.agent} with no LLM "
                                     "call: only LLM-produced agent steps can be intervened on")
                also.append(extra.model_copy(update={"run_id": recorded_run, "agent": extra.agent or other.agent}))
            intervention = intervention.model_copy(update={"run_id": recorded_run, "also": also,
                                                           "agent": intervention.agent or target.agent})
        server = self._server(gateway)
        suffix = "x" if intervention is None else f"s{intervention.step}-{_digest(intervention.model_dump())[:6]}"
        ctx = RunContext(
            run_id=run_id or f"{recorded_run[:120]}-rpl-{suffix}-{uuid.uuid4().hex[:8]}",
            framework=self.name, benchmark=task.benchmark, mode="replay", replay_of=recorded_run,
            model=model or trajectory.model or "", agent_models=dict(recording.agent_models),
            intervention=intervention,
            step_calls={s.index: list(s.call_ids) for s in trajectory.steps if s.call_ids},
            **self.gateway_rules(), **context,
        )
        result = self._episode(task, ctx, server, sandbox, verifier, parent=trajectory, until_turn=until_turn)
        stats = result.metadata.get("gateway_stats", {})
        cut = len(trajectory.steps) if intervention is None else intervention.step
        prefix_ok = (
            len(result.steps) >= cut
            and all(a.replay_key() == b.replay_key() for a, b in zip(trajectory.steps[:cut], result.steps[:cut]))
        )
        result.replay = ReplayProvenance(
            of_gateway_run_id=recorded_run, intervention=intervention, live_calls=stats.get("live", 0),
            replayed_calls=stats.get("replayed", 0), forced_calls=stats.get("forced", 0),
            divergence=stats.get("divergence"), prefix_identical=prefix_ok,
            identical=intervention is None and prefix_ok and len(result.steps) == len(trajectory.steps),
        )
        return result

    # ------------------------------------------------------------------ shared machinery

    def image_tag(self) -> str:
        return self.image.tag()

    @classmethod
    def build(cls, client: Any, *, report: Any, force: bool = False) -> str:
        """Build the framework's image unless its tag exists (`rootstep frameworks build`); return the tag."""
        from rootstep.sandboxes import build_image

        return build_image(client, cls.image, report=report, force=force)

    def image_built(self) -> bool | None:
        """True/False whether the image exists; None when no Docker daemon is reachable."""
        from rootstep.sandboxes import image_exists
        from rootstep.sandboxes import SandboxUnavailableError

        try:
            from rootstep.sandboxes import docker_client

            return image_exists(docker_client(), self.image_tag())
        except SandboxUnavailableError:
            return None

    def config_hash(self, task: Task) -> str:
        driver = (DRIVERS_DIR / self.driver).read_text() + (DRIVERS_DIR / "_episode.py").read_text()
        config = {**self.episode_config(task), **self.options}
        parts: list[Any] = [self.name, self.image_tag(), config, hashlib.sha256(driver.encode()).hexdigest()]
        tools = tool_files_digest(task)
        return _digest(parts if tools is None else [*parts, tools])

    @classmethod
    def cannot_run(cls, task: Task) -> str | None:
        """Why this framework cannot run `task` (a kind it has no team for, or tools it has no team for), or None."""
        if reads_calls(task):
            if not cls.tool_use:
                return (f"the {cls.name} adapter has no tool-use team for {task.benchmark} tasks (adapters with one: "
                        f"{', '.join(_tool_use_adapters())})")
            return None
        if task.kind not in cls.task_kinds:
            return f"the {cls.name} adapter runs {', '.join(cls.task_kinds)} tasks, not {task.kind!r}"
        return None

    def _check_task(self, task: Task) -> None:
        problem = self.cannot_run(task)
        if problem is not None:
            raise ValueError(problem)

    def _server(self, gateway: "GatewayServer | None") -> "GatewayServer":
        server = gateway or self.gateway
        if server is None:
            raise AdapterError("no gateway: pass a started GatewayServer (adapter(gateway=...) or run(..., gateway=...))")
        return server

    def _new_run_id(self, task: Task) -> str:
        safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in f"{task.benchmark}-{task.task_id}")[:80]
        return f"{self.name}-{safe}-{uuid.uuid4().hex[:12]}"

    def _sandbox(self, server: "GatewayServer", sandbox: "Sandbox | None") -> tuple["Sandbox", bool]:
        """The sandbox to run the episode in, and whether this call made it (and must close it)."""
        given = sandbox or self.sandbox
        if given is not None:
            return given, False
        from rootstep.sandboxes import SandboxLimits, SandboxNetwork
        from rootstep.sandboxes import DockerSandbox

        limits = SandboxLimits(
            network=SandboxNetwork.gateway_only(server.port), timeout_s=self.timeout_s,
            memory_mb=self.memory_mb, cpus=self.cpus, pids=512, work_mb=256, tmp_mb=128,
        )
        try:
            return DockerSandbox(self.image_tag(), limits, pool=0), True
        except Exception as exc:
            if "is not built" in str(exc):
                raise AdapterError(f"{exc} (framework images: `rootstep frameworks build`)") from exc
            raise

    def _episode(self, task: Task, ctx: Any, server: "GatewayServer", sandbox: "Sandbox | None",
                 verifier: Verifier | None, parent: Trajectory | None, until_turn: int | None = None) -> Trajectory:
        gateway = server.gateway
        gateway.register(ctx)
        config = {**self.episode_config(task), **self.options}
        episode = {
            "run_id": ctx.run_id,
            "gateway_url": server.url,
            "task": task.model_dump(mode="json"),
            "config": config,
            "time_limit_s": self.timeout_s,
            "until_turn": until_turn,
        }
        files: dict[str, str | bytes] = {
            "episode.json": json.dumps(episode),
            "_episode.py": (DRIVERS_DIR / "_episode.py").read_text(),
            self.driver: (DRIVERS_DIR / self.driver).read_text(),
            **self.episode_files(task),
            **tool_files(task),
        }
        started = datetime.now(timezone.utc)
        clock = time.monotonic()
        box, owned = self._sandbox(server, sandbox)
        try:
            with box.session() as session:
                result = session.run(["python3", self.driver], files=files, timeout=self.timeout_s)
        except AdapterError:
            raise
        except Exception as exc:
            # the framework's own errors come back in the driver's output: anything raised here is the
            # container or the Docker daemon failing (infrastructure, so the flows retry it)
            raise AdapterError(f"{self.name} episode {ctx.run_id}: the sandbox failed: {type(exc).__name__}: {exc}") from exc
        finally:
            close = getattr(box, "close", None) if owned else None  # a sandbox this call made (DockerSandbox)
            if close is not None:
                close()
            stats = gateway.unregister(ctx.run_id)
        duration = time.monotonic() - clock
        out = _parse_output(result.stdout)
        if out is None:
            why = "timed out" if result.timed_out else ("ran out of memory" if result.oom_killed else f"exit {result.exit_code}")
            error = EpisodeTimedOut if result.timed_out else AdapterError
            raise error(f"{self.name} episode {ctx.run_id} {why} without a trajectory; stderr:\n{result.stderr[-3000:]}"
                        f"\nstdout:\n{result.stdout[-1500:]}")
        calls = gateway.calls(ctx.run_id)
        failed = provider_failures(calls)
        if failed:
            raise AdapterError(
                f"{self.name} episode {ctx.run_id}: {len(failed)} LLM call(s) failed at the provider and reached the "
                f"framework (first: {failed[0][:300]}); the run is not a verdict on the agents")
        steps, unlinked = self.steps_from(task, ctx, out, calls, stats)
        # a tool-use task's Omega reads the calls the run's tools executed, not an answer text
        answer = executed_calls_answer(steps) if reads_calls(task) else self.final_answer(task, steps, out.get("final_answer"))
        verify = verifier or self.verifier or default_verifier()
        if out.get("time_limit_s") is not None:  # cut by its time limit: kept, with the steps it made, as a failure
            details: dict[str, Any] = {"failure": "time limit", "time_limit_s": out["time_limit_s"]}
            if reads_calls(task):  # the turns it reached are judged: it failed at the first wrong one, or where it stopped
                reached = verify(task, answer)
                if not reached.success and isinstance(reached.details.get("turn"), int):
                    details.update(turn=reached.details["turn"], check=reached.details.get("check"))
            verdict = Verdict(success=False, details=details)
        else:
            verdict = mark_suspect(task, answer, steps, verify(task, answer), verify)
            if until_turn is not None and verdict.details.get("check") == "turns" and verdict.details.get("turn") == until_turn + 1:
                verdict = verdict.model_copy(update={"details": {**verdict.details, "stopped_after_turn": until_turn}})
        recording = Recording(
            gateway_run_id=ctx.run_id, task=task, agent_models=dict(ctx.agent_models), image=self.image_tag(),
            framework_version=out.get("framework_version", self.version), system=self.system_ref(),
        )
        metadata: dict[str, Any] = {
            "gateway_stats": stats.as_dict(),
            "llm_calls": len(calls),
            "unlinked_calls": unlinked,
            "episode": {"exit_code": result.exit_code, "timed_out": result.timed_out,
                        "seconds": round(result.duration_s, 3)},
            **self.episode_metadata(out),
        }
        if out.get("error"):
            metadata["error"] = out["error"]
            metadata["traceback"] = out.get("traceback")
        return Trajectory(
            framework=self.name,
            benchmark=task.benchmark,
            task_id=task.task_id,
            question=task.prompt,
            ground_truth=task.ground_truth,
            steps=steps,
            final_answer=answer,
            verdict=verdict,
            model=ctx.model,
            config_hash=self.config_hash(task),
            source="rootstep",
            parent_run_id=None if parent is None else parent.id,
            started_at=started,
            duration_s=round(duration, 3),
            prompt_tokens=sum(c.prompt_tokens for c in calls),
            completion_tokens=sum(c.completion_tokens for c in calls),
            cost_usd=sum(c.cost_usd for c in calls),
            recording=recording,
            metadata=metadata,
        )


def _parse_output(stdout: str) -> DriverOutput | None:
    """The driver's `DriverOutput` (its last `MARKER` line); None when it printed none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                return _DRIVER_OUTPUT.validate_json(line[len(MARKER):])
            except ValidationError as exc:
                if any(e["type"] == "json_invalid" for e in exc.errors()):
                    raise AdapterError(f"the driver's trajectory line is not JSON: {exc}") from exc
                raise AdapterError("the driver's trajectory line breaks the driver-output contract "
                                   f"(DriverOutput in adapters/_drivers/_episode.py): {exc}") from exc
    return None


def link_steps(raw_steps: list[DriverStep], calls: list[LLMCall]) -> tuple[list[Step], list[dict[str, Any]]]:
    """Steps from the driver's output, each `agent` step linked to the calls that produced it.

    A call belongs to step i when it carries `step_index == i` (the driver's `X-Rootstep-Step` header)
    and was made by that step's agent. Agent steps left with no call (a driver that could not say which
    step a call made) take the agent's unlinked `step` calls in order. Calls left over (speaker
    selection, planning, parse retries, a call that failed or whose answer produced no step) are returned
    as `{id, agent, purpose, step_index, mode, error}`.
    """
    steps: list[Step] = []
    position_of: dict[int, int] = {}  # the driver's step index (what calls carry) -> position here
    for index, raw in enumerate(raw_steps):
        position_of[int(raw.get("index", index))] = index
        started = raw.get("started_at")
        steps.append(Step(
            index=index,
            agent=str(raw.get("agent") or "unknown"),
            kind=cast(StepKind, raw.get("kind", "agent")),  # checked by Step
            content=str(raw.get("content") or ""),
            role=raw.get("role"),
            tool_calls=list(raw.get("tool_calls") or []),
            observation=raw.get("observation"),
            started_at=None if started is None else datetime.fromtimestamp(float(started), timezone.utc),
            metadata=dict(raw.get("metadata") or {}),
        ))
    taken: set[str] = set()
    by_step: dict[int, list[LLMCall]] = {}
    for call in calls:
        if call.step_index is not None and call.step_index in position_of:
            by_step.setdefault(position_of[call.step_index], []).append(call)
    for step in steps:
        if step.kind != "agent":
            continue
        mine = [c for c in by_step.get(step.index, []) if c.agent == step.agent]
        step.call_ids = [c.id for c in mine]
        taken.update(step.call_ids)
    for step in steps:
        if step.kind == "agent" and not step.call_ids:
            spare = next((c for c in calls if c.id not in taken and c.agent == step.agent
                          and c.purpose == "step" and c.step_index is None), None)
            if spare is not None:
                step.call_ids = [spare.id]
                taken.add(spare.id)
    unlinked = [
        {"id": c.id, "agent": c.agent, "purpose": c.purpose, "step_index": c.step_index, "mode": c.mode,
         "error": c.error}
        for c in calls if c.id not in taken
    ]
    return steps, unlinked
