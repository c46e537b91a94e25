"""Bad input to the flow commands (`pipeline`, `collect`, `annotate`, `deploy`, `backfill`) is refused as
a usage error naming the option, before Prefect starts and before anything is written."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rootstep.cli import app

runner = CliRunner()


def _invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.mark.parametrize("command", ["pipeline", "collect", "annotate", "deploy"])
def test_unknown_framework_is_a_usage_error(command, tmp_path):
    wh = tmp_path / "wh"
    result = _invoke(command, "--framework", "ag2", "--framework", "autogpt", "--warehouse", str(wh))
    assert result.exit_code == 2, result.output
    assert "--framework 'autogpt': unknown framework; known: " in result.output
    assert "smolagents" in result.output and "Traceback" not in result.output
    assert not wh.exists()


def test_backfill_checks_the_framework_too(tmp_path):
    bench = tmp_path / "b.jsonl"
    bench.write_text('{"id": "t1", "question": "1+1?", "answer": "2"}\n')
    result = _invoke("backfill", "-b", str(bench), "-v", "numeric", "-f", "nope", "--warehouse", str(tmp_path / "wh"))
    assert result.exit_code == 2 and "--framework 'nope': unknown framework" in result.output
    assert not (tmp_path / "wh").exists()


@pytest.mark.parametrize("command,spec", [("pipeline", "no-such-bench:2"), ("collect", "no-such-bench")])
def test_unknown_benchmark_is_a_usage_error(command, spec, tmp_path):
    result = _invoke(command, "--benchmark", spec, "--warehouse", str(tmp_path / "wh"))
    assert result.exit_code == 2, result.output
    assert "--benchmark 'no-such-bench': unknown benchmark 'no-such-bench'; known:" in result.output
    assert "gsm8k" in result.output and not (tmp_path / "wh").exists()


def test_benchmark_count_must_be_a_number(tmp_path):
    result = _invoke("pipeline", "--benchmark", "gsm8k:two", "--warehouse", str(tmp_path / "wh"))
    assert result.exit_code == 2 and "--benchmark 'gsm8k:two': use NAME or NAME:COUNT" in result.output


def test_collect_limit_must_be_positive(tmp_path):
    result = _invoke("collect", "--limit", "0", "--warehouse", str(tmp_path / "wh"))
    assert result.exit_code == 2 and "--limit 0: must be at least 1" in result.output
