"""The command line mounts every stage's commands one way, and every command reads its defaults from one
object (`rootstep.flows.DEFAULTS`); `rootstep annotate` runs the one `annotate` flow."""

from __future__ import annotations

import importlib
from pathlib import Path

import pydantic
import pytest
import typer
from typer.testing import CliRunner

from rootstep.cli import STAGE_COMMANDS, app, mount
from rootstep.flows import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def _command(path: str):
    group = typer.main.get_command(app)
    for word in path.split():
        group = group.commands[word]
    return group


def test_every_stage_declares_its_commands_and_each_is_mounted():
    stage_clis = sorted(f"rootstep.{p.parent.name}.cli" for p in ROOT.glob("*/cli.py") if p.parent.name != "rootstep")
    assert sorted(STAGE_COMMANDS) == stage_clis
    for module in STAGE_COMMANDS:
        commands = importlib.import_module(module).COMMANDS
        assert commands, module
        for path in commands:
            assert _command(path).name == path.split()[-1], (module, path)


def test_a_command_path_outside_the_three_groups_is_refused():
    with pytest.raises(ValueError, match="only `rootstep`, `rootstep import` and `rootstep export`"):
        mount("tracer train extra", lambda: None)


def test_every_command_reads_the_same_defaults():
    from rootstep.flows.deploy import Schedule, default_schedules

    assert (ROOT / "flows" / "cli.py").read_text().count('"--framework"') == 1  # one declaration of the option
    for command in ("pipeline", "collect", "deploy", "backfill"):
        out = runner.invoke(app, [command, "--help"], env={"COLUMNS": "400"}).output
        assert f"(default {', '.join(DEFAULTS.frameworks)})" in out, command
    for command in ("pipeline", "deploy"):
        out = runner.invoke(app, [command, "--help"], env={"COLUMNS": "400"}).output
        assert f"(default {DEFAULTS.benchmark_help()})" in out, command
    collect_help = runner.invoke(app, ["collect", "--help"], env={"COLUMNS": "400"}).output
    assert f"[default: {DEFAULTS.collect_benchmark}]" in collect_help
    assert default_schedules()[0].cron == Schedule(name="x").cron == DEFAULTS.cron
    assert default_schedules()[0].parameters["model"] == DEFAULTS.model
    assert DEFAULTS.annotator_for(DEFAULTS.model) == DEFAULTS.annotator_model
    assert DEFAULTS.annotator_for("openai/gpt-4o-mini") == "openai/gpt-4o-mini"
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        DEFAULTS.model = "other"  # one object, not changed behind the commands' backs


def test_annotate_runs_the_one_annotate_flow_with_the_stages_asked_for(monkeypatch, tmp_path):
    import rootstep.flows.annotate as flows_annotate

    calls = []

    def spy(stages, analyzer_model, perturber_model, **options):
        calls.append((list(stages), analyzer_model, perturber_model, options))
        return flows_annotate.AnnotateReport()

    monkeypatch.setattr(flows_annotate, "annotate", spy)
    wh = str(tmp_path / "wh")
    result = runner.invoke(app, ["annotate", "--method", "inject", "--perturber-model", "none", "-f", "ag2",
                                 "--warehouse", wh])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["annotate", "--recheck", "2", "--warehouse", wh])
    assert result.exit_code == 0, result.output
    (stages, analyzer, perturber, options), (both, _, default_perturber, second) = calls
    assert stages == ["inject"] and perturber is None and options["frameworks"] == ["ag2"]
    assert options["warehouse"] == wh and analyzer == DEFAULTS.annotator_model
    assert both == ["counterfactual", "inject"] and default_perturber == DEFAULTS.annotator_model
    assert second["recheck"] == 2
