"""Attribution methods (with scripted models through litellm), answer parsing, scoring, reward, training export."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rootstep.gateway import register_script
from rootstep.cli import app
from rootstep.tracers import (
    Scored,
    all_at_once,
    binary_search,
    evaluate,
    export_training,
    multi_granular_reward,
    parse_attribution,
    parse_half,
    parse_yes_no,
    random_baseline,
    score,
    step_by_step,
    trl_reward,
    verl_compute_score,
)
from rootstep.model import Step, Trajectory, Verdict
from rootstep.warehouse import Warehouse
from rootstep.traces.whowhen import import_paths

AGENTS = ["Orchestrator", "WebSurfer", "Assistant"]


def run_with(n: int, tool_every: int = 0) -> Trajectory:
    steps = [
        Step(index=i, agent="Computer_terminal" if tool_every and i % tool_every == tool_every - 1 else AGENTS[i % 3],
             kind="tool" if tool_every and i % tool_every == tool_every - 1 else "agent", content=f"content of step {i}")
        for i in range(n)
    ]
    return Trajectory(framework="ag2", benchmark="gsm8k", task_id="t", question="q?", ground_truth="42", steps=steps, verdict=Verdict(success=False))


@pytest.mark.parametrize(
    "answer,agent,step",
    [
        ("Agent Name: WebSurfer\nStep Number: 12\nReason for Mistake: clicked the wrong link", "WebSurfer", 12),
        ("**Agent Name:** `WebSurfer`\n**Step Number:** 3\n**Reason for Mistake:** x", "WebSurfer", 3),
        ("Agent Name: websurfer.\nStep Number: step 7", "WebSurfer", 7),
        ("Agent: Orchestrator (thought)\nStep: #4", "Orchestrator", 4),
        ("Mistake Agent: Assistant\nMistake Step: 10 (the 11th message)", "Assistant", 10),
        ("<think>the surfer erred</think><answer>WebSurfer | 5</answer>", "WebSurfer", 5),
        ('Here you go: {"mistake_agent": "Assistant", "mistake_step": "2", "reason": "bad math"}', "Assistant", 2),
        ("I think the mistake was made.\nAgent Name: WebSurfer\nStep Number: 0", "WebSurfer", 0),
    ],
)
def test_parse_real_world_answer_variants(answer: str, agent: str, step: int):
    parsed = parse_attribution(answer, AGENTS, 20)
    assert parsed.ok, parsed.error
    assert (parsed.agent, parsed.step) == (agent, step)


@pytest.mark.parametrize(
    "answer,problem",
    [
        ("The WebSurfer made a mistake somewhere.", "no step found"),
        ("Step Number: 3", "no agent found"),
        ("Agent Name: Librarian\nStep Number: 3", "not an agent of the run"),
        ("Agent Name: WebSurfer\nStep Number: 25", "outside the run"),
        ("Agent Name: WebSurfer\nStep Number: three", "no step found"),
    ],
)
def test_unparseable_answers_are_recorded_not_guessed(answer: str, problem: str):
    parsed = parse_attribution(answer, AGENTS, 20)
    assert not parsed.ok and problem in parsed.error
    assert parsed.agent is None or parsed.step is None


def test_yes_no_and_half_parsing():
    assert parse_yes_no("Decisive Error: Yes\nReason: wrong number") is True
    assert parse_yes_no("**Decisive Error:** No") is False
    assert parse_yes_no("I cannot tell.") is None
    assert parse_half("Half: upper\nReason: ...") == "upper"
    assert parse_half("It is in the first half.") == "lower"
    assert parse_half("Hard to say.") is None


def _scored(gold_step: int, pred_step: int | None, gold_agent: str = "A", pred_agent: str | None = "A", n: int = 20) -> Scored:
    return Scored("r", "f", "b", gold_agent, gold_step, n, ("A", "B"), pred_agent, pred_step)


def test_step_accuracy_is_exact_integer_equality():
    # The reference evaluation's substring match would count these as correct.
    assert not _scored(1, 10).step_correct
    assert not _scored(0, 10).step_correct
    assert not _scored(10, 1).step_correct
    assert _scored(10, 10).step_correct
    figures = score([_scored(1, 10), _scored(10, 10), _scored(3, 4), _scored(5, None, pred_agent=None)])
    assert figures["n"] == 4 and figures["parsed"] == 0.75
    assert figures["step_acc"] == 0.25
    assert figures["step_acc_pm1"] == 0.5
    assert figures["agent_acc"] == 0.75
    assert figures["mean_step_distance"] == pytest.approx((9 + 0 + 1) / 3)


def test_random_baseline_from_the_data():
    items = [_scored(0, None, n=4), _scored(5, None, n=10)]
    baseline = random_baseline(items, ks=(1,))
    assert baseline["agent_acc"] == pytest.approx(0.5)
    assert baseline["step_acc"] == pytest.approx((1 / 4 + 1 / 10) / 2)
    assert baseline["step_acc_pm1"] == pytest.approx((2 / 4 + 3 / 10) / 2)  # step 0 has one neighbour only


def test_multi_granular_reward_values():
    good = "<think>surfer clicked wrong</think><answer>WebSurfer | 12</answer>"
    assert multi_granular_reward(good, "WebSurfer", 12) == pytest.approx(1.0)
    assert multi_granular_reward(good, "WebSurfer", 13) == pytest.approx(0.5 * math.exp(-0.5) + 0.5)
    assert multi_granular_reward(good, "Orchestrator", 12) == pytest.approx(0.5)
    assert multi_granular_reward(good, "Orchestrator", 15) == pytest.approx(0.5 * math.exp(-4.5))
    assert multi_granular_reward("<answer>WebSurfer | 12</answer>", "WebSurfer", 12) == 0.0  # no <think>: format gate
    assert multi_granular_reward(good + " trailing", "WebSurfer", 12) == 0.0
    assert multi_granular_reward("WebSurfer | 12", "WebSurfer", 12) == 0.0
    assert trl_reward([good, [{"role": "assistant", "content": good}]], agent=["WebSurfer", "X"], step=[12, 12]) == pytest.approx([1.0, 0.5])
    assert verl_compute_score("rootstep", good, {"agent": "WebSurfer", "step": 12}) == pytest.approx(1.0)
    assert verl_compute_score("rootstep", good, "WebSurfer | 11") == pytest.approx(0.5 * math.exp(-0.5) + 0.5)


def test_all_at_once_through_litellm_with_a_plain_trace():
    register_script("aao-plain", ["Agent Name: solver\nStep Number: 1\nReason for Mistake: 6*7 is not 48"])
    trace = {
        "history": [
            {"role": "user", "content": "What is 6*7?"},
            {"name": "solver", "role": "assistant", "content": "6*7 = 48"},
            {"name": "checker", "role": "assistant", "content": "ok"},
        ],
        "question": "What is 6*7?",
        "ground_truth": "42",
    }
    result = all_at_once(trace, model="scripted/aao-plain")
    assert result.ok and (result.agent, result.step) == ("solver", 1)
    assert result.reason == "6*7 is not 48" and result.cost.llm_calls == 1


def test_all_at_once_records_unparseable_answers():
    register_script("aao-junk", ["I am not sure what happened here."])
    result = all_at_once(run_with(6), model="scripted/aao-junk")
    assert not result.ok and result.agent is None and result.step is None
    assert "unparseable" in result.error and result.answers == ["I am not sure what happened here."]


def test_prompts_show_ground_truth_only_when_asked():
    seen: list[str] = []

    def capture(messages, params):
        seen.append(messages[-1]["content"])
        return "Agent Name: WebSurfer\nStep Number: 1"

    register_script("aao-capture", capture)
    all_at_once(run_with(3), model="scripted/aao-capture", with_ground_truth=True)
    all_at_once(run_with(3), model="scripted/aao-capture", with_ground_truth=False)
    assert "CORRECT ANSWER" in seen[0] and "42" in seen[0]
    assert "CORRECT ANSWER" not in seen[1]
    assert "[step 2] Assistant:" in seen[0]


def test_step_by_step_stops_at_the_first_flagged_step():
    asked: list[int] = []

    def judge(messages, params):
        current = int(re.search(r"Look at step (\d+)", messages[-1]["content"]).group(1))
        asked.append(current)
        return "Decisive Error: Yes" if current in (4, 7) else "Decisive Error: No"

    register_script("sbs", judge)
    result = step_by_step(run_with(10, tool_every=3), model="scripted/sbs")
    assert (result.agent, result.step) == ("WebSurfer", 4)
    assert asked == [0, 1, 3, 4]  # tool steps 2, 5, 8 are never asked; nothing after the first yes
    assert result.cost.llm_calls == 4

    register_script("sbs-never", ["Decisive Error: No"], cycle=True)
    none = step_by_step(run_with(4), model="scripted/sbs-never")
    assert not none.ok and none.error == "no step flagged" and none.cost.llm_calls == 4


@pytest.mark.parametrize("target", range(9))
def test_binary_search_narrows_on_both_halves(target: int):
    ranges: list[tuple[int, int]] = []

    def oracle(messages, params):
        text = messages[-1]["content"]
        lo0, lo1 = map(int, re.search(r"lower half \(steps (\d+) to (\d+)\)", text).groups())
        up0, up1 = map(int, re.search(r"upper half \(steps (\d+) to (\d+)\)", text).groups())
        ranges.append((lo0, up1))
        return "Half: lower" if lo0 <= target <= lo1 else "Half: upper"

    register_script(f"bs-{target}", oracle)
    result = binary_search(run_with(9), model=f"scripted/bs-{target}")
    assert result.step == target and result.agent == AGENTS[target % 3]
    assert result.cost.llm_calls <= math.ceil(math.log2(9))
    assert ranges[0] == (0, 8) and all(a <= target <= b for a, b in ranges)


def test_binary_search_skips_tool_steps_and_stops_on_nonsense():
    register_script("bs-up", ["Half: upper"], cycle=True)
    result = binary_search(run_with(9, tool_every=3), model="scripted/bs-up")
    assert result.step == 7  # the last agent step; 8 is a tool step
    register_script("bs-junk", ["no idea"])
    junk = binary_search(run_with(9), model="scripted/bs-junk")
    assert not junk.ok and "neither half" in junk.error and junk.cost.llm_calls == 1


def _oracle_for(warehouse: Warehouse, right_every: int = 2):
    """A scripted tracer that answers the gold label for every other run, a wrong step otherwise."""
    gold = {r["question"]: r for r in warehouse.rows("SELECT r.question, l.agent, l.step FROM labels l JOIN runs r ON r.id = l.run_id")}
    order = sorted(gold)

    def answer(messages, params):
        text = messages[-1]["content"]
        question = next(q for q in order if q and q in text)
        g = gold[question]
        step = g["step"] if order.index(question) % right_every == 0 else g["step"] + 1
        return f"Agent Name: {g['agent']}\nStep Number: {step}"

    return answer


def test_evaluate_on_who_and_when_stores_predictions_and_resumes(whowhen_dir: Path, warehouse: Warehouse):
    import_paths([whowhen_dir / "Hand-Crafted"], warehouse)
    register_script("oracle-hc", _oracle_for(warehouse))
    result = evaluate(warehouse, "all_at_once", "scripted/oracle-hc", subset="hand-crafted", max_prompt_chars=400_000)
    assert result.predicted == 12 and result.resumed == 0
    [row] = result.table()
    assert row["n"] == 12 and row["agent_acc"] == 1.0 and row["step_acc"] == 0.5 and row["step_acc_pm1"] <= 1.0
    assert warehouse.count("labels") == 12  # predictions never become labels
    stored = warehouse.rows("SELECT count(*) AS n, bool_or(verified) AS any_verified FROM annotations WHERE method = 'tracer'")
    assert stored == [{"n": 12, "any_verified": False}]
    again = evaluate(warehouse, "all_at_once", "scripted/oracle-hc", subset="hand-crafted")
    assert again.predicted == 0 and again.resumed == 12 and again.table() == result.table()


def test_a_provider_refusal_is_recorded_for_that_run_and_the_evaluation_goes_on(whowhen_dir: Path, warehouse: Warehouse):
    import_paths([whowhen_dir / "Hand-Crafted"], warehouse)
    oracle = _oracle_for(warehouse)
    refused: list[str] = []

    def small_context(messages, params):  # the offline model refuses prompts over its context
        if len(messages[-1]["content"]) > 12_000:
            refused.append("x")
            raise ValueError("request (5120 tokens) exceeds the available context size (4096 tokens)")
        return oracle(messages, params)

    register_script("oracle-small-ctx", small_context)
    result = evaluate(warehouse, "all_at_once", "scripted/oracle-small-ctx", subset="hand-crafted", max_prompt_chars=400_000)
    assert result.predicted == 12 and refused  # every run has a prediction row, refused ones included
    errors = warehouse.rows("SELECT agent, step, notes FROM annotations WHERE method = 'tracer' AND agent IS NULL")
    assert len(errors) == len(refused) and all("provider error" in " ".join(e["notes"]) and "context size" in " ".join(e["notes"])
                                               and e["step"] is None for e in errors)
    [row] = result.table()
    assert row["n"] == 12 and row["agent_acc"] <= (12 - len(refused)) / 12  # a refusal counts as wrong, never guessed


def test_step_contents_are_cut_longest_first_to_fit_the_budget():
    from rootstep.prompts import MIN_STEP_CHARS, render_steps, step_cap

    assert step_cap([10, 20, 1000], 330) == 300  # the short steps stay whole, the long one takes what is left
    assert step_cap([500, 500], 400) == 200
    assert step_cap([10_000] * 200, 4000) == MIN_STEP_CHARS  # the floor wins when the budget cannot hold them
    assert step_cap([5, 5], 100) == MIN_STEP_CHARS
    t = Trajectory(framework="f", benchmark="b", task_id="t", question="q",
                   steps=[Step(index=i, agent="a", content=("x" * 30 if i % 2 else "y" * 3000)) for i in range(20)])
    rendered, truncated = render_steps(t, 0, 19, 6000)
    assert truncated and sum(len(s["content"]) for s in rendered) <= 6000 + 20 * 40  # the budget, plus each cut's marker
    assert all(s["content"] == "x" * 30 for s in rendered if s["index"] % 2)


def test_evaluate_cli_prints_the_table_and_plots(whowhen_dir: Path, tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    import_paths([whowhen_dir / "Hand-Crafted"], wh)
    register_script("oracle-cli", _oracle_for(wh, right_every=3))
    png = tmp_path / "eval.png"
    result = CliRunner().invoke(
        app, ["evaluate", "--method", "all_at_once", "--model", "scripted/oracle-cli", "--subset", "hand-crafted",
              "--plot", str(png), "-w", str(tmp_path / "wh")], catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stdout
    assert "whowhen-hand-crafted" in result.stdout and "all_at_once/scripted/oracle-cli+gt" in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = CliRunner().invoke(app, ["evaluate", "--method", "nope", "-w", str(tmp_path / "wh")])
    assert bad.exit_code == 2


def test_training_export_splits_by_task_and_targets_score_full_reward(whowhen_dir: Path, warehouse: Warehouse, tmp_path: Path):
    import_paths([whowhen_dir], warehouse)
    counts = export_training(warehouse, tmp_path / "sft", format="sft", test_fraction=0.25)
    assert counts["train"] + counts["test"] == 138 and counts["test"] > 10
    rows = {s: [json.loads(line) for line in (tmp_path / "sft" / f"{s}.jsonl").read_text().splitlines()] for s in ("train", "test")}
    train_tasks = {(r["benchmark"], r["task_id"]) for r in rows["train"]}
    assert not train_tasks & {(r["benchmark"], r["task_id"]) for r in rows["test"]}
    example = rows["train"][0]
    assert multi_granular_reward(example["messages"][1]["content"], example["agent"], example["step"]) == pytest.approx(1.0)
    assert "CORRECT ANSWER" not in example["messages"][0]["content"]

    grpo = export_training(warehouse, tmp_path / "grpo", format="grpo", test_fraction=0.25, with_ground_truth=True)
    assert grpo == counts  # the split depends on the task only
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "grpo" / "train.parquet")
    first = table.slice(0, 1).to_pylist()[0]
    assert first["reward_model"]["ground_truth"] == {"agent": first["agent"], "step": first["step"]}
    assert "CORRECT ANSWER" in first["prompt"][0]["content"]
    with pytest.raises(ValueError, match="test_fraction"):
        export_training(warehouse, tmp_path / "x", test_fraction=1.5)
