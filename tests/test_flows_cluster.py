"""The flows with `--runner dask|ray`: a real local multi-process Dask cluster (Ray when its optional extra
is installed), real AG2 in Docker, scripted LLMs (tests/_flows_support.py, registered in every worker
process by a setup hook). The rows written must be the ones the thread runner writes, and the tasks
must have run in the workers' processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from rootstep.annotation import Budget
from rootstep.cli import EPHEMERAL_PREFECT_STARTUP_S
from rootstep.warehouse import Warehouse

from . import _flows_support as S
from ._adapter_support import require_framework_image

REPO = Path(__file__).resolve().parent.parent
BUDGET = Budget(max_replays=4, max_llm_calls=10, max_reasks=1, max_candidates=1)
SETUP = ("tests._flows_support:register_all",)
TIMINGS: dict[str, float] = {}
_SETUP_CALLS: list[int] = []


# --------------------------------------------------------------------------------------- no Docker needed

def test_runner_options_are_checked():
    from pydantic import ValidationError

    from rootstep.flows._runner import Runner

    with pytest.raises(ValidationError, match="an address is for dask or ray"):
        Runner(kind="thread", address="tcp://127.0.0.1:8786")
    with pytest.raises(ValidationError, match="use MODULE:FUNCTION"):
        Runner(kind="dask", setup=("tests._flows_support.register_all",))
    assert Runner(kind="dask", setup=SETUP).setup == SETUP


def test_cli_rejects_an_address_for_another_runner():
    from typer.testing import CliRunner

    from rootstep.cli import app

    result = CliRunner().invoke(app, ["collect", "--dask-address", "tcp://127.0.0.1:8786"])
    assert result.exit_code == 2
    assert "--dask-address is for --runner dask" in result.output
    result = CliRunner().invoke(app, ["collect", "--runner", "dask", "--worker-setup", "nocolon"])
    assert result.exit_code == 2 and "--worker-setup" in result.output and "MODULE:FUNCTION" in result.output


def test_setup_hooks_run_once_and_fail_clearly():
    from rootstep.flows import _remote

    _remote.run_setup(("tests.test_flows_cluster:_count_setup",))
    _remote.run_setup(("tests.test_flows_cluster:_count_setup",))
    assert _SETUP_CALLS == [os.getpid()]
    with pytest.raises(RuntimeError, match="cannot import 'no_such_module_here'"):
        _remote.run_setup(("no_such_module_here:f",))
    with pytest.raises(RuntimeError, match="has no function 'missing'"):
        _remote.run_setup(("tests._flows_support:missing",))


def _count_setup() -> None:
    _SETUP_CALLS.append(os.getpid())


def test_ray_missing_is_a_clear_error(tmp_path):
    try:
        import prefect_ray  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("prefect-ray is installed here: the missing-package error cannot be shown")
    from rootstep.flows._runner import Runner, RunnerUnavailable, start_cluster

    with pytest.raises(RunnerUnavailable, match=r"pip install 'rootstep\[ray\]'"):
        with start_cluster(Runner(kind="ray")):
            pass
    from typer.testing import CliRunner

    from rootstep.cli import app

    result = CliRunner().invoke(app, ["collect", "--runner", "ray", "--warehouse", str(tmp_path)])
    assert result.exit_code == 2 and "optional extra" in result.output and "rootstep[ray]" in result.output
    assert not list(tmp_path.iterdir())  # refused before anything ran


# --------------------------------------------------------------------------------------- the cluster

@pytest.fixture(scope="module")
def dask_cluster():
    """Two worker processes (one task at a time each) and their pids."""
    distributed = pytest.importorskip("distributed", reason="dask.distributed is installed by scripts/bootstrap.sh")
    started = time.perf_counter()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        pids = set(client.run(os.getpid).values())
        TIMINGS["dask cluster start"] = time.perf_counter() - started
        assert len(pids) == 2 and os.getpid() not in pids
        yield cluster, pids


def _pipeline(warehouse: str, runner=None):
    from rootstep.flows.pipeline import pipeline

    model, agent_models = S.MODELS["ag2"]
    return pipeline(frameworks=["ag2"], tasks=S.scenario_tasks(), model=model, agent_models=agent_models,
                    analyzer_model="scripted/flows-analyzer", perturber_model="scripted/flows-perturber",
                    budget=BUDGET, programmatic=False, warehouse=warehouse, runner=runner)


@pytest.fixture(scope="module")
def runs(prefect_harness, dask_cluster, tmp_path_factory, docker_sandbox):
    """The pipeline on the four scenarios, once on the Dask cluster and once with the thread runner."""
    from rootstep.flows._runner import Runner

    require_framework_image("ag2")
    S.register_all()  # for the thread runner (the workers register theirs through the setup hook)
    cluster, pids = dask_cluster
    on_dask, on_threads = str(tmp_path_factory.mktemp("wh-dask")), str(tmp_path_factory.mktemp("wh-thread"))
    runner = Runner(kind="dask", address=cluster.scheduler_address, setup=SETUP)
    clock = time.perf_counter()
    dask_report = _pipeline(on_dask, runner)
    TIMINGS["pipeline on dask (2 workers)"] = time.perf_counter() - clock
    clock = time.perf_counter()
    thread_report = _pipeline(on_threads)
    TIMINGS["pipeline on threads"] = time.perf_counter() - clock
    yield {"dask": dask_report, "thread": thread_report, "wh_dask": on_dask, "wh_thread": on_threads,
           "pids": pids, "runner": runner}
    print("\ncluster test timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in TIMINGS.items()))


def _rows(location: str) -> dict[str, object]:
    """Everything the pipeline wrote, without what differs between any two executions (gateway run ids,
    timestamps, durations, and so the analyzer's and perturber's request hashes)."""
    wh = Warehouse(location)
    task_of = {r["id"]: r["task_id"] for r in wh.rows("SELECT id, task_id FROM runs")}
    return {
        "runs": sorted((r["id"], r["task_id"], r["parent_run_id"], r["success"], r["n_steps"], r["final_answer"])
                       for r in wh.rows("SELECT * FROM runs")),
        "steps": sorted((r["run_id"], r["step"], r["agent"], r["kind"], r["content"])
                        for r in wh.rows("SELECT * FROM steps")),
        "replays": sorted((task_of[r["run_id"]], r["purpose"], r["intervention_step"], r["success_before"],
                           r["success_after"], r["result_run_id"], r["live_calls"], r["replayed_calls"])
                          for r in wh.rows("SELECT * FROM replays")),
        "annotations": sorted((task_of[r["run_id"]], r["run_id"], r["method"], r["agent"], r["step"], r["verified"],
                               r["status"], r["cost_replays"]) for r in wh.rows("SELECT * FROM annotations")),
        # an analyzer's / perturber's prompt holds Omega's feedback, whose details time the tests (`duration_s`)
        "llm_calls": Counter((r["agent"], r["mode"], r["simulated"],
                              None if r["purpose"] == "annotation" else r["request_hash"], r["counter"])
                             for r in wh.rows("SELECT * FROM llm_calls")),
    }


@pytest.mark.docker
def test_dask_writes_the_rows_the_thread_runner_writes(runs):
    on_dask, on_threads = _rows(runs["wh_dask"]), _rows(runs["wh_thread"])
    for table in on_dask:
        assert on_dask[table] == on_threads[table], table
    # and those rows are the scenarios' known answers
    wh = Warehouse(runs["wh_dask"])
    labels = {r["task_id"]: (r["method"], r["agent"], r["step"])
              for r in wh.rows("SELECT l.*, r.task_id FROM labels l JOIN runs r ON r.id = l.run_id")}
    assert labels == {"flows-s1": ("counterfactual", "coder", 1), "flows-s2": ("counterfactual", "critic", 3),
                      "flows-s4": ("fault_injection", "coder", 1)}
    assert [r["method"] for r in wh.rows("SELECT * FROM unresolved")] == ["counterfactual"]
    assert len(on_dask["llm_calls"]) > 0 and on_dask["replays"]
    # the workers' analyzer and perturber calls came back with their searches and were stored
    assert {"analyzer", "perturber"} <= {agent for agent, *_ in on_dask["llm_calls"]}


@pytest.mark.docker
def test_tasks_ran_in_the_worker_processes(runs):
    dask, pids = runs["dask"], runs["pids"]
    assert len(dask.collected) == 4 and len(dask.annotated) == 4
    ran_in = [int(r.worker.rsplit(":", 1)[1]) for r in [*dask.collected, *dask.annotated]]
    assert set(ran_in) <= pids and os.getpid() not in ran_in
    assert {int(r.worker.rsplit(":", 1)[1]) for r in dask.collected} == pids  # both workers collected
    # the thread runner ran everything here; the reports agree otherwise
    thread = runs["thread"]
    assert {r.worker for r in [*thread.collected, *thread.annotated]} == {f"{socket.gethostname()}:{os.getpid()}"}
    def same(reports) -> list[str]:  # without where and how long each ran (the row's, its cost's and its search's seconds)
        exclude = {"worker": True, "seconds": True, "cost": {"seconds"}, "stats": {"seconds"}}
        return sorted(r.model_dump_json(exclude=exclude) for r in reports)

    assert same(dask.collected) == same(thread.collected)
    assert same(dask.annotated) == same(thread.annotated)


@pytest.mark.docker
def test_workers_calls_are_journaled_beside_the_warehouse(runs):
    """The flow journals what the workers' gateways recorded, so a later (thread) annotation replays from it."""
    wh = Warehouse(runs["wh_dask"])
    for run in wh.rows("SELECT gateway_run_id FROM runs WHERE parent_run_id IS NULL"):
        gateway_run = run["gateway_run_id"]
        journal = Path(runs["wh_dask"]) / "gateway" / "journal" / f"{gateway_run}.jsonl"
        stored = wh.rows("SELECT count(*) AS n FROM llm_calls WHERE run_id = ?", [gateway_run])[0]["n"]
        assert journal.is_file() and len(journal.read_text().splitlines()) == stored > 0


