"""The `rootstep` command line, run as a user runs it (a real subprocess for the main path)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from rootstep.cli import app

runner = CliRunner()
ROOTSTEP = [sys.executable, "-m", "rootstep"]


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_import_sql_show_stats_export_end_to_end(whowhen_dir: Path, tmp_path: Path):
    wh = str(tmp_path / "wh")
    env_args = ["--warehouse", wh]
    done = subprocess.run([*ROOTSTEP, "import", "whowhen", str(whowhen_dir), *env_args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "imported 138 runs and 138 labels" in done.stdout

    again = subprocess.run([*ROOTSTEP, "import", "whowhen", str(whowhen_dir), *env_args], capture_output=True, text=True)
    assert "imported 0 runs and 0 labels from 138 file(s) (138 runs and 138 labels were already" in again.stdout

    count = subprocess.run([*ROOTSTEP, "sql", "select count(*) as n from labels", "-f", "csv", *env_args], capture_output=True, text=True)
    assert count.stdout.splitlines() == ["n", "138"]

    as_json = invoke("sql", "select framework, count(*) as n from labels group by 1 order by 1", "--format", "json", *env_args)
    assert json.loads(as_json.stdout) == [{"framework": "captainagent", "n": 126}, {"framework": "magentic-one", "n": 12}]

    table = invoke("sql", "select method, count(*) as n from labels group by 1", *env_args)
    assert "human" in table.stdout and "138" in table.stdout

    source = str(whowhen_dir / "Hand-Crafted" / "6.json")
    run_id = json.loads(invoke("sql", f"select id from runs where source = '{source}'", "-f", "json", *env_args).stdout)[0]["id"]
    shown = invoke("show", run_id[:12], "--width", "80", *env_args)
    assert shown.exit_code == 0
    assert "DECISIVE ERROR (human)" in shown.stdout and "step 5" in shown.stdout.split("DECISIVE ERROR")[1][:40]

    stats = invoke("stats", *env_args)
    assert "captainagent" in stats.stdout and "138 labels" in stats.stdout

    out = tmp_path / "out"
    assert "wrote 138 Who&When files" in invoke("export", "whowhen", str(out), *env_args).stdout
    assert json.loads((out / "Hand-Crafted" / "6.json").read_text()) == json.loads(Path(source).read_text())
    pq_out = invoke("export", "parquet", str(tmp_path / "pq"), *env_args)
    assert "labels" in pq_out.stdout and (tmp_path / "pq" / "labels.parquet").exists()
    jsonl = invoke("export", "jsonl", str(tmp_path / "runs.jsonl"), "--where", "framework = 'magentic-one'", *env_args)
    assert "wrote 12 runs" in jsonl.stdout


def test_bad_file_is_reported_and_nothing_is_written(tmp_path: Path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps({"history": [{"name": "a", "content": "x"}], "mistake_agent": "a", "mistake_step": "0"}))
    (folder / "bad.json").write_text(json.dumps({"history": [{"name": "a", "content": "x"}], "mistake_agent": "a", "mistake_step": "9"}))
    wh = str(tmp_path / "wh")
    failed = subprocess.run([*ROOTSTEP, "import", "whowhen", str(folder), "-w", wh], capture_output=True, text=True)
    assert failed.returncode == 2
    assert "bad.json: mistake_step: 9 is outside the history (valid steps are 0..0)" in failed.stderr
    assert "Nothing was written" in failed.stderr
    assert invoke("sql", "select count(*) as n from runs", "-f", "csv", "-w", wh).stdout.splitlines() == ["n", "0"]

    skipped = invoke("import", "whowhen", str(folder), "--skip-invalid", "-w", wh)
    assert "imported 1 runs and 1 labels" in skipped.stdout


def test_bad_sql_and_unknown_run_fail_cleanly(tmp_path: Path):
    wh = str(tmp_path / "wh")
    bad = invoke("sql", "select nope from labels", "-w", wh)
    assert bad.exit_code == 2 and "SQL:" in bad.stderr and "nope" in bad.stderr
    missing = invoke("show", "run_doesnotexist", "-w", wh)
    assert missing.exit_code == 2 and "no run id starts with 'run_doesnotexist'" in missing.stderr


def test_missing_path_is_a_clear_error(tmp_path: Path):
    result = invoke("import", "whowhen", str(tmp_path / "nowhere"), "-w", str(tmp_path / "wh"))
    assert result.exit_code == 2 and "nowhere: <path>: no such file or folder" in result.stderr


def test_csv_output_quotes_only_when_needed(tmp_path: Path):
    result = invoke("sql", "select 'a,b' as x, 1 as y, NULL as z", "-f", "csv", "-w", str(tmp_path / "wh"))
    assert list(csv.reader(io.StringIO(result.stdout))) == [["x", "y", "z"], ["a,b", "1", ""]]


def test_the_command_line_gives_its_ephemeral_prefect_server_time_to_start(monkeypatch):
    """Prefect's 20 s default to start the ephemeral server was too short on a loaded 2-core machine (an
    `annotate` beside a collection failed with "Timed out while attempting to connect to ephemeral Prefect
    API server"): the command line sets 180 s unless the environment says otherwise."""
    import os

    from rootstep import cli

    def run(env_value):
        if env_value is None:
            monkeypatch.delenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", raising=False)
        else:
            monkeypatch.setenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", env_value)
        monkeypatch.setattr(sys, "argv", ["rootstep", "--help"])
        try:
            cli.run_cli()
        except SystemExit:
            pass
        return os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"]

    assert run(None) == cli.EPHEMERAL_PREFECT_STARTUP_S == "180"
    assert run("45") == "45"


