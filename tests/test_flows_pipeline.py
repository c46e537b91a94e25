"""The pipeline flows (collect -> split -> counterfactual + inject) on real Prefect (a test harness with
its own database) and real frameworks in Docker (AG2 and smolagents), scripted LLMs through the
gateway, where the decisive step of each scenario is known (tests/_flows_support.py)."""

from __future__ import annotations

import pytest

from rootstep.annotation import Budget
from rootstep.warehouse import Warehouse

from . import _flows_support as S
from ._adapter_support import require_framework_image

pytestmark = pytest.mark.docker

BUDGET = Budget(max_replays=4, max_llm_calls=10, max_reasks=1, max_candidates=1)
INJECT_BUDGET = Budget(max_replays=4, max_llm_calls=10, max_reasks=1, max_candidates=3)
"""Injection points: with one, only the step that gives the answer (smolagents: the manager's) is tried."""
TABLES = ("runs", "steps", "llm_calls", "replays", "annotations")


def _run_pipeline(framework: str, warehouse: str):
    from rootstep.flows.pipeline import pipeline

    model, agent_models = S.MODELS[framework]
    return pipeline(frameworks=[framework], tasks=S.scenario_tasks(), model=model, agent_models=agent_models,
                    analyzer_model="scripted/flows-analyzer", perturber_model="scripted/flows-perturber",
                    budget=BUDGET, inject_budget=INJECT_BUDGET, programmatic=False, warehouse=warehouse)


@pytest.fixture(scope="module")
def warehouse_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("flows-warehouse"))


@pytest.fixture(scope="module", params=["ag2", "smolagents"])
def done(request, prefect_harness, warehouse_dir, docker_sandbox):
    """The pipeline run once per framework on the four scenarios (one shared warehouse)."""
    framework = request.param
    require_framework_image(framework)
    S.register_all()
    report = _run_pipeline(framework, warehouse_dir)
    return {"framework": framework, "report": report, "wh": Warehouse(warehouse_dir)}


def _run(wh: Warehouse, framework: str, marker: str) -> dict:
    rows = wh.rows("SELECT * FROM runs WHERE framework = ? AND task_id = ? AND parent_run_id IS NULL",
                   [framework, f"flows-{marker}"])
    assert len(rows) == 1, rows
    return rows[0]


def test_collection_split(done):
    wh, fw = done["wh"], done["framework"]
    collected = {r.task_id: r for r in done["report"].collected}
    assert {t: (r.success, r.cached, r.error) for t, r in collected.items()} == {
        "flows-s1": (False, False, None), "flows-s2": (False, False, None),
        "flows-s3": (False, False, None), "flows-s4": (True, False, None)}
    # split = the views; replayed runs (parent_run_id set) are in neither
    failures = {r["task_id"] for r in wh.rows("SELECT task_id FROM failures WHERE framework = ?", [fw])}
    successes = {r["task_id"] for r in wh.rows("SELECT task_id FROM successes WHERE framework = ?", [fw])}
    assert failures == {"flows-s1", "flows-s2", "flows-s3"} and successes == {"flows-s4"}
    replayed = wh.rows("SELECT count(*) AS n FROM runs WHERE framework = ? AND parent_run_id IS NOT NULL", [fw])[0]["n"]
    assert replayed >= 5  # s1: 1, s2: 2, s3: >= 1, s4: 1 re-simulations, all stored as runs
    # every collected run's LLM calls came through the gateway and were flushed to the warehouse
    for marker in ("s1", "s4"):
        run = _run(wh, fw, marker)
        gateway_run = run["gateway_run_id"]
        calls = wh.rows("SELECT mode, simulated FROM llm_calls WHERE run_id = ?", [gateway_run])
        assert calls and all(c["mode"] == "live" and c["simulated"] for c in calls)


