"""Shared by every in-container driver (copied into the sandbox next to it; standard library + openai).

The driver reads `episode.json`, runs the framework, and prints one line `MARKER` + JSON on stdout
(`emit`): a `DriverOutput`, the contract between the drivers and the host-side adapter, which imports
`MARKER` and `DriverOutput` from this file (`rootstep.adapters._drivers._episode`) and validates the line
against it. Inside the container only the standard library is used here. Every chat-completion
request made through the `openai` package carries `X-Rootstep-Step` (the index of the step the call is
producing, as the driver's `current_step` callable says) and `X-Rootstep-Purpose`, so the gateway's
journal links each call to its step and an intervention can be addressed by step.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
import traceback
from typing import Any, Callable

try:  # the host validates the contract with pydantic, which needs this TypedDict on Python < 3.12
    from typing_extensions import TypedDict
except ImportError:  # a framework image without typing_extensions: the contract is only written here
    from typing import TypedDict

MARKER = "<<<ROOTSTEP_TRAJECTORY>>>"
"""Starts the one stdout line that holds the episode's `DriverOutput` (the last such line counts)."""


class DriverStep(TypedDict, total=False):
    """One step as a driver reports it; the host links its LLM calls and makes a `Step` of it."""

    index: int
    """The driver's own step index (what the calls' `X-Rootstep-Step` header says); default: its position."""
    agent: str | None
    kind: str
    """`agent`, `tool`, `environment` or `human` (default `agent`)."""
    role: str | None
    content: str | None
    tool_calls: list[dict[str, Any]]
    observation: str | None
    started_at: float | None
    """Unix seconds."""
    metadata: dict[str, Any]


class DriverOutput(TypedDict, total=False):
    """What a driver prints after `MARKER`: its steps and answer, or the error that ended it (with the
    steps collected until then)."""

    steps: list[DriverStep]
    final_answer: str | None
    framework_version: str | None
    """The framework's version inside the image (default: the adapter's pinned `version`)."""
    program: dict[str, Any]
    """System-file runs (`command_driver.py`): the program's exit code, timeout and output tails."""
    error: str
    traceback: str
    time_limit_s: float
    """Set when the episode's time limit cut it: the steps are those made until then (`snapshot`)."""


# a key the contract does not name is refused by the host's check (pydantic reads this plain dict)
DriverStep.__pydantic_config__ = DriverOutput.__pydantic_config__ = {"extra": "forbid"}  # type: ignore[attr-defined]

current_step: Callable[[], int | None] = lambda: None
current_purpose: Callable[[], str] = lambda: "step"
snapshot: Callable[[], dict[str, Any]] | None = None
"""Set by a driver that can say what it has so far: its steps and answer (as `run` returns them), read from another
thread when the episode's time limit comes (`main`); the episode is then kept, cut, instead of lost."""
_emitted = threading.Event()
_emit_lock = threading.Lock()


def load_episode(path: str = "episode.json") -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def agent_base_url(episode: dict[str, Any], agent: str) -> str:
    gateway = os.environ.get("ROOTSTEP_GATEWAY_URL") or episode["gateway_url"]
    return f"{gateway.rstrip('/')}/run/{episode['run_id']}/agent/{agent}/v1"


def _headers() -> dict[str, str]:
    headers = {"X-Rootstep-Purpose": current_purpose()}
    step = current_step()
    if step is not None:
        headers["X-Rootstep-Step"] = str(step)
    return headers


def install_openai_headers() -> None:
    """Wrap `Completions.create` (sync and async) so every request says which step it produces."""
    from openai.resources.chat import completions as module

    for cls_name in ("Completions", "AsyncCompletions"):
        cls = getattr(module, cls_name)
        original = cls.create
        if getattr(original, "_rootstep", False):
            continue

        def create(self, *args, __original=original, **kwargs):
            kwargs["extra_headers"] = {**(kwargs.get("extra_headers") or {}), **_headers()}
            return __original(self, *args, **kwargs)

        create._rootstep = True  # type: ignore[attr-defined]
        setattr(cls, "create", create)


def ensure_python_on_path() -> None:
    """Frameworks run code with `python`; the sandbox image has only `python3`: link one into PATH."""
    import shutil

    if shutil.which("python"):
        return
    bin_dir = os.path.join(os.getcwd(), ".rootstep-bin")
    os.makedirs(bin_dir, exist_ok=True)
    link = os.path.join(bin_dir, "python")
    if not os.path.exists(link):
        os.symlink(sys.executable, link)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


# ---------------------------------------------------------------------------------------------------
# For the drivers that implement a method themselves (AFlow, AgentPrune): prompts, code, one step per call
# ---------------------------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PY_LANGS = {"", "python", "py", "python3", "py3"}


def fill(template: str, what: str, **values: Any) -> str:
    """`template` with every `${name}` replaced, in one pass (filled-in text is never re-read); a
    placeholder with no value is a KeyError naming the prompt `what`."""

    def sub(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"prompt {what!r} has a placeholder ${{{name}}} the driver does not fill "
                           f"(it fills: {', '.join(sorted(values))})")
        return str(values[name])

    return _PLACEHOLDER.sub(sub, template)


def defines(code: str, name: str | None) -> bool:
    """Whether `code` defines the function or class `name` at top level."""
    return bool(name) and re.search(rf"^(?:async\s+)?def\s+{re.escape(name)}\s*\(|^class\s+{re.escape(name)}\b",
                                    code, re.M) is not None