def test_stats_counts_collected_runs_apart_from_replays(tmp_path: Path):
    """Issue 31: three collected GSM8K runs and the eight re-simulated runs of their replays showed as 11 runs."""
    from rootstep.model import Step, Trajectory, Verdict
    from rootstep.warehouse import Warehouse

    def run(task: str, success: bool, parent: str | None = None) -> Trajectory:
        return Trajectory(framework="ag2", benchmark="gsm8k", task_id=task, question="q", ground_truth="1",
                          steps=[Step(index=0, agent="user", kind="human", content="q"),
                                 Step(index=1, agent="coder", kind="agent", content=f"answer of {task}")],
                          verdict=Verdict(success=success, score=float(success)), parent_run_id=parent)

    collected = [run("t1", False), run("t2", False), run("t3", True)]
    replays = [run(f"t1-{i}", i % 2 == 0, parent=collected[i % 2].id) for i in range(8)]
    wh = Warehouse(str(tmp_path / "wh"))
    wh.write_trajectories([*collected, *replays])
    out = runner.invoke(app, ["stats", "--warehouse", str(tmp_path / "wh")], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    row = next(line for line in out.output.splitlines() if "gsm8k" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert cells == ["ag2", "gsm8k", "3", "1", "2", "0", "6", "8"]  # runs, successes, failures, unverified, steps, replayed
    assert ": 3 runs, 6 steps," in out.output.replace("\n", " ")


def test_show_prints_the_replays_that_prove_a_label(tmp_path: Path):
    """`rootstep show RUN` prints the run's replays (the README's "the failed run, its decisive step, the
    replays"): the fix that flipped it, marked, and its controls, each with the step it changed."""
    from ._ui_support import build_warehouse

    built = build_warehouse(tmp_path)
    run_id = built["counterfactual_run"]
    replays = built["warehouse"].rows("SELECT intervention_kind AS kind, flipped FROM replays WHERE run_id = ?", [run_id])
    assert any(r["flipped"] for r in replays) and any(r["kind"] == "control" for r in replays)
    out = runner.invoke(app, ["show", run_id, "--warehouse", built["location"], "--width", "60"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    shown = out.output.split("replays (the proof")[1]
    rows = [line for line in shown.splitlines() if line.startswith("│ ") and line.split("│")[1].strip().isdigit()]
    assert len(rows) == len(replays)
    assert sum("(flip)" in r for r in rows) == sum(bool(r["flipped"]) for r in replays)
    assert sum("counterfactual control" in r for r in rows) == sum(r["kind"] == "control" for r in replays)

    injected = runner.invoke(app, ["show", built["success_run"], "--warehouse", built["location"]], env={"COLUMNS": "200"})
    assert injected.exit_code == 0 and "fault_injection corruption" in injected.output.split("replays (the proof")[1]
    [imported] = built["warehouse"].rows("SELECT id FROM runs WHERE source <> 'rootstep' LIMIT 1")
    nothing = runner.invoke(app, ["show", imported["id"], "--warehouse", built["location"]], env={"COLUMNS": "200"})
    assert nothing.exit_code == 0 and "replays (the proof" not in nothing.output and "no replays" in nothing.output


def test_registry_options_list_their_names_in_help():
    """`--method` and `import traces --format` say which names they take, on an 80-column terminal too."""
    from rootstep.tracers._methods import TRACERS
    from rootstep.traces.detect import FORMATS

    for args, names in ((["attribute", "--help"], TRACERS.names()), (["import", "traces", "--help"], ["auto", *FORMATS.names()])):
        out = runner.invoke(app, args, env={"COLUMNS": "80"})
        assert out.exit_code == 0, out.output
        flat = " ".join(line.strip("│ ").strip() for line in out.output.splitlines())
        missing = [n for n in names if n not in flat]
        assert not missing, (args, missing)


def test_a_table_too_wide_for_the_terminal_is_printed_one_record_per_row():
    """`rootstep quality` on an 80-column terminal cut every header to a few letters; a table whose columns do
    not fit side by side is printed as records (each column's name beside its value), a narrow one as a grid."""
    import pyarrow as pa
    from rich.console import Console

    from rootstep._render import print_arrow_table

    wide = pa.table({name: [i, i + 1] for i, name in enumerate(
        ["framework", "counterfactual_labels", "verifier_suspect", "injection_attempts", "labels_per_100_runs",
         "live_calls_per_label", "mean_label_position"])} | {"benchmark": ["whowhen-algorithm-generated", "gsm8k"]})
    for width in (80, 120):
        buf = io.StringIO()
        print_arrow_table(Console(file=buf, width=width), wide, title="yield")
        lines = buf.getvalue().splitlines()
        assert max(len(line) for line in lines) <= width
        for n, row in enumerate(wide.to_pylist(), 1):
            record = buf.getvalue().split(f"row {n}")[1].split("row ")[0]
            for name, value in row.items():
                assert any(line.split() == [name, str(value)] for line in record.splitlines()), (name, value)
    narrow = pa.table({"framework": ["ag2"], "labels": [4]})
    buf = io.StringIO()
    print_arrow_table(Console(file=buf, width=80), narrow)
    assert "row 1" not in buf.getvalue() and "┃ framework ┃ labels ┃" in buf.getvalue()


def test_one_import_command_reads_every_format_and_keeps_the_labels_a_file_gives(whowhen_dir: Path, tmp_path: Path):
    """`rootstep import PATH...` with no subcommand: a folder holding Who&When logs (labelled), a plain trace
    and an OpenTelemetry export is read file by file in its own format, the Who&When labels stored as human
    labels; `import whowhen` and `import traces` are the same command, so importing again adds nothing."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    hand = sorted((whowhen_dir / "Hand-Crafted").glob("*.json"))[:2]
    for path in hand:
        (folder / f"hc-{path.name}").write_bytes(path.read_bytes())
    (folder / "plain.json").write_text(json.dumps({"question": "1+1?", "ground_truth": "2", "history": [
        {"role": "user", "content": "1+1?"}, {"name": "solver", "role": "assistant", "content": "3"}]}))
    otlp = Path(__file__).parent / "fixtures" / "traces" / "real" / "agent_framework.genai.otlp.json"
    (folder / otlp.name).write_bytes(otlp.read_bytes())
    wh = str(tmp_path / "wh")

    done = subprocess.run([*ROOTSTEP, "import", str(folder), "-w", wh], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "agent_framework.genai.otlp.json: otlp, 1 run(s)" in done.stdout
    assert "plain.json: whowhen, 1 run(s)" in done.stdout
    assert "imported 4 runs and 2 labels from 4 file(s)" in done.stdout
    labels = json.loads(invoke("sql", "select framework, method, verified from labels order by 1", "-f", "json",
                               "-w", wh).stdout)
    assert labels == [{"framework": "magentic-one", "method": "human", "verified": True}] * 2

    for alias in (["whowhen", str(folder / "plain.json")], ["traces", str(folder)], ["--format", "otlp", str(otlp)]):
        again = invoke("import", *alias, "-w", wh)
        assert again.exit_code == 0 and "imported 0 runs and 0 labels" in again.stdout, (alias, again.stdout)

    wrong = invoke("import", "--format", "whowhen", str(otlp), "-w", wh)
    assert wrong.exit_code == 2 and "history: missing" in wrong.stderr and "Nothing was written" in wrong.stderr