@pytest.mark.docker
def test_rerun_on_dask_writes_nothing(runs):
    wh = Warehouse(runs["wh_dask"])
    tables = ("runs", "steps", "llm_calls", "replays", "annotations")
    before = {t: wh.rows(f"SELECT count(*) AS n FROM raw_{t}")[0]["n"] for t in tables}
    again = _pipeline(runs["wh_dask"], runs["runner"])
    assert all(r.cached for r in again.collected) and again.annotated == []
    assert {t: wh.rows(f"SELECT count(*) AS n FROM raw_{t}")[0]["n"] for t in tables} == before


_LOCAL_CLUSTER_SCRIPT = """
import json, os, sys
from tests import _flows_support as S
from rootstep.flows._runner import Runner
from rootstep.flows.collect import collect
model, agent_models = S.MODELS["ag2"]
report = collect(["ag2"], tasks=[S.scenario_task("s1"), S.scenario_task("s4")], model=model,
                 agent_models=agent_models, warehouse=sys.argv[1],
                 runner=Runner(kind=sys.argv[2], workers=2, setup=("tests._flows_support:register_all",)))
print("REPORT " + json.dumps({"pid": os.getpid(), "runs": [r.model_dump() for r in report.runs]}))
"""


def _collect_in_fresh_process(kind: str, warehouse: Path, tmp_path: Path) -> tuple[int, list[dict]]:
    """`collect` as the command line runs it: no Prefect server configured (the ephemeral API) and a
    local cluster started by the runner; returns the process's pid and its report's runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=EPHEMERAL_PREFECT_STARTUP_S,
               PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    done = subprocess.run([sys.executable, "-c", _LOCAL_CLUSTER_SCRIPT, str(warehouse), kind], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("REPORT ")), None)
    assert done.returncode == 0 and line, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    report = json.loads(line.removeprefix("REPORT "))
    return report["pid"], report["runs"]


def _check_local_cluster_collect(kind: str, runs: dict, tmp_path: Path) -> None:
    warehouse = tmp_path / f"wh-{kind}"
    clock = time.perf_counter()
    pid, collected = _collect_in_fresh_process(kind, warehouse, tmp_path)
    TIMINGS[f"collect 2 tasks, {kind} local cluster started by the runner (fresh process)"] = time.perf_counter() - clock
    assert len(collected) == 2 and all(r["run_id"] and not r["cached"] and r["error"] is None for r in collected), collected
    workers = {int(r["worker"].rsplit(":", 1)[1]) for r in collected}
    assert pid not in workers and os.getpid() not in workers
    # content-derived run ids: the same runs as the thread runner's (steps, answer, verdict, model, config)
    on_threads = Warehouse(runs["wh_thread"])
    expected = {r["task_id"]: (r["id"], r["success"]) for r in on_threads.rows(
        "SELECT id, task_id, success FROM runs WHERE parent_run_id IS NULL AND task_id IN ('flows-s1', 'flows-s4')")}
    assert {r["task_id"]: (r["run_id"], r["success"]) for r in collected} == expected
    stored = Warehouse(str(warehouse))
    assert stored.count("runs") == 2 and stored.count("llm_calls") > 0


@pytest.mark.docker
def test_local_dask_cluster_started_by_the_runner(runs, tmp_path):
    _check_local_cluster_collect("dask", runs, tmp_path)


@pytest.mark.docker
def test_local_ray_cluster_started_by_the_runner(runs, tmp_path):
    pytest.importorskip("prefect_ray", reason="ray is the optional extra `ray` (an ~80 MB wheel), not installed by "
                                              "scripts/bootstrap.sh: pip install -c requirements.lock -e '.[ray]'")
    _check_local_cluster_collect("ray", runs, tmp_path)
