"""The attribution methods that need no LLM provider: divergence, confidence, learned; `rootstep attribute`,
`rootstep tracer train`, the baselines beside every evaluation, and the prior of the counterfactual search.

Runs are hand-made with a known answer and stored in real warehouses (Parquet + DuckDB); the confidence
method reads token log-probabilities from stored LLM calls, or scores text under the real offline model.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rootstep.cli import app
from rootstep.tracers import (
    TracerError,
    confidence,
    cross_validate,
    divergence,
    evaluate,
    learned,
    load_model,
    rank_steps,
    run_tracer,
    train_model,
)
from rootstep.tracers._learned import MANIFEST_FILE, MODEL_FILE, labelled_examples
from rootstep.model import Annotation, LLMCall, Step, Trajectory, Verdict

runner = CliRunner()


def run(steps: list[tuple[str, str, str]], *, task: str = "t1", success: bool = False, parent: str | None = None,
        framework: str = "fw", benchmark: str = "bench", question: str = "How many widgets?", truth: str = "42",
        call_ids: bool = False) -> Trajectory:
    """A trajectory from (agent, kind, content) triples."""
    return Trajectory(
        framework=framework, benchmark=benchmark, task_id=task, question=question, ground_truth=truth,
        steps=[Step(index=i, agent=a, kind=k, content=c, call_ids=[f"call-{task}-{i}"] if call_ids and k == "agent" else [])
               for i, (a, k, c) in enumerate(steps)],
        verdict=Verdict(success=success, score=float(success)), parent_run_id=parent,
    )


def label(t: Trajectory, step: int, method: str = "human") -> Annotation:
    return Annotation(run_id=t.id, framework=t.framework, benchmark=t.benchmark, method=method,
                      agent=t.steps[step].agent, step=step, verified=True, annotator="test")


# --------------------------------------------------------------------------------------------- divergence

SHARED = [
    ("Planner", "agent", "Plan: read the inventory file, count the widgets in every row, add them up."),
    ("Coder", "agent", "```python\nimport csv\nrows = list(csv.reader(open('inventory.csv')))\nprint(len(rows))\n```"),
    ("terminal", "tool", "exitcode: 0 (execution succeeded)\nCode output: 12"),
]
GOOD_TAIL = [
    ("Coder", "agent", "```python\nprint(sum(int(r[2]) for r in rows[1:]))\n```"),
    ("terminal", "tool", "exitcode: 0 (execution succeeded)\nCode output: 42"),
    ("Checker", "agent", "The total is 42 widgets. TERMINATE"),
]
BAD_TAIL = [
    ("Coder", "agent", "The file has 12 rows; let's assume each row holds about 3 widgets, so roughly 36."),
    ("Checker", "agent", "Agreed, the total is 36 widgets. TERMINATE"),
]


def test_divergence_finds_the_step_where_the_failure_departs_from_a_stored_success(warehouse):
    failed, success = run(SHARED + BAD_TAIL), run(SHARED + GOOD_TAIL, success=True)
    other_task = run(SHARED[:1] + BAD_TAIL, task="t2", success=True)  # another task: never a counterpart
    warehouse.write_trajectories([failed, success, other_task])

    a = divergence(failed, warehouse=warehouse, run_id=failed.id)
    assert (a.agent_name, a.step_number) == ("Coder", 3) and a.ok
    assert a.details["counterpart"] == success.id and a.details["matched_steps"] == 3
    assert "departs at step 3 (Coder)" in a.reason and f"successful run {success.id}" in a.reason

    # through the command line, by run id prefix, as JSON
    out = runner.invoke(app, ["attribute", failed.id[:12], "--method", "divergence", "--json", "-w", str(warehouse.location)])
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    assert (got["agent_name"], got["step_number"], got["run_id"]) == ("Coder", 3, failed.id)


def test_divergence_prefers_the_counterfactual_fix_of_the_run_and_handles_edge_cases(warehouse):
    failed = run(SHARED + BAD_TAIL)
    # a sample that differs from step 1 on, and the run a counterfactual fix of step 3 produced
    sample = run([SHARED[0], ("Coder", "agent", "Let me open the spreadsheet with pandas first."), *GOOD_TAIL], success=True)
    fixed = run(SHARED + GOOD_TAIL, success=True, parent=failed.id)
    warehouse.write_trajectories([failed, sample, fixed])
    a = divergence(failed, warehouse=warehouse, run_id=failed.id)
    assert a.step == 3 and a.details["counterpart"] == fixed.id and a.details["counterparts_compared"] == 2

    # the environment answers differently first (tool step 2): the first agent step departing after it
    odd_tool = run(SHARED[:2] + [("terminal", "tool", "exitcode: 1 (execution failed)\nFileNotFoundError")] + BAD_TAIL)
    a = divergence(odd_tool, counterpart=run(SHARED + GOOD_TAIL, success=True))
    assert a.step == 3 and "first differ at tool step 2" in a.notes[0]

    # the failure stops where the success goes on: its last agent step
    a = divergence(run(SHARED[:2]), counterpart=run(SHARED + GOOD_TAIL, success=True))
    assert a.step == 1 and a.agent == "Coder"

    # identical runs: no departure, no guess
    a = divergence(run(SHARED + GOOD_TAIL), counterpart=run(SHARED + GOOD_TAIL, success=True))
    assert not a.ok and "does not depart" in a.error


def test_divergence_refuses_without_a_successful_counterpart(warehouse, tmp_path):
    failed = run(SHARED + BAD_TAIL)
    other_framework = run(SHARED + GOOD_TAIL, success=True, framework="otherfw")
    warehouse.write_trajectories([failed, other_framework])
    with pytest.raises(TracerError, match=r"no successful run of task 't1' \(fw, bench\) in .* to compare with"):
        divergence(failed, warehouse=warehouse)
    with pytest.raises(TracerError, match="succeeded: there is no failure"):
        divergence(run(SHARED + GOOD_TAIL, success=True), warehouse=warehouse)

    trace = tmp_path / "failed.json"
    trace.write_text(json.dumps({"question": "How many widgets?", "ground_truth": "42",
                                 "history": [{"name": a, "role": "assistant", "content": c} for a, _, c in SHARED + BAD_TAIL]}))
    out = runner.invoke(app, ["attribute", str(trace), "--method", "divergence", "-w", str(warehouse.location)])
    assert out.exit_code == 2 and "no successful run of task 'failed'" in out.output and "--counterpart" in out.output

    # the README's command: two files, no warehouse
    examples = Path(__file__).resolve().parent.parent / "examples" / "traces"
    out = runner.invoke(app, ["attribute", str(examples / "failed.json"), "--method", "divergence",
                              "--counterpart", str(examples / "succeeded.json"), "--json"])
    assert out.exit_code == 0, out.output
    got, known = json.loads(out.output), json.loads((examples / "failed.json").read_text())
    assert (got["agent_name"], got["step_number"]) == (known["mistake_agent"], int(known["mistake_step"])) == ("Coder", 3)

    # the evaluation stores the refusal as this run's result, with its reason
    warehouse.write_annotations([label(failed, 3)])
    result = evaluate(warehouse, "divergence", "unused")
    assert result.predicted == 1 and result.table()[0]["parsed"] == 0.0
    assert "no successful run of task 't1'" in result.errors[0]


def test_attribute_rejects_unknown_runs_and_bad_files(warehouse, tmp_path):
    out = runner.invoke(app, ["attribute", "run_doesnotexist", "--method", "learned", "-w", str(warehouse.location)])
    assert out.exit_code == 2 and "run_doesnotexist: no such file, and no run id in" in out.output
    broken = tmp_path / "broken.json"
    broken.write_text('{"history": [')
    out = runner.invoke(app, ["attribute", str(broken), "--method", "divergence", "-w", str(warehouse.location)])
    assert out.exit_code == 2 and f"{broken}: <json>: malformed JSON" in out.output
    missing = tmp_path / "nohistory.json"
    missing.write_text('{"question": "q"}')
    out = runner.invoke(app, ["attribute", str(missing), "--method", "learned", "-w", str(warehouse.location)])
    assert out.exit_code == 2 and f"{missing}: history: missing" in out.output


# --------------------------------------------------------------------------------------------- confidence


def call(t: Trajectory, step: int, logprobs: list[float] | None) -> LLMCall:
    response = {"choices": [{"index": 0, "message": {"role": "assistant", "content": t.steps[step].content}}]}
    if logprobs is not None:
        response["choices"][0]["logprobs"] = {"content": [{"token": f"t{k}", "logprob": v} for k, v in enumerate(logprobs)]}
    return LLMCall(run_id=t.id, framework=t.framework, benchmark=t.benchmark, agent=t.steps[step].agent,
                   request_hash=f"h{step}", counter=0, model="openai/some-model", provider="openai", step_index=step,
                   response=response)


def test_confidence_returns_the_sharpest_drop_from_recorded_logprobs_and_stores_the_scores(warehouse):
    t = run([("Planner", "agent", "Plan the count."), ("Coder", "agent", "Count the rows."),
             ("Coder", "agent", "Assume 3 widgets per row."), ("Checker", "agent", "So 36. TERMINATE")])
    logprobs = {0: [-0.2, -0.4, -0.3], 1: [-0.3, -0.2, -0.1], 2: [-2.5, -3.1, -2.2], 3: [-3.0, -3.4, -2.9]}
    calls = {i: call(t, i, lp) for i, lp in logprobs.items()}
    t = t.model_copy(update={"steps": [s.model_copy(update={"call_ids": [calls[s.index].id]}) for s in t.steps]})
    warehouse.write_trajectories([t], llm_calls=list(calls.values()))  # call ids never enter the run id

    a = confidence(t, warehouse=warehouse)
    # step 2 drops by 2.3 nats below the earlier mean; step 3 is lower still but barely below step 2's level
    assert (a.step, a.agent, a.model) == (2, "Coder", "recorded-logprobs")
    assert a.details["source"] == "recorded" and a.details["scores"]["2"]["tokens"] == 3
    assert a.details["scores"]["2"]["mean_logprob"] == pytest.approx(-2.6)
    assert "drops by" in a.reason and "at step 2" in a.reason
    surprise = confidence(t, warehouse=warehouse, criterion="surprise")
    assert surprise.step == 3  # the lowest confidence, not the sharpest drop
    assert rank_steps(t, "confidence", warehouse=warehouse) == [2, 3, 1, 0]

    # evaluation stores the per-step scores as the prediction's evidence
    warehouse.write_annotations([label(t, 2)])
    result = evaluate(warehouse, "confidence", "local/gemma-3-270m")
    assert result.table()[0]["step_acc"] == 1.0
    [stored] = warehouse.rows("SELECT metadata FROM annotations WHERE method = 'tracer'")
    assert json.loads(stored["metadata"])["details"]["scores"]["2"]["mean_logprob"] == pytest.approx(-2.6)


def test_confidence_needs_logprobs_for_every_step_or_a_local_model():
    t = run([("Planner", "agent", "Plan."), ("Coder", "agent", "Code.")])
    calls = [call(t, 0, [-0.1]), call(t, 1, None)]  # the second call has no logprobs
    t = t.model_copy(update={"steps": [s.model_copy(update={"call_ids": [calls[s.index].id]}) for s in t.steps]})
    with pytest.raises(TracerError, match="scores text under a local llama.cpp model"):
        confidence(t, calls=calls, model="openai/gpt-4o-mini")


def test_confidence_under_the_offline_local_model_flags_the_step_that_makes_no_sense():
    t = run([("Planner", "agent", "We need to compute 12 + 7 and then double the result."),
             ("Solver", "agent", "12 + 7 = 19."),
             ("Solver", "agent", "Purple elephants 7719 quantum banana zebra ministry of the seventh cheese."),
             ("Checker", "agent", "So the answer is 38.")], question="What is (12 + 7) * 2?")
    a = confidence(t, max_step_tokens=8)  # no calls: scored by local/gemma-3-270m through llama.cpp
    assert (a.step, a.model, a.details["source"]) == (2, "local/gemma-3-270m", "local")
    scores = {int(k): v["mean_logprob"] for k, v in a.details["scores"].items()}
    assert scores[2] < scores[1] - 2 and scores[2] < scores[3] - 2  # the nonsense is far less likely


def test_the_gguf_tokenizer_gives_llama_cpp_s_own_token_ids():
    from rootstep.gateway._local_model import engine, gguf_path
    from rootstep.tracers._spm import vocabulary

    llm, tokenizer = engine("gemma-3-270m"), vocabulary(gguf_path("gemma-3-270m"))
    for text in ["So the answer is 38.", "exitcode: 1 (execution failed) Traceback: KeyError: 'Street Address'",
                 "naïve café — 日本語 ✓", "Let's assume each row holds about 3 widgets, so roughly 36."]:
        ids = tokenizer.encode(text)
        as_text = llm.complete({"prompt": text, "max_tokens": 1, "n_probs": 3, "temperature": 0, "cache_prompt": False})
        as_ids = llm.complete({"prompt": [2] + ids, "max_tokens": 1, "n_probs": 3, "temperature": 0, "cache_prompt": False})
        assert as_text["usage"]["prompt_tokens"] == len(ids) + 1  # + <bos>
        top = [[(t["id"], round(t["logprob"], 3)) for t in r["choices"][0]["logprobs"]["content"][0]["top_logprobs"]]
               for r in (as_text, as_ids)]
        assert top[0] == top[1], text  # the model saw the same tokens


# --------------------------------------------------------------------------------------------- learned

WORK = ["Let me look at the data.", "I will write the code for this.", "Here is my analysis of the output.",
        "Checking the previous result now.", "Continuing with the next part of the plan."]


def rule_run(task: int, rng: random.Random) -> tuple[Trajectory, int]:
    """A run whose decisive step follows a learnable rule: the agent step right before a failing tool call.
    Agent steps before it run clean code; after it, agents go on talking."""
    n_agents = rng.randint(4, 7)
    decisive = rng.randrange(n_agents)
    steps: list[tuple[str, str, str]] = []
    for k in range(n_agents):
        agent = ["Analyst", "Engineer", "Reviewer"][rng.randrange(3)]
        steps.append((agent, "agent", f"{rng.choice(WORK)} (turn {k})"))
        if k == decisive:
            steps.append(("executor", "tool", "exitcode: 1 (execution failed)\nTraceback (most recent call last):\nKeyError: 'x'"))
        elif rng.random() < 0.5:
            steps.append(("executor", "tool", "exitcode: 0 (execution succeeded)\nCode output: ok"))
    t = run(steps, task=f"task-{task}", question=f"Question number {task}?")
    index = [i for i, s in enumerate(t.steps) if s.kind == "agent"][decisive]
    return t, index


@pytest.fixture
def rule_warehouse(warehouse):
    rng = random.Random(7)
    runs = [rule_run(k, rng) for k in range(40)]
    warehouse.write_trajectories([t for t, _ in runs])
    methods = ["human", "counterfactual", "fault_injection"]
    warehouse.write_annotations([label(t, step, methods[k % 3]) for k, (t, step) in enumerate(runs)])
    return warehouse, runs


def test_learned_tracer_learns_a_rule_and_beats_the_baselines_under_task_grouped_cv(rule_warehouse):
    wh, runs = rule_warehouse
    examples = labelled_examples(wh)
    assert {e.method for e in examples} == {"human", "counterfactual", "fault_injection"}
    result = evaluate(wh, "learned", "unused", folds=5)
    [row] = result.table()
    assert row["n"] == 40 and row["step_acc"] >= 0.9
    assert row["step_acc"] > row["const_step_acc"] + 0.5 and row["step_acc"] > row["random_step_acc"] + 0.5
    assert row["agent_acc"] >= row["step_acc"]
    # every run was predicted by a model that never saw its task: the folds partition the tasks
    predictions, folds = cross_validate(examples, folds=5)
    assert len(set(folds)) == 5 and all(predictions[e.run_id].details["fold"] == f for e, f in zip(examples, folds))
    assert result.annotator.startswith("learned/cv5-") and result.annotator.endswith("+gt")
    again = evaluate(wh, "learned", "unused", folds=5)  # same labels: resumed, nothing predicted twice
    assert (again.predicted, again.resumed) == (0, 40)


def test_train_saves_a_model_that_attributes_in_milliseconds_and_refuses_other_schema_versions(rule_warehouse, tmp_path):
    wh, runs = rule_warehouse
    out = runner.invoke(app, ["tracer", "train", "--folds", "4", "-w", str(wh.location)])
    assert out.exit_code == 0, out.output
    assert "on 40 labelled runs of 40 tasks" in out.output and "const step" in out.output
    [path] = list((Path(wh.root) / "models" / "learned").iterdir())
    manifest = json.loads((path / MANIFEST_FILE).read_text())
    assert manifest["schema_version"] == 1 and manifest["with_ground_truth"] is True
    assert manifest["training"]["label_methods"] == {"human": 14, "counterfactual": 13, "fault_injection": 13}
    assert sorted(r["run_id"] for r in json.loads((path / "training_runs.json").read_text())) == sorted(t.id for t, _ in runs)
    card = (path / "MODEL_CARD.md").read_text()
    assert "40 labelled runs of 40 tasks" in card and "constant step" in card and "with ground truth" in card

    fresh, decisive = rule_run(999, random.Random(99))
    a = learned(fresh, warehouse=wh)
    assert a.step == decisive and a.cost.seconds < 1.0 and a.cost.llm_calls == 0
    assert a.details["model_path"] == str(path) and "an error follows it" in a.reason
    assert rank_steps(fresh, "learned", warehouse=wh)[0] == decisive
    assert run_tracer("learned", fresh, warehouse=wh, model=str(path), api_base="ignored").step == decisive

    # trained twice on the same labels: the same model, not a second one
    assert runner.invoke(app, ["tracer", "train", "--folds", "4", "-w", str(wh.location)]).exit_code == 0
    assert len(list((Path(wh.root) / "models" / "learned").iterdir())) == 1
    listed = runner.invoke(app, ["tracer", "models", "-w", str(wh.location)])
    assert manifest["model_id"] in listed.output

    # the other setting was never trained
    with pytest.raises(TracerError, match="no learned model trained without ground truth.*--no-ground-truth"):
        learned(fresh, warehouse=wh, with_ground_truth=False)

    # a model directory from another schema version is refused before its pickle is opened
    old = tmp_path / "old-model"
    old.mkdir()
    (old / MANIFEST_FILE).write_text(json.dumps(manifest | {"schema_version": 0}))
    (old / MODEL_FILE).write_bytes(b"not a pickle that should ever be read")
    with pytest.raises(TracerError, match=r"old-model/manifest.json: schema_version: .* version 0; this rootstep reads version 1"):
        load_model(model=str(old))
    # a manifest that claims this version over a model file of another version
    (old / MANIFEST_FILE).write_text(json.dumps(manifest))
    import pickle

    (old / MODEL_FILE).write_bytes(pickle.dumps({"schema_version": 7, "scorer": None}))
    with pytest.raises(TracerError, match=r"old-model/model.pkl: schema_version: the file holds schema version 7"):
        load_model(model=str(old))
    trace = tmp_path / "fresh.json"
    trace.write_text(json.dumps({"history": [{"name": s.agent, "role": "assistant", "content": s.content} for s in fresh.steps]}))
    out = runner.invoke(app, ["attribute", str(trace), "--method", "learned", "--model", str(old)])
    assert out.exit_code == 2 and "model.pkl: schema_version" in out.output
    out = runner.invoke(app, ["attribute", str(trace), "--method", "learned", "--model", str(path), "--json"])
    assert out.exit_code == 0, out.output


def test_train_refuses_without_labels_to_learn_from(warehouse):
    out = runner.invoke(app, ["tracer", "train", "-w", str(warehouse.location)])
    assert out.exit_code == 2 and "labels: no verified labels to train on" in out.output
    with pytest.raises(TracerError, match="no learned model trained with ground truth"):
        learned(run(SHARED + BAD_TAIL), warehouse=warehouse)
    # labels that sit on tool steps only: nothing an agent-step scorer can learn
    t = run(SHARED + BAD_TAIL)
    warehouse.write_trajectories([t])
    warehouse.write_annotations([label(t, 2)])
    with pytest.raises(TracerError, match="no verified label on an agent step to learn from"):
        train_model(warehouse)


# --------------------------------------------------------------------------------------------- baselines


def test_baselines_are_fitted_on_the_other_folds(warehouse):
    # 12 tasks whose decisive step is always 1; a 13th whose is 0: the constant step is 1 for every fold
    runs = [run(SHARED + BAD_TAIL, task=f"k{k}") for k in range(13)]
    warehouse.write_trajectories(runs)
    warehouse.write_annotations([label(t, 0 if k == 12 else 1) for k, t in enumerate(runs)])
    result = evaluate(warehouse, "divergence", "unused", folds=13)
    [row] = result.table()
    assert row["const_steps"] == "1" and row["const_step_acc"] == pytest.approx(12 / 13)
    assert row["const_agent_acc"] == pytest.approx(12 / 13)  # Coder acts at step 1 of each run
    assert row["majority_agent_acc"] == pytest.approx(12 / 13)  # Coder is blamed most in the other folds


# --------------------------------------------------------------------------------------------- the prior


def test_a_prior_orders_the_analyzer_questions_and_the_label_stays_the_earliest():
    from rootstep.annotation import Budget, find_decisive_step

    from tests.test_annotation_core import Ledger, Recorder, at_step, decline, diag

    def answer(prompt: str, n: int) -> str:
        step = at_step(prompt)
        if step is None:
            return diag(5, fix="value = 7777")  # left alone, the analyzer blames the symptom with a wrong fix
        return diag(step, fix_needed=True) if step == 3 else decline()

    # without a prior: the analyzer's own pick (step 5) fails, then steps 0, 1, 3 are examined in order
    ledger = Ledger({3})
    plain = find_decisive_step(ledger.trajectory(), analyzer=Recorder("prior-none", answer).chat, replay=ledger.replay,
                               budget=Budget())
    assert plain.step == 3 and [a.diagnosis.step for a in plain.attempts] == [5, 3]

    # with a prior that ranks step 3 first: asked about step 3 first (one replay), then only 0 and 1 before it
    ledger = Ledger({3})
    analyzer = Recorder("prior-good", answer)
    result = find_decisive_step(ledger.trajectory(), analyzer=analyzer.chat, replay=ledger.replay, budget=Budget(),
                                prior=[3, 5, 0, 2])
    assert (result.step, result.agent, result.verified) == (3, "Checker", True)
    assert [at_step(p) for p in analyzer.prompts] == [3, 0, 1]
    assert [(a.diagnosis.step, a.diagnosis.source) for a in result.attempts] == [(3, "prior")]
    assert len(result.replays) < len(plain.replays)

    # a misleading prior costs more, but the label is still the earliest verified step
    ledger = Ledger({3})

    def late_fix(prompt: str, n: int) -> str:
        step = at_step(prompt)
        return diag(step, fix_needed=True) if step in (3, 5) else decline()

    analyzer = Recorder("prior-bad", late_fix)
    result = find_decisive_step(ledger.trajectory(), analyzer=analyzer.chat, replay=ledger.replay, budget=Budget(),
                                prior=[5, 6, 0])
    assert result.step == 3 and [a.diagnosis.step for a in result.attempts] == [5, 3]
    assert [at_step(p) for p in analyzer.prompts] == [5, 0, 1, 3]

    # a prior whose candidates are all judged correct: the analyzer then proposes steps itself, as without one
    ledger = Ledger({3})
    analyzer = Recorder("prior-declined", lambda p, n: diag(3) if at_step(p) is None else decline())
    result = find_decisive_step(ledger.trajectory(), analyzer=analyzer.chat, replay=ledger.replay, budget=Budget(),
                                prior=[6, 5, 4])
    assert result.step == 3 and [a.diagnosis.source for a in result.attempts] == ["ranked"]
    assert [at_step(p) for p in analyzer.prompts] == [6, 5, 4, None, 0, 1]
