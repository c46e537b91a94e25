"""The pinned environment image of each framework: the sandbox base image plus that framework's wheels.

Frameworks' dependencies conflict (AG2 pins `openai<3`, smolagents takes `openai` 3.x, MetaGPT pins
packages that no longer exist), so each runs in its own image. The pins below are the complete
dependency closure (`pip download <framework> --python-version 3.11` on the host, every wheel pinned),
so the build is offline and reproducible; the image tag is a hash of these inputs
(`rootstep.sandboxes.ImageSpec`), built once and rebuilt only when a pin changes.
"""

from __future__ import annotations

import hashlib
import platform
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from rootstep.sandboxes import AGENT_COMPUTE, ImageSpec
from rootstep.sandboxes import RUNNER_PATH, RUNNER_SOURCE, SANDBOX_UID

OPENAI2_VERSION = "2.54.0"
OPENAI2_CLOSURE = (
    f"openai=={OPENAI2_VERSION}",
    "annotated_types==0.8.0", "anyio==4.16.0", "certifi==2026.10.18", "distro==1.9.0", "h11==0.16.0",
    "httpcore==1.0.9", "httpx==0.28.1", "idna==3.20", "jiter==0.19.0", "pydantic==2.14.3",
    "pydantic_core==2.50.4", "sniffio==1.3.1", "tqdm==4.70.1", "typing_extensions==4.16.0",
    "typing_inspection==0.4.5",
)
"""The `openai` 2.x client and its complete closure for Python 3.11 (`pip download openai==2.54.0
--only-binary=:all: --python-version 3.11`): the whole environment of the frameworks rootstep implements
itself on the OpenAI client (AFlow, AgentPrune)."""

def pins(lock: str) -> tuple[str, ...]:
    """The pinned requirements in `adapters/<lock>` (one `name==version` a line): a framework image's closure."""
    return tuple(line.strip() for line in Path(__file__).with_name(lock).read_text().splitlines() if line.strip())


AG2_IMAGE = ImageSpec(name="fw-ag2", requirements=(*pins("_ag2.lock"), *AGENT_COMPUTE))
"""autogen 0.14.1 and its closure, and what agents' code imports (`AGENT_COMPUTE`: numpy, sympy)."""

SMOLAGENTS_IMAGE = ImageSpec(name="fw-smolagents", requirements=(*pins("_smolagents.lock"), *AGENT_COMPUTE))
"""smolagents 1.26.0 and its closure, and what agents' code imports (`AGENT_COMPUTE`)."""


class WheelhouseImageSpec(ImageSpec):
    """An image whose pins are installed with `--no-deps`: for frameworks whose own metadata cannot be
    satisfied (MetaGPT 0.8.2 pins `lancedb==0.4.0`, which no longer exists). `requirements` is then the
    complete, hand-checked closure; `from_source` are pins published only as source distributions
    (pure Python), built into wheels on the host with `pip wheel --no-deps`.
    """

    from_source: tuple[str, ...] = ()

    def dockerfile(self) -> str:
        return "\n".join([
            f"FROM {self.base.tag()}",
            "COPY wheels /tmp/rootstep/wheels",
            "RUN python3 -m pip install --no-index --no-deps --no-cache-dir --break-system-packages "
            "--disable-pip-version-check /tmp/rootstep/wheels/*.whl && rm -rf /tmp/rootstep",
            f"COPY runner.py {RUNNER_PATH}",
            f"USER {SANDBOX_UID}:{SANDBOX_UID}",
            "WORKDIR /work",
            f'CMD ["python3", "{RUNNER_PATH}"]',
        ]) + "\n"

    def tag(self) -> str:
        runner = RUNNER_SOURCE.read_text()
        digest = hashlib.sha256("\0".join([self.base.tag(), *self.requirements, "--", *self.from_source,
                                           self.dockerfile(), runner]).encode()).hexdigest()[:16]
        return f"rootstep-{self.name}:{digest}"


def _wheelhouse(spec: WheelhouseImageSpec, report: Any) -> Path:
    """Every pin as a wheel for the image's Python, downloaded (or built from source) once into the cache."""
    from rootstep.sandboxes import binary_wheels_download, cached_wheels, stream_command

    def fill(dest: Path) -> None:
        binary = [r for r in spec.requirements if r not in spec.from_source]
        (dest / "requirements.txt").write_text("\n".join(binary) + "\n")
        report.step(f"pip download {len(binary)} pinned wheels for {spec.name} (--no-deps, python "
                    f"{spec.base.python_version})")
        cmd = binary_wheels_download(spec.base.python_version, dest, dest / "requirements.txt", "--no-deps")
        stream_command(cmd, report, f"pip download for {spec.name}")
        if spec.from_source:
            report.step(f"pip wheel {len(spec.from_source)} pure-Python source distributions: "
                        f"{', '.join(spec.from_source)}")
            stream_command([sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "--progress-bar",
                            "off", "--no-deps", "--wheel-dir", str(dest), *spec.from_source], report,
                           f"pip wheel for {spec.name}")

    key = hashlib.sha256("\0".join([*spec.requirements, "--", *spec.from_source, spec.base.python_version,
                                    platform.machine()]).encode()).hexdigest()[:16]
    return cached_wheels(f"nodeps-{key}", spec.name, fill, report)


class WheelhouseBuilt:
    """Mixed into an adapter whose `image` is a `WheelhouseImageSpec`: `build` makes it offline from the
    wheelhouse (`build_wheelhouse_image`)."""

    image: ClassVar["WheelhouseImageSpec"]

    @classmethod
    def build(cls, client: Any, *, report: Any, force: bool = False) -> str:
        return build_wheelhouse_image(client, cls.image, report=report, force=force)


def build_wheelhouse_image(client: Any, spec: WheelhouseImageSpec, *, report: Any, force: bool = False) -> str:
    """Build `spec` (base first if needed) unless its tag exists; return the tag. The build is offline."""
    from rootstep.sandboxes import build_base, docker_build, image_exists

    tag = spec.tag()
    if not force and image_exists(client, tag):
        report.step(f"image {tag} is up to date")
        return tag
    build_base(client, spec.base, report=report)
    wheels = _wheelhouse(spec, report)
    with tempfile.TemporaryDirectory(prefix="rootstep-ctx-") as ctx_dir:
        ctx = Path(ctx_dir)
        (ctx / "Dockerfile").write_text(spec.dockerfile())
        shutil.copy(RUNNER_SOURCE, ctx / "runner.py")
        shutil.copytree(wheels, ctx / "wheels", ignore=shutil.ignore_patterns("requirements.txt", ".complete"))
        report.step(f"docker build {tag} (offline, {len(list((ctx / 'wheels').glob('*.whl')))} wheels, --no-deps)")
        docker_build(client, ctx, tag, spec.name, report)
    return tag


METAGPT_IMAGE = WheelhouseImageSpec(
    name="fw-metagpt",
    # metagpt==0.8.2 and the closure of what importing its Team/roles needs, checked by importing it;
    # its pins that no longer exist or no longer import are replaced: lancedb (dropped: nothing
    # imported needs it), pydantic 2.8.2 (2.9+ breaks its forward references), python-docx 1.1.2
    # (0.8.11 has no wheel), volcengine-python-sdk 1.0.94 (the ~=1.0.94 pin, built from source).
    # numpy is in its closure (1.26.4); the rest of `AGENT_COMPUTE` is added for the agents' code
    requirements=(*pins("_metagpt.lock"), *(p for p in AGENT_COMPUTE if not p.startswith("numpy=="))),
    from_source=("gitignore_parser==0.1.13", "volcengine_python_sdk==1.0.94"),
)