def test_failure_fixed_at_step_3_is_labelled_3(done):
    wh, fw = done["wh"], done["framework"]
    run = _run(wh, fw, "s1")
    label = wh.label(run["id"])
    assert label is not None and label.method == "counterfactual" and label.verified
    assert (label.step, label.agent) == S.LABEL[fw]
    # cost accounting on the label: the analyzer calls, one replay, wall time
    # (AG2: the ranked fix of step 3 flipped too, then the coder's step 1 was corrected)
    assert label.cost.replays == (2 if fw == "ag2" else 1) and label.cost.llm_calls >= 2 and label.cost.seconds > 0
    proof = wh.rows("SELECT * FROM replays WHERE id = ?", [label.proof_replay_id])[0]
    assert (proof["intervention_step"], proof["success_before"], proof["success_after"]) == (S.LABEL[fw][0], False, True)
    fixed = wh.trajectory(proof["result_run_id"])
    assert fixed.parent_run_id == run["id"] and fixed.success is True
    # the replayed run says what it re-simulates (typed, from its own columns)
    assert fixed.replay.of_gateway_run_id == run["gateway_run_id"] and fixed.replay.prefix_identical
    assert (fixed.replay.intervention.step, fixed.replay.intervention.kind) == (S.LABEL[fw][0], "fix")
    assert fixed.recording.task == wh.trajectory(run["id"]).recording.task
    # the analyzer's calls went through the gateway: in llm_calls, and listed in order on the label
    asked = wh.rows("SELECT id, agent, purpose, model FROM llm_calls WHERE run_id = ? ORDER BY created_at",
                    [label.evidence.transcript_run_id])
    assert len(asked) >= 2 and [c["id"] for c in asked] == [x.call_id for x in label.evidence.transcript]
    assert {(c["agent"], c["purpose"], c["model"]) for c in asked} == {("analyzer", "annotation", "scripted/flows-analyzer")}


def test_later_fix_also_works_but_the_earliest_step_is_the_label(done):
    wh, fw = done["wh"], done["framework"]
    run = _run(wh, fw, "s2")
    label = wh.label(run["id"])
    assert label is not None and label.verified and label.step == 3
    tried = {r["intervention_step"]: r["success_after"]
             for r in wh.rows("SELECT * FROM replays WHERE run_id = ? AND purpose = 'counterfactual'"
                              " AND intervention_kind = 'fix'", [run["id"]])}
    assert tried == S.TRIED_S2[fw]  # the analyzer's ranked (later) step worked too
    assert label.cost.replays == len(S.TRIED_S2[fw])


def test_unresolvable_failure_is_stored_unresolved(done):
    wh, fw = done["wh"], done["framework"]
    run = _run(wh, fw, "s3")
    assert wh.label(run["id"]) is None
    unresolved = wh.rows("SELECT * FROM unresolved WHERE run_id = ?", [run["id"]])
    assert len(unresolved) == 1 and unresolved[0]["method"] == "counterfactual"
    assert unresolved[0]["cost_replays"] >= 1 and len(unresolved[0]["replay_ids"]) == unresolved[0]["cost_replays"]
    replays = wh.rows("SELECT success_after FROM replays WHERE run_id = ?", [run["id"]])
    assert replays and all(r["success_after"] is False for r in replays)


def test_injection_flips_the_success_labelled_by_construction(done):
    wh, fw = done["wh"], done["framework"]
    success = _run(wh, fw, "s4")
    rows = wh.rows("SELECT a.run_id FROM labels a JOIN runs r ON r.id = a.run_id "
                   "WHERE a.method = 'fault_injection' AND r.parent_run_id = ?", [success["id"]])
    assert len(rows) == 1
    corrupted = wh.trajectory(rows[0]["run_id"])
    label = wh.label(corrupted.id)
    assert corrupted.success is False and (label.agent, label.step) == S.INJECTED_STEP[fw]
    assert label.verified and label.metadata["source_run_id"] == success["id"]
    assert label.cost.replays == 1 and label.cost.llm_calls >= 1
    perturber_calls = wh.rows("SELECT id, agent, purpose FROM llm_calls WHERE run_id = ? ORDER BY created_at",
                              [label.evidence.transcript_run_id])
    assert [c["id"] for c in perturber_calls] == [x.call_id for x in label.evidence.transcript] and perturber_calls
    assert {(c["agent"], c["purpose"]) for c in perturber_calls} == {("perturber", "annotation")}
    # the corrupted run is a replay: not queued for counterfactual search
    assert not wh.rows("SELECT 1 FROM failures WHERE id = ?", [corrupted.id])
    table = done["report"].render()
    assert "fault_injection" in table and "SELECT" in table


