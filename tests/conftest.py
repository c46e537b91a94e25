"""Shared fixtures: the shared benchmark data (read-only) and fresh warehouses in temp dirs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("ROOTSTEP_SHARED_DATA", REPO.parent / "shared" / "data"))
WHOWHEN = SHARED_DATA / "whowhen"


@pytest.fixture(scope="session")
def whowhen_dir() -> Path:
    if not WHOWHEN.is_dir():
        pytest.skip(f"the shared Who&When data is not at {WHOWHEN} (set ROOTSTEP_SHARED_DATA)")
    return WHOWHEN


@pytest.fixture
def whowhen_copy(whowhen_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the Who&When data that a test may change."""
    target = tmp_path / "whowhen"
    shutil.copytree(whowhen_dir, target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


@pytest.fixture(autouse=True, scope="module")
def _system_files_stay_in_their_module():
    """System files a test module registers (`use_systems`) are forgotten after it, with the
    `$ROOTSTEP_SYSTEMS` it set: other modules (and the CLIs they start) see the built-in frameworks only."""
    from rootstep.adapters import ADAPTERS
    from rootstep.adapters._system import SYSTEMS_ENV

    env = os.environ.get(SYSTEMS_ENV)
    with ADAPTERS.scoped():
        yield
    if env is None:
        os.environ.pop(SYSTEMS_ENV, None)
    else:
        os.environ[SYSTEMS_ENV] = env


@pytest.fixture(scope="module")
def prefect_harness():
    """A temporary Prefect server (and database) for the flows of one test module: every module that
    runs flows asks for it, so its flows never depend on a server another module started or stopped."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield


@pytest.fixture
def warehouse(tmp_path: Path):
    from rootstep.warehouse import Warehouse

    return Warehouse(tmp_path / "wh")


@pytest.fixture(scope="session")
def docker_sandbox():
    """A Docker sandbox (warm pool of 2) for @pytest.mark.docker tests; skips with the reason when the
    daemon is unreachable or the image is not built (`rootstep sandbox build`)."""
    from rootstep.sandboxes import SandboxUnavailableError
    from rootstep.sandboxes._docker import DockerSandbox

    try:
        sandbox = DockerSandbox(pool=2)
    except SandboxUnavailableError as exc:
        pytest.skip(f"Docker sandbox unavailable: {exc}")
    yield sandbox
    sandbox.close()
