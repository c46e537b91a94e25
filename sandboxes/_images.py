"""Sandbox images built without an image registry.

1. The base image `rootstep-base:<hash>` is a minimal Debian system with python3 and pip made by
   `debootstrap --variant=minbase` from Debian's package mirror, cleaned, given a non-root user
   `sandbox` (uid 1000), and loaded with `docker import`.
2. Each environment image `rootstep-<env>:<hash>` is built `FROM` the base with the docker SDK from a
   local build context: pinned wheels downloaded on the host (`pip download` for the image's Python)
   are installed with `pip install --no-index`, and the runner (`_runner.py`) is copied in. The build
   runs with no network.

A tag is a hash of the image's inputs (for the base: suite, packages and recipe; for an environment:
the base tag, the pinned requirements, the Dockerfile and the runner), so an image is built once and
rebuilt only when an input changes; `ensure_image` is a no-op when the tag exists.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Protocol

from pydantic import BaseModel, ConfigDict, field_validator

from rootstep.sandboxes._limits import SandboxUnavailableError

RUNNER_PATH = "/opt/rootstep/runner.py"
RUNNER_SOURCE = Path(__file__).parent / "_runner.py"
"""The runner on the host, copied into every environment image at `RUNNER_PATH`."""
SANDBOX_UID = 1000
DEFAULT_MIRROR = "http://deb.debian.org/debian"
_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9_,.-]+\])?==[A-Za-z0-9.+!_-]+$")


class BuildReporter(Protocol):
    """What the build reports to: `step` starts a phase, `line` is one line of a tool's output."""

    def step(self, message: str) -> None: ...

    def line(self, message: str) -> None: ...


class QuietReporter:
    def step(self, message: str) -> None:
        pass

    def line(self, message: str) -> None:
        pass


def cache_dir() -> Path:
    """Where wheels and the debootstrap package cache are kept: `$ROOTSTEP_CACHE` or ~/.cache/rootstep."""
    root = Path(os.environ.get("ROOTSTEP_CACHE") or Path.home() / ".cache" / "rootstep")
    return (root / "sandbox").absolute()


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


class BaseSpec(BaseModel):
    """The Debian system every environment image starts from."""

    model_config = ConfigDict(frozen=True)

    suite: str = "bookworm"
    packages: tuple[str, ...] = ("python3", "python3-pip")
    python_version: str = "3.11"
    recipe: str = "1"  # bump when the way the root file system is prepared changes

    def tag(self) -> str:
        return f"rootstep-base:{_digest(self.suite, ','.join(self.packages), self.python_version, self.recipe)}"


class ImageSpec(BaseModel):
    """An environment image: the base plus pinned wheels (`name==version`, dependencies included)."""

    model_config = ConfigDict(frozen=True)

    name: str
    requirements: tuple[str, ...] = ()
    base: BaseSpec = BaseSpec()

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,40}", v) or v == "base":
            raise ValueError(f"name: {v!r} must be lowercase letters, digits, '-' or '_' (and not 'base')")
        return v

    @field_validator("requirements")
    @classmethod
    def _pinned(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for req in v:
            if not _PIN.match(req.strip()):
                raise ValueError(f"requirements: {req!r} is not pinned as name==version")
        return tuple(sorted(r.strip() for r in v))

    def dockerfile(self) -> str:
        lines = [f"FROM {self.base.tag()}"]
        if self.requirements:
            lines += [
                "COPY requirements.txt /tmp/rootstep/requirements.txt",
                "COPY wheels /tmp/rootstep/wheels",
                "RUN python3 -m pip install --no-index --no-cache-dir --break-system-packages "
                "--disable-pip-version-check --find-links /tmp/rootstep/wheels "
                "-r /tmp/rootstep/requirements.txt && rm -rf /tmp/rootstep",
            ]
        lines += [
            f"COPY runner.py {RUNNER_PATH}",
            f"USER {SANDBOX_UID}:{SANDBOX_UID}",
            "WORKDIR /work",
            f'CMD ["python3", "{RUNNER_PATH}"]',
        ]
        return "\n".join(lines) + "\n"

    def tag(self) -> str:
        runner = RUNNER_SOURCE.read_text()
        return f"rootstep-{self.name}:{_digest(self.base.tag(), *self.requirements, self.dockerfile(), runner)}"


AGENT_COMPUTE = ("mpmath==1.3.0", "numpy==2.4.6", "sympy==1.14.0")
"""What agents import on math and code tasks, pinned in every image that runs agent-written code (the framework
images and `default`): AG2 on MATH-500 wrote `import sympy`, and without it the run died on the import and was
labelled as if the agent had erred. sympy's one dependency is mpmath."""

# The environments `rootstep sandbox build` builds. `default` runs verifiers and agent-written code.
ENVIRONMENTS: dict[str, ImageSpec] = {
    "default": ImageSpec(
        name="default",
        requirements=("pytest==9.2.0", "iniconfig==2.3.1", "packaging==26.3", "pluggy==1.7.0", "pygments==2.21.0",
                      *AGENT_COMPUTE),
    ),
}


def default_image() -> str:
    return ENVIRONMENTS["default"].tag()


def image_exists(client: Any, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def stream_command(cmd: list[str], report: BuildReporter, what: str) -> None:
    """Run `cmd`, passing its output lines to the reporter; a failure names `what` and the last lines."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        if line:
            report.line(line)
            tail = (tail + [line])[-15:]
    if proc.wait() != 0:
        raise SandboxUnavailableError(f"{what} failed (exit {proc.returncode}):\n" + "\n".join(tail))


def _privileged() -> list[str]:
    """`debootstrap` and reading the root file system need root: nothing, or `sudo -n`."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    raise SandboxUnavailableError(
        "building the base image runs debootstrap, which needs root: run as root or with passwordless sudo"
    )


_PASSWD = f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:rootstep sandbox:/work:/usr/sbin/nologin\n"
_GROUP = f"sandbox:x:{SANDBOX_UID}:\n"
_PRUNE = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info",
          "usr/share/locale", "var/log", "var/cache/debconf")


