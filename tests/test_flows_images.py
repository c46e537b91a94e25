"""A flow builds the sandbox image of a framework it is asked to run when the Docker daemon lacks it
(`Session.ensure_images`): after the main job, which builds AG2's image only, `rootstep pipeline -f smolagents`
failed every episode with "image ... is not built" (seen on a fresh machine, 2026-11-29)."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from rootstep.adapters import ADAPTERS, register_adapter
from rootstep.adapters.base import Adapter
from rootstep.flows._session import open_session
from rootstep.model import RootstepError
from rootstep.sandboxes import ImageSpec, SandboxUnavailableError, docker_client, image_exists

pytestmark = pytest.mark.docker


@pytest.fixture
def client():
    try:
        client = docker_client()
        client.ping()
    except Exception as exc:  # the daemon is unreachable
        pytest.skip(f"Docker daemon unavailable: {exc}")
    return client


def _toy(adapter_name: str) -> type[Adapter]:
    @register_adapter
    class Toy(Adapter):
        name = adapter_name
        agents = ("a",)
        image = ImageSpec(name=adapter_name)  # the sandbox base and the runner only: a build of seconds

    return Toy


def test_a_missing_framework_image_is_built_once_and_an_existing_one_is_left(client, tmp_path: Path):
    logged: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    log = logging.getLogger("rootstep.flows._session")  # outside a flow the session logs here
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    name = f"ensure-{uuid.uuid4().hex[:8]}"
    with ADAPTERS.scoped():
        toy = _toy(name)
        tag = toy.image.tag()
        assert not image_exists(client, tag)
        try:
            with open_session(str(tmp_path / "wh")) as session:
                session.ensure_images([name, "not-an-adapter"])  # an imported trace's framework is left alone
                assert image_exists(client, tag)
                built = client.images.get(tag).id
                session.ensure_images([name])  # once per session: neither rebuilt nor checked again
            with open_session(str(tmp_path / "wh")) as session:
                session.ensure_images([name])  # a new session finds the image and leaves it
            assert client.images.get(tag).id == built
            assert f"building the {name} sandbox image {tag} (once; `rootstep frameworks build`)" in logged
            assert sum(m.startswith(f"building the {name} sandbox image") for m in logged) == 1
            assert any(m.startswith(f"{name} image: docker build {tag}") for m in logged)  # the build's phases
        finally:
            log.removeHandler(handler)
            log.setLevel(logging.NOTSET)
            if image_exists(client, tag):
                client.images.remove(tag, force=True)


def test_an_image_that_cannot_be_built_names_the_framework(client, tmp_path: Path, monkeypatch):
    name = f"ensure-{uuid.uuid4().hex[:8]}"
    with ADAPTERS.scoped():
        toy = _toy(name)

        def fails(cls, client, *, report, force=False):
            raise SandboxUnavailableError("docker build of the image failed: no space left on device")

        monkeypatch.setattr(toy, "build", classmethod(fails))
        with open_session(str(tmp_path / "wh")) as session:
            with pytest.raises(RootstepError, match=f"the {name} sandbox image could not be built: docker build "
                                                    "of the image failed: no space left on device"):
                session.ensure_images([name])