def test_rerun_writes_no_duplicate_rows(done, warehouse_dir):
    wh, fw = done["wh"], done["framework"]

    def counts():
        return {t: (wh.count(t), wh.rows(f"SELECT count(*) AS n FROM raw_{t}")[0]["n"]) for t in TABLES}

    before = counts()
    again = _run_pipeline(fw, warehouse_dir)
    assert all(r.cached for r in again.collected) and len(again.collected) == 4
    assert again.annotated == []  # every failure has its annotation, the success its injection replays
    assert counts() == before


def test_crashed_collection_resumes(prefect_harness, tmp_path, docker_sandbox, monkeypatch):
    """A task that raises ends the flow with that run missing; an infrastructure error (AdapterError) is
    retried; starting again runs only what the warehouse does not have."""
    from rootstep.adapters.base import AdapterError
    from rootstep.flows import collect as collect_module

    require_framework_image("ag2")
    S.register_all()
    model, agent_models = S.MODELS["ag2"]
    tasks = [S.scenario_task("s1"), S.scenario_task("s4")]
    real = collect_module.collect_run
    calls: list[str] = []

    def crashing(spec, session):
        calls.append(spec.task.task_id)
        if spec.task.task_id == "flows-s1":
            raise RuntimeError("the flow crashed here")
        if calls.count(spec.task.task_id) == 1:
            raise AdapterError("container died (simulated)")
        return real(spec, session)

    monkeypatch.setattr(collect_module, "collect_run", crashing)
    first = collect_module.collect(["ag2"], tasks=tasks, model=model, agent_models=agent_models, warehouse=str(tmp_path))
    by_task = {r.task_id: r for r in first.runs}
    assert "the flow crashed here" in by_task["flows-s1"].error and by_task["flows-s1"].run_id is None
    first_s4 = by_task["flows-s4"].run_id
    assert first_s4 is not None and calls.count("flows-s4") == 2  # retried once
    assert calls.count("flows-s1") == 1  # a RuntimeError is not an infrastructure error: no retry
    wh = Warehouse(str(tmp_path))
    assert wh.count("runs") == 1

    monkeypatch.setattr(collect_module, "collect_run", real)
    second = collect_module.collect(["ag2"], tasks=tasks, model=model, agent_models=agent_models, warehouse=str(tmp_path))
    by_task = {r.task_id: r for r in second.runs}
    assert by_task["flows-s4"].cached and by_task["flows-s4"].run_id == first_s4
    assert not by_task["flows-s1"].cached and by_task["flows-s1"].success is False
    assert wh.count("runs") == 2 and wh.rows("SELECT count(*) AS n FROM raw_runs")[0]["n"] == 2


def test_annotation_stages_run_at_once_only_off_the_local_cpu_model():
    from rootstep.flows.annotate import _one_after_another, side_by_side

    assert side_by_side(["openai/gpt-4o-mini", "scripted/perturber"])
    assert not side_by_side(["local/qwen2.5-coder-1.5b", "local/qwen2.5-coder-1.5b"])
    assert not side_by_side(["openai/gpt-4o-mini", "local/qwen2.5-coder-1.5b"])
    assert not side_by_side(["openai/gpt-4o-mini"])  # one stage: nothing to run beside it
    order: list[str] = []
    done = _one_after_another({"counterfactual": lambda: order.append("cf") or "a", "inject": lambda: order.append("inj") or "b"})
    assert order == ["cf", "inj"] and [v[0] for v in done.values()] == ["a", "b"] and all(v[1] >= 0 for v in done.values())
