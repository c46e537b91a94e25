"""Shared fixtures: the shared benchmark data (read-only) and fresh warehouses in temp dirs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("ROOTSTEP_SHARED_DATA", REPO.parent / "shared" / "data"))
WHOWHEN = SHARED_DATA / "whowhen"


LONGEST_FIRST = (
    "test_golden_path.py", "test_flows_stop.py", "test_your_system_examples.py", "test_flows_cluster.py",
    "test_causal_labels_flows.py", "test_flows_pipeline.py", "test_local_model.py", "test_label_trust_flows.py",
    "test_flows_deploy.py", "test_command_system.py", "test_realmodel_episodes.py",
)
"""Test modules that took longest (seconds in one process: 250, 220, 200, 160, 150, 100, 100, 70, 60, 50, 40
on a 2-core machine): collected first, so that the two xdist workers of scripts/test.sh (`--dist loadfile
--no-loadscope-reorder`) do not end on one of them while the other worker has nothing left."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


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
