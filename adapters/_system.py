"""A system file: how to run your own multi-agent program as a rootstep framework (`--system FILE`).

    name = "langgraph-supervisor"          # the framework name its runs are stored under
    task_kinds = ["math"]
    command = ["python3", "supervisor.py"]  # run in the folder of the system file, inside the sandbox
    [environment]
    requirements = "requirements.txt"      # or pyproject = "pyproject.toml", or image = "my-image:tag"
    [answer]
    from = "file"                          # or "stdout": the last non-empty line
    [attribution]
    by = "url"                             # or "header" (+ header = "X-Agent"), or "system_prompt"
    [[agents]]
    name = "solver"
    system_prompt = "You are the solver"   # by = "system_prompt": a regex searched in the system message
    answer = true                          # its last step holds the final answer

`load_system(path)` reads and checks one (a `SystemFileError` names the file, the field and the problem);
`rootstep.adapters._command` turns it into an adapter. See docs/your-system.md.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rootstep.model import RootstepError

SYSTEMS_ENV = "ROOTSTEP_SYSTEMS"
"""Environment variable: system files (os.pathsep-separated) every rootstep process registers, so flow
workers and deployments started from a `--system` command know the system too."""

MAX_PROGRAM_BYTES = 5_000_000
"""The most the program folder may hold (it is copied into the sandbox with every episode)."""

_SKIPPED_DIRS = {"__pycache__", ".git", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache"}


class SystemFileError(RootstepError):
    """A system file that cannot be used; the message names the file, the field and the problem."""


class AgentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    """The agent's name in `Step.agent` and in its gateway URL (`/run/<run>/agent/<name>/v1`)."""
    system_prompt: str | None = None
    """`attribution.by = "system_prompt"`: a regex searched in the request's system message."""
    answer: bool = False
    """Its last step holds the final answer (fault injection puts nothing after it)."""

    @field_validator("system_prompt")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"{v!r} is not a regular expression: {exc}") from None
        return v


class EnvironmentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requirements: str | None = None
    """A requirements.txt (relative to the system file): resolved once to a pinned closure, built offline."""
    pyproject: str | None = None
    """A pyproject.toml whose `[project].dependencies` are resolved the same way."""
    image: str | None = None
    """An existing local Docker image with python3; rootstep adds its sandbox runner on top."""

    @model_validator(mode="after")
    def _one(self) -> "EnvironmentSpec":
        given = [k for k in ("requirements", "pyproject", "image") if getattr(self, k)]
        if len(given) > 1:
            raise ValueError(f"give one of requirements, pyproject or image, not {' and '.join(given)}")
        return self


class TaskInputSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env: str = Field(default="ROOTSTEP_TASK_FILE", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The environment variable that holds the task JSON file's path."""


class AnswerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    source: Literal["stdout", "file"] = Field(default="stdout", alias="from")
    """`stdout`: the last non-empty line the program prints; `file`: what it writes to `file`."""
    file: str = "answer.txt"
    """`from = "file"`: the path, relative to the program's folder (also in `$ROOTSTEP_ANSWER_FILE`)."""


class AttributionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    by: Literal["url", "header", "system_prompt"] = "url"
    header: str | None = Field(default=None, pattern=r"^[A-Za-z0-9-]{1,64}$")

    @model_validator(mode="after")
    def _header(self) -> "AttributionSpec":
        if self.by == "header" and not self.header:
            raise ValueError("by = \"header\" needs `header`: the request header that names the agent")
        return self


class SystemSpec(BaseModel):
    """A parsed system file; `path` is the file itself (absolute), `folder` the program's folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,35}$")
    description: str = ""
    version: str = "unversioned"
    task_kinds: tuple[Literal["coding", "math", "qa", "other"], ...] = ("coding", "math", "qa")
    command: tuple[str, ...] = Field(min_length=1)
    timeout_s: float = Field(default=600.0, gt=0)
    environment: EnvironmentSpec = EnvironmentSpec()
    task: TaskInputSpec = TaskInputSpec()
    answer: AnswerSpec = AnswerSpec()
    attribution: AttributionSpec = AttributionSpec()
    agents: tuple[AgentSpec, ...] = Field(min_length=1)

    @field_validator("command")
    @classmethod
    def _command(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not all(isinstance(part, str) and part for part in v):
            raise ValueError("must be a non-empty list of non-empty strings, e.g. [\"python3\", \"main.py\"]")
        return v

    @model_validator(mode="after")
    def _agents(self) -> "SystemSpec":
        names = [a.name for a in self.agents]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"agents: {', '.join(twice)} declared twice")
        if self.name in _builtin_names():
            raise ValueError(f"name: {self.name!r} is a built-in framework; choose another name")
        if self.attribution.by == "system_prompt":
            missing = [a.name for a in self.agents if not a.system_prompt]
            if missing:
                raise ValueError(f"agents: attribution by system_prompt needs a `system_prompt` for {', '.join(missing)}")
        return self

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def agent_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.agents)

    def program_files(self) -> dict[str, bytes]:
        """Every file of the program's folder (relative path -> bytes), hidden files and caches left out."""
        files: dict[str, bytes] = {}
        total = 0
        for path in sorted(self.folder.rglob("*")):
            rel = path.relative_to(self.folder)
            if any(part.startswith(".") or part in _SKIPPED_DIRS for part in rel.parts) or not path.is_file():
                continue
            data = path.read_bytes()
            total += len(data)
            if total > MAX_PROGRAM_BYTES:
                raise SystemFileError(f"{self.path}: the program folder {self.folder} holds more than "
                                      f"{MAX_PROGRAM_BYTES // 1_000_000} MB; keep only the program beside the system file")
            files[rel.as_posix()] = data
        return files

    def digest(self) -> str:
        """A hash of the system file and the program's files: part of every run's config hash."""
        h = hashlib.sha256(self.path.read_bytes())
        for rel, data in self.program_files().items():
            h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
        return h.hexdigest()[:16]


def _builtin_names() -> set[str]:
    from rootstep.model import Origin
    from rootstep.adapters import ADAPTERS

    return set(ADAPTERS.names(Origin.BUILTIN))


def _where(loc: tuple[object, ...]) -> str:
    return ".".join(str(p) for p in loc if p != "__root__") or "(top level)"


def load_system(path: str | Path) -> SystemSpec:
    """Read and check a system file; a SystemFileError names the file, the field and the problem."""
    file = Path(path).expanduser().absolute()
    if not file.is_file():
        raise SystemFileError(f"{file}: no such system file")
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SystemFileError(f"{file}: not valid TOML: {exc}") from None
    if "command" not in raw:
        raise SystemFileError(f"{file}: field `command` is missing: the program to run, e.g. command = [\"python3\", \"main.py\"]")
    if "path" in raw:
        raise SystemFileError(f"{file}: field `path` is not a system-file field")
    try:
        spec = SystemSpec.model_validate({**raw, "path": file})
    except ValidationError as exc:
        problems = "; ".join(f"field `{_where(e['loc'])}`: {e['msg']}" for e in exc.errors())
        raise SystemFileError(f"{file}: {problems}") from None
    env = spec.environment
    for field in ("requirements", "pyproject"):
        value = getattr(env, field)
        if value and not (spec.folder / value).is_file():
            raise SystemFileError(f"{file}: field `environment.{field}`: {spec.folder / value} does not exist")
    program = spec.folder / spec.command[-1]
    if spec.command[0].startswith("python") and len(spec.command) > 1 and program.suffix == ".py" and not program.is_file():
        raise SystemFileError(f"{file}: field `command`: {program} does not exist")
    return spec
