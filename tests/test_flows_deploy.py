"""Deployments against a real local Prefect server started by the test (`prefect server start` on a free
loopback port with its own PREFECT_HOME), and the one-off backfill of a new benchmark."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rootstep.warehouse import Warehouse

from . import _flows_support as S

pytestmark = pytest.mark.docker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory):
    """`prefect server start` as a subprocess; yields its API URL; stopped (by its pid) at the end."""
    home = tmp_path_factory.mktemp("prefect-home")
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_UI_ENABLED": "false", "PREFECT_API_URL": ""}
    log = open(home / "server.log", "w")
    proc = subprocess.Popen([str(Path(sys.executable).with_name("prefect")), "server", "start", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"prefect server did not start: {(home / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_scheduled_deployment_is_created_and_runs(prefect_server, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.flow_engine import run_flow
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from rootstep.adapters import get_adapter
    from rootstep.flows.collect import collect
    from rootstep.flows.deploy import Schedule, deploy

    adapter = get_adapter("ag2")
    if not adapter.image_built():
        pytest.skip("Docker or the ag2 image is unavailable (`rootstep frameworks build`)")
    S.register_all()
    model, agent_models = S.MODELS["ag2"]
    warehouse = str(tmp_path / "wh")
    schedule = Schedule(name="nightly-test", flow="collect", cron="30 1 * * *", parameters={
        "frameworks": ["ag2"], "tasks": [S.scenario_task("s4").model_dump(mode="json")], "model": model,
        "agent_models": agent_models, "warehouse": warehouse})
    with temporary_settings({PREFECT_API_URL: prefect_server}):
        names = deploy([schedule])
        assert names == ["rootstep-collect/nightly-test"]
        with get_client(sync_client=True) as client:
            deployment = client.read_deployment_by_name(names[0])
            assert [s.schedule.cron for s in deployment.schedules] == ["30 1 * * *"]
            assert all(s.active for s in deployment.schedules)
            assert deployment.entrypoint == "rootstep.flows.collect.collect"
            assert deployment.parameters["warehouse"] == warehouse
        # a run of the deployment, created on the server, executed here (the scripted models live in
        # this process), its state reported to the server
        flow_run = run_deployment(names[0], timeout=0)
        assert flow_run.deployment_id == deployment.id
        report = run_flow(collect, flow_run=flow_run, parameters=flow_run.parameters)
        with get_client(sync_client=True) as client:
            assert client.read_flow_run(flow_run.id).state.is_completed()
    assert [(r.task_id, r.success, r.cached) for r in report.runs] == [("flows-s4", True, False)]
    assert Warehouse(warehouse).count("runs") == 1


def test_deploy_refuses_without_a_server():
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from rootstep.flows.deploy import default_schedules, deploy

    with temporary_settings({PREFECT_API_URL: None}):
        with pytest.raises(RuntimeError, match="PREFECT_API_URL"):
            deploy(default_schedules())


def test_backfill_registers_the_benchmark_and_runs_the_pipeline(tmp_path, monkeypatch):
    from prefect.testing.utilities import prefect_test_harness

    from rootstep.adapters import get_adapter
    from rootstep.benchmarks import load_tasks
    from rootstep.annotation import Budget
    from rootstep.flows.deploy import backfill

    if not get_adapter("ag2").image_built():
        pytest.skip("Docker or the ag2 image is unavailable (`rootstep frameworks build`)")
    S.register_all()
    monkeypatch.setenv("ROOTSTEP_BENCHMARKS_DIR", str(tmp_path / "benchmarks"))
    data = tmp_path / "adders.jsonl"
    task = S.scenario_task("s1")
    data.write_text(json.dumps({"task_id": "a1", "prompt": task.prompt, "tests": S.TESTS, "entry_point": "add"}) + "\n")
    model, agent_models = S.MODELS["ag2"]
    with prefect_test_harness(server_startup_timeout=90):
        report = backfill(data, "code_tests", frameworks=["ag2"], model=model, agent_models=agent_models,
                          analyzer_model="scripted/flows-analyzer", perturber_model="scripted/flows-perturber",
                          budget=Budget(max_replays=2, max_llm_calls=6, max_candidates=1, max_reasks=1),
                          warehouse=str(tmp_path / "wh"))
    assert [t.task_id for t in load_tasks("adders")] == ["a1"]
    assert [(r.benchmark, r.task_id, r.success) for r in report.collected] == [("adders", "a1", False)]
    [label] = report.annotated
    # the scenario s1 on AG2: the coder's failing code at step 1 is the earliest correction that works
    assert (label.method, label.status, label.step, label.agent) == ("counterfactual", "labelled", *S.LABEL["ag2"])