_BASE_BUILD = threading.Lock()


def build_base(client: Any, spec: BaseSpec = BaseSpec(), *, report: BuildReporter = QuietReporter(), force: bool = False) -> str:
    """Build the base image from Debian packages unless its tag exists; return the tag. Builds that run side by
    side (`rootstep frameworks build --jobs`) wait for one another here: the base is built once."""
    with _BASE_BUILD:
        return _build_base(client, spec, report=report, force=force)


def _build_base(client: Any, spec: BaseSpec, *, report: BuildReporter, force: bool) -> str:
    tag = spec.tag()
    if not force and image_exists(client, tag):
        report.step(f"base image {tag} is up to date")
        return tag
    debootstrap = shutil.which("debootstrap") or next(
        (p for p in ("/usr/sbin/debootstrap", "/sbin/debootstrap") if os.path.exists(p)), None
    )
    if debootstrap is None:
        raise SandboxUnavailableError(
            "debootstrap is not installed; run scripts/sandbox-prereqs.sh (or: apt-get install debootstrap)"
        )
    sudo = _privileged()
    cache = cache_dir()
    (cache / "debs").mkdir(parents=True, exist_ok=True)
    mirror = os.environ.get("ROOTSTEP_DEBIAN_MIRROR", DEFAULT_MIRROR)
    work = Path(tempfile.mkdtemp(prefix="rootstep-base-", dir=cache))
    rootfs = work / "rootfs"
    try:
        report.step(f"debootstrap {spec.suite} (minbase + {', '.join(spec.packages)}) from {mirror}")
        stream_command(
            sudo + [debootstrap, "--variant=minbase", f"--include={','.join(spec.packages)}",
                    f"--cache-dir={cache / 'debs'}", spec.suite, str(rootfs), mirror],
            report, "debootstrap",
        )
        report.step("preparing the root file system (user sandbox, /work, pruning caches and docs)")
        script = "; ".join(
            [f"rm -rf {rootfs}/{p}/*" for p in _PRUNE]
            + [
                f"printf '%s' '{_PASSWD}' >> {rootfs}/etc/passwd",
                f"printf '%s' '{_GROUP}' >> {rootfs}/etc/group",
                f"mkdir -p {rootfs}/work {rootfs}/opt/rootstep",
                f"chown {SANDBOX_UID}:{SANDBOX_UID} {rootfs}/work",
                f"tar --numeric-owner -C {rootfs} -cf {work}/rootfs.tar .",
                f"chmod 644 {work}/rootfs.tar",
            ]
        )
        stream_command(sudo + ["sh", "-ec", script], report, "preparing the root file system")
        size = (work / "rootfs.tar").stat().st_size / 1e6
        report.step(f"docker import ({size:.0f} MB) as {tag}")
        repo, _, version = tag.partition(":")
        client.api.import_image_from_file(
            str(work / "rootfs.tar"), repository=repo, tag=version,
            changes=[
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "ENV LANG=C.UTF-8",
                'CMD ["python3"]',
                "LABEL rootstep.image=base",
            ],
        )
        if not image_exists(client, tag):
            raise SandboxUnavailableError(f"docker import did not produce {tag}")
    finally:
        subprocess.run(sudo + ["rm", "-rf", str(work)], check=False)
    return tag


_CACHE_LOCKS: dict[Path, threading.Lock] = {}
_CACHE_LOCKS_GUARD = threading.Lock()


def cache_lock(path: Path) -> threading.Lock:
    """The lock of one cache folder: images built side by side that share their wheels (the aflow and agentprune
    images have the same pins) download them once, not into the same folder at once."""
    with _CACHE_LOCKS_GUARD:
        return _CACHE_LOCKS.setdefault(path.absolute(), threading.Lock())