def extract_code(text: str, entry_point: str | None = None) -> str | None:
    """The program in an answer: the last non-empty Python block defining `entry_point`, else the
    longest one; None when the answer has none."""
    blocks = [code for lang, code in ((m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text))
              if lang in _PY_LANGS and code.strip()]
    if not blocks:
        return None
    defining = [code for code in blocks if defines(code, entry_point)]
    return (defining[-1] if defining else max(blocks, key=len)).rstrip() + "\n"


class StepRecorder:
    """An episode's step list and its per-agent OpenAI clients (each agent at its own gateway route).
    The module's `current_step` follows the list, so every call says which step it produces."""

    def __init__(self, episode: dict[str, Any]):
        global current_step
        self.episode = episode
        self.cfg: dict[str, Any] = episode["config"]
        self.steps: list[dict[str, Any]] = []
        self._clients: dict[str, Any] = {}
        current_step = lambda: len(self.steps)  # noqa: E731

    def add(self, agent: str, kind: str, role: str, content: str, started: float, **extra: Any) -> dict[str, Any]:
        """Append a step (`extra`: tool_calls, metadata, ...)."""
        step = {"index": len(self.steps), "agent": agent, "kind": kind, "role": role, "content": content,
                "started_at": started, **extra}
        step.setdefault("metadata", {})
        self.steps.append(step)
        return step

    def add_step(self, step: dict[str, Any], started: float) -> dict[str, Any]:
        """Append a step built elsewhere (a tool step: `_bfcl_tools.tool_step`) at the next index."""
        step = {"index": len(self.steps), "started_at": started, **step}
        step.setdefault("metadata", {})
        self.steps.append(step)
        return step

    def client(self, agent: str) -> Any:
        """`agent`'s OpenAI client, at its own gateway route (made once)."""
        from openai import OpenAI

        if agent not in self._clients:
            self._clients[agent] = OpenAI(
                base_url=agent_base_url(self.episode, agent),
                api_key="unused-the-gateway-holds-the-key",
                max_retries=0,  # the gateway retries the provider; a client retry would be a second call
                timeout=float(self.cfg.get("llm_timeout_s", 600)),
            )
        return self._clients[agent]

    def request(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """A chat-completion request's arguments: the messages, with temperature and max_tokens from the config."""
        kwargs: dict[str, Any] = {"model": self.cfg.get("model_alias", "rootstep"), "messages": messages,
                                  "temperature": self.cfg.get("temperature", 0)}
        if self.cfg.get("max_tokens"):
            kwargs["max_tokens"] = int(self.cfg["max_tokens"])
        return kwargs

    def chat(self, agent: str, messages: list[dict[str, str]], role: str,
             metadata: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """One LLM call of `agent` (temperature, max_tokens and timeout from the config) -> one `agent`
        step whose content is the answer; (the answer, the step)."""
        started = time.time()
        response = self.client(agent).chat.completions.create(**self.request(messages))
        text = response.choices[0].message.content or ""
        return text, self.add(agent, "agent", role, text, started, metadata=metadata)


def emit(result: DriverOutput) -> None:
    """Print the episode's output line, once (the time limit's and the episode's own end may race)."""
    with _emit_lock:
        if _emitted.is_set():
            return
        sys.stdout.flush()
        sys.stdout.write("\n" + MARKER + json.dumps(result, default=str) + "\n")
        sys.stdout.flush()
        _emitted.set()


def kept_steps(work: Callable[[], Any], collected: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run the framework (`work`) with `collected` (its steps and answer so far) as the `snapshot` the time limit
    reads; return what it collected, or raise the framework's error with it attached (`main` reports both)."""
    global snapshot
    snapshot = collected
    try:
        work()
    except Exception as exc:  # noqa: BLE001 - the steps so far are still the trajectory
        exc.rootstep_partial = collected()  # type: ignore[attr-defined]
        raise
    return collected()


def time_limit_margin(limit_s: float) -> float:
    """How long before the sandbox's limit the episode stops itself to report its steps: 5% of it, at least 10 s
    (the container's start and the driver's imports count in the sandbox's clock)."""
    return max(10.0, 0.05 * limit_s)


def _watch_time_limit(limit_s: float) -> None:
    """At the time limit (less its margin), emit what `snapshot` has, marked cut, and end the process; without a
    snapshot, or with no step yet, the sandbox's limit ends the episode as before (no trajectory)."""

    def cut() -> None:
        try:
            partial = snapshot() if snapshot is not None else {}
        except Exception:  # noqa: BLE001 - the framework's state may be mid-update; nothing to keep then
            partial = {}
        if not partial.get("steps"):
            return
        emit({**partial, "error": f"time limit: the episode was cut after {limit_s:g} s", "time_limit_s": limit_s})
        os._exit(0)

    timer = threading.Timer(max(1.0, limit_s - time_limit_margin(limit_s)), cut)
    timer.daemon = True
    timer.start()


def main(run: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Run `run(episode)`; emit its result, or the error (with the steps collected so far) when it raises."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        # set iteration order (and so prompt text built from sets) must not change between runs
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    episode = load_episode()
    ensure_python_on_path()
    install_openai_headers()
    if episode.get("time_limit_s"):
        _watch_time_limit(float(episode["time_limit_s"]))
    try:
        result = run(episode)
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the host
        partial = getattr(exc, "rootstep_partial", None) or {}
        emit({**partial, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]})
        sys.exit(1)
    emit(result)
