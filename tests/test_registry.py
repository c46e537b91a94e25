"""The one `Registry` type behind every stage's registry: origins, entry-point plugins and their load errors,
`scoped()` copies for tests, and the CLI's choices read from the live registries (a tracer or trace format
registered after import is selectable by name; an unknown name is a usage error listing the known ones)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from rootstep.model import Origin, Registry, Step, Trajectory, UnknownName, Verdict, plugin_errors
from rootstep.annotation import Budget
from rootstep.cli import app
from rootstep.tracers import TRACERS, Attribution, tracer
from rootstep.warehouse import Warehouse
from rootstep.traces import FORMATS, TraceFormat, load_traces
from rootstep.traces.whowhen import load_file

REPO = Path(__file__).resolve().parent.parent
FAILED = REPO / "examples" / "traces" / "failed.json"


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "250"})


# ------------------------------------------------------------------------------------ the type


def test_origins_lookup_and_unknown_names():
    things: Registry[int] = Registry("thing")
    things.register("one", 1, origin=Origin.BUILTIN)
    things.register("two", 2)
    assert things.names() == ["one", "two"] and "two" in things and things["two"] == 2 and list(things) == ["one", "two"]
    assert things.entry("one").label == "built in" and things.entry("two").label == "registered in code"
    assert things.names(Origin.BUILTIN) == ["one"]
    with pytest.raises(UnknownName, match=r"unknown thing 'three'; known: one, two") as caught:
        things.get("three")
    assert isinstance(caught.value, KeyError) and caught.value.known == ["one", "two"]
    with pytest.raises(ValueError, match="thing 'one' is already registered"):
        things.register("one", 11, replace_existing=False)


def test_builtins_load_once_before_the_first_lookup():
    loads: list[str] = []
    things: Registry[str] = Registry("thing", builtins=lambda: (loads.append("b"), things.register("b", "B",
                                                                                                   origin=Origin.BUILTIN)))
    assert things.entry("b") is None  # nothing loaded yet
    assert things.get("b") == "B" and things.names() == ["b"] and loads == ["b"]


def test_scoped_gives_the_registry_back_as_it_was():
    things: Registry[int] = Registry("thing")
    things.register("kept", 1)
    with things.scoped() as scoped:
        scoped.register("temporary", 2)
        scoped.register("kept", 3)
        scoped.fail("group:broken", "broken", "ImportError: nope", origin=Origin.ENTRY_POINT, source="dist 1.0")
        assert things["kept"] == 3 and "temporary" in things and things.errors() == {"group:broken": "ImportError: nope"}
    assert things.names() == ["kept"] and things["kept"] == 1 and things.errors() == {}


def _distribution(site: Path, group: str, entry_points: dict[str, str], module: str) -> None:
    """A real installed distribution (a `.dist-info` folder importlib.metadata reads) with entry points."""
    info = site / "rootstep_registry_demo-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rootstep-registry-demo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items()))
    (site / "rootstep_registry_demo.py").write_text(textwrap.dedent(module))


def test_entry_points_load_with_their_origin_and_failures_are_reported(tmp_path, monkeypatch):
    group = "rootstep.registry_test_things"
    _distribution(tmp_path, group, {"good": "rootstep_registry_demo:GOOD", "bad": "rootstep_registry_demo:NOT_THERE",
                                    "odd": "rootstep_registry_demo:ODD"}, "GOOD = 42\nODD = 'forty-two'\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def adopt(ep: Any, obj: Any) -> tuple[str, int]:
        if not isinstance(obj, int):
            raise TypeError(f"{ep.value} is not a number")
        return ep.name, obj

    things: Registry[int] = Registry("thing", group=group, adopt=adopt)
    assert things.entry("good") is None  # loaded on first use
    assert things["good"] == 42 and things.names() == ["good"]
    good = things.entry("good")
    assert good.origin is Origin.ENTRY_POINT and good.label == "plugin rootstep-registry-demo 0.1"
    errors = things.errors()
    assert set(errors) == {f"{group}:bad", f"{group}:odd"}
    assert errors[f"{group}:bad"].startswith("AttributeError") and "NOT_THERE" in errors[f"{group}:bad"]
    assert errors[f"{group}:odd"] == "TypeError: rootstep_registry_demo:ODD is not a number"
    assert {f.origin for f in things.failures()} == {Origin.ENTRY_POINT}
    assert {f.source for f in things.failures()} == {"rootstep-registry-demo 0.1"}
    assert plugin_errors()[f"{group}:odd"] == errors[f"{group}:odd"]  # what `rootstep frameworks` prints
    with things.scoped():  # entry points stay loaded: what an import registered once is not lost
        things.register("extra", 7)
    assert things.names() == ["good"] and set(things.errors()) == {f"{group}:bad", f"{group}:odd"}


def test_every_stage_registry_is_one_type_and_knows_its_group():
    from rootstep.adapters import ADAPTERS
    from rootstep.annotation import PERTURBATIONS
    from rootstep.benchmarks import BENCHMARKS, VERIFIERS

    groups = {r.kind: r.group for r in (ADAPTERS, VERIFIERS, BENCHMARKS, TRACERS, FORMATS, PERTURBATIONS)
              if isinstance(r, Registry)}
    assert groups == {"framework adapter": "rootstep.adapters", "verifier": "rootstep.verifiers",
                      "benchmark": "rootstep.benchmarks", "tracer": "rootstep.tracers",
                      "trace format": "rootstep.trace_formats", "perturbation": "rootstep.perturbations"}
    for registry in (ADAPTERS, VERIFIERS, BENCHMARKS, TRACERS, FORMATS, PERTURBATIONS):
        assert registry.names() and all(e.origin is Origin.BUILTIN for e in registry.entries()), registry
    assert ADAPTERS.names(Origin.BUILTIN) == ["ag2", "smolagents", "metagpt", "owl", "aflow", "agentprune"]


# ------------------------------------------------------------------------------------ CLI choices


def _last_speaker(trace: Any, model: str, with_ground_truth: bool = True) -> Attribution:
    """Blames the last agent step (a simple, real rule: the answer step)."""
    last = [s for s in trace.steps if s.kind == "agent"][-1]
    return Attribution(method="last-speaker", model=model, agent=last.agent, step=last.index,
                       reason="the answer step", with_ground_truth=with_ground_truth)


def test_a_tracer_registered_in_a_test_is_selectable_from_the_cli():
    with TRACERS.scoped():
        tracer("last-speaker")(_last_speaker)
        assert TRACERS.entry("last-speaker").origin is Origin.CODE
        result = _invoke("attribute", str(FAILED), "--method", "last-speaker", "--json")
        assert result.exit_code == 0, result.output
        out = json.loads(result.output)
        last = [s for s in load_file(FAILED)[0].steps if s.kind == "agent"][-1]
        assert out["method"] == "last-speaker" and out["reason"] == "the answer step"
        assert (out["agent_name"], out["step_number"]) == (last.agent, last.index)
    result = _invoke("attribute", str(FAILED), "--method", "last-speaker")  # forgotten after the scope
    assert result.exit_code == 2
    assert "'last-speaker' is not one of all_at_once, step_by_step, binary_search" in " ".join(result.output.split())


def test_an_unknown_tracer_is_a_usage_error_naming_the_choices(tmp_path):
    for command in (["attribute", str(FAILED)], ["evaluate", "--warehouse", str(tmp_path / "wh")]):
        result = _invoke(*command, "-m", "no-such-method")
        text = " ".join(result.output.split())
        assert result.exit_code == 2, result.output
        assert "Invalid value for '--method' / '-m': 'no-such-method' is not one of" in text
        assert all(name in text for name in ("all_at_once", "divergence", "learned", "confidence"))
    assert not (tmp_path / "wh").exists()


def _chat_log(path: Path, data: Any, framework: str | None, benchmark: str | None) -> list[Trajectory]:
    """A made-up log format: {"chat-log": [{"who", "said"}], "question", "failed"}."""
    steps = [Step(index=i, agent=turn["who"], kind="agent", content=turn["said"]) for i, turn in enumerate(data["chat-log"])]
    return [Trajectory(framework=framework or "chat-log-team", benchmark=benchmark or "imported-traces",
                       task_id=path.stem, question=data["question"], steps=steps,
                       verdict=Verdict(success=not data["failed"]), source=str(path),
                       metadata={"trace": {"format": "chat-log"}})]


def _is_chat_log(path: Path, data: Any) -> tuple[bool, str]:
    ok = isinstance(data, dict) and isinstance(data.get("chat-log"), list)
    return ok, "" if ok else "no chat-log list"


def test_a_trace_format_registered_in_a_test_is_read_by_name_and_detected(tmp_path):
    log = tmp_path / "run7.json"
    log.write_text(json.dumps({"question": "2+2?", "failed": True, "chat-log": [
        {"who": "planner", "said": "Add the numbers."}, {"who": "solver", "said": "2+2 = 5"}]}))
    wh = tmp_path / "wh"
    with FORMATS.scoped():
        FORMATS.register("chat-log", TraceFormat(_chat_log, _is_chat_log))
        result = _invoke("import", "traces", str(log), "--format", "chat-log", "--warehouse", str(wh))
        assert result.exit_code == 0, result.output
        assert "run7.json: chat-log, 1 run(s), 2 step(s)" in result.output
        rows = Warehouse(str(wh)).rows("SELECT framework, task_id, success FROM runs")
        assert rows == [{"framework": "chat-log-team", "task_id": "run7", "success": False}]
        [detected] = load_traces(log)  # auto: tried after the built-ins, which all refuse it
        assert [s.agent for s in detected.steps] == ["planner", "solver"]
    result = _invoke("import", "traces", str(log), "--format", "chat-log", "--warehouse", str(wh))
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "'chat-log' is not one of auto, ag2, inspect, otlp" in text
    with pytest.raises(Exception, match="in no known trace format"):
        load_traces(log)


# ------------------------------------------------------------------------------------ shared options


def test_budget_presets_are_the_commands_defaults():
    from rootstep.flows.cli import budget_options

    assert Budget.for_pipeline() == Budget(max_reasks=1, max_candidates=3, max_seconds=3600.0)  # the outer wall clock
    assert Budget.for_annotate() == Budget(max_reasks=1, max_candidates=3)
    got: list[Budget] = []
    toy = typer.Typer()

    @toy.command()
    @budget_options(Budget.for_pipeline())
    def run(name: str = typer.Option("x"), budget: Any = None) -> None:
        got.append(budget)

    assert CliRunner().invoke(toy, []).exit_code == 0
    assert CliRunner().invoke(toy, ["--max-seconds", "5", "--max-replays", "2"]).exit_code == 0
    assert CliRunner().invoke(toy, ["--max-search-tokens", "9000"]).exit_code == 0
    assert got == [Budget.for_pipeline(), Budget.for_pipeline(max_seconds=5.0, max_replays=2),
                   Budget.for_pipeline(max_tokens=9000)]
    bad = CliRunner().invoke(toy, ["--max-seconds", "0"])
    assert bad.exit_code == 2 and "--max-seconds" in bad.output and "greater than 0" in bad.output

    def defaults(command: str) -> dict[str, Any]:
        from typer.main import get_command

        params = get_command(app).commands[command].params
        return {p.name: p.default for p in params if p.name in ("max_seconds", "max_candidates", "max_replays")}

    assert defaults("pipeline") == {"max_seconds": 3600.0, "max_candidates": 3, "max_replays": None}
    assert defaults("annotate") == {"max_seconds": None, "max_candidates": 3, "max_replays": None}