def binary_wheels_download(python_version: str, dest: Path, requirements: Path, *extra: str) -> list[str]:
    """The `pip download` command for binary wheels of `requirements` for an image's Python on this
    machine's architecture (manylinux), into `dest`; `extra`: more pip options (`--no-deps`)."""
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--progress-bar", "off", *extra,
           "--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
           "--abi", f"cp{python_version.replace('.', '')}", "--dest", str(dest), "-r", str(requirements)]
    for version in ("2014", "_2_17", "_2_28", "_2_31", "_2_34", "_2_36"):
        cmd += ["--platform", f"manylinux{version}_{platform.machine()}"]
    return cmd


def cached_wheels(key: str, name: str, fill: Callable[[Path], None], report: BuildReporter) -> Path:
    """The wheel folder `key` of the cache, filled once by `fill(folder)` (marked complete only when it
    returns; an image built beside it with the same key waits for it); `name`: the image, for the log."""
    dest = cache_dir() / "wheels" / key
    with cache_lock(dest):
        if (dest / ".complete").exists():
            report.step(f"wheels for {name} are cached ({dest})")
            return dest
        dest.mkdir(parents=True, exist_ok=True)
        fill(dest)
        (dest / ".complete").write_text("ok\n")
        return dest


def _download_wheels(spec: ImageSpec, report: BuildReporter) -> Path:
    """Pinned wheels for the image's Python and platform, downloaded once into the cache."""

    def download(dest: Path) -> None:
        report.step(f"pip download {len(spec.requirements)} pinned wheels for {spec.name} "
                    f"(python {spec.base.python_version})")
        req = dest / "requirements.txt"
        req.write_text("\n".join(spec.requirements) + "\n")
        stream_command(binary_wheels_download(spec.base.python_version, dest, req), report,
                       f"pip download for environment {spec.name!r}")

    return cached_wheels(_digest(*spec.requirements, spec.base.python_version, platform.machine()), spec.name,
                         download, report)


def build_image(client: Any, spec: ImageSpec, *, report: BuildReporter = QuietReporter(), force: bool = False) -> str:
    """Build the environment image (and the base first if needed) unless its tag exists; return the tag."""
    tag = spec.tag()
    if not force and image_exists(client, tag):
        report.step(f"image {tag} is up to date")
        return tag
    build_base(client, spec.base, report=report)
    with tempfile.TemporaryDirectory(prefix="rootstep-ctx-") as ctx_dir:
        ctx = Path(ctx_dir)
        (ctx / "Dockerfile").write_text(spec.dockerfile())
        shutil.copy(RUNNER_SOURCE, ctx / "runner.py")
        if spec.requirements:
            wheels = _download_wheels(spec, report)
            (ctx / "requirements.txt").write_text("\n".join(spec.requirements) + "\n")
            shutil.copytree(wheels, ctx / "wheels", ignore=shutil.ignore_patterns("requirements.txt", ".complete"))
        report.step(f"docker build {tag} (offline, from a local context)")
        docker_build(client, ctx, tag, spec.name, report)
    return tag


def docker_build(client: Any, ctx: Path, tag: str, name: str, report: BuildReporter) -> None:
    """`docker build` of the context `ctx` as `tag`, with no network, its output streamed to `report`;
    `SandboxUnavailableError` with the daemon's errors when no image comes out."""
    errors: list[str] = []
    for chunk in client.api.build(path=str(ctx), tag=tag, rm=True, forcerm=True, decode=True, network_mode="none",
                                  labels={"rootstep.image": name}):
        if "stream" in chunk and chunk["stream"].strip():
            report.line(chunk["stream"].rstrip())
        if "error" in chunk:
            errors.append(chunk["error"])
    if errors or not image_exists(client, tag):
        raise SandboxUnavailableError(f"docker build of {tag} failed: {' '.join(errors) or 'no image produced'}")


def ensure_image(client: Any, tag: str | None = None) -> str:
    """Check that `tag` (default: the default environment) exists; raise with the fix if not."""
    tag = tag or default_image()
    if not image_exists(client, tag):
        raise SandboxUnavailableError(f"sandbox image {tag} is not built; run `rootstep sandbox build`")
    return tag


def build_all(
    client: Any, names: list[str] | None = None, *, report: BuildReporter = QuietReporter(), force: bool = False
) -> dict[str, tuple[str, float]]:
    """Build the named environments (default: all); return name -> (tag, seconds it took)."""
    names = names or list(ENVIRONMENTS)
    unknown = [n for n in names if n not in ENVIRONMENTS]
    if unknown:
        raise ValueError(f"env: unknown environment(s) {unknown}; known: {sorted(ENVIRONMENTS)}")
    out: dict[str, tuple[str, float]] = {}
    for name in names:
        start = time.monotonic()
        out[name] = (build_image(client, ENVIRONMENTS[name], report=report, force=force), time.monotonic() - start)
    return out


def stale_images(client: Any) -> list[str]:
    """Base and built-in environment images whose tag is no longer current (older input versions)."""
    current = {spec.tag() for spec in ENVIRONMENTS.values()} | {s.base.tag() for s in ENVIRONMENTS.values()}
    repos = {t.partition(":")[0] for t in current}
    return [
        tag for image in client.images.list() for tag in image.tags
        if tag.partition(":")[0] in repos and tag not in current
    ]
