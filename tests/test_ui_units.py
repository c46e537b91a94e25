"""The web UI's parts without a browser: alignment, the SQL sandbox, uploads, secrets, the page data."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from rootstep.ui import QueryRefused, align, parse_upload, run_query, sandbox_connection
from rootstep.ui._corpus import CorpusFilter, corpus_page
from rootstep.ui._evaluation import evaluation_view
from rootstep.ui._run import run_view
from rootstep.ui._safety import env_secrets, is_loopback, redact_text
from rootstep.model import InputError, Intervention, Step, Trajectory

from ._ui_support import SHARED, UPLOAD_FILE, Bakery, WRONG_PLAN, build_warehouse


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_warehouse(tmp_path_factory.mktemp("ui-units"))


# ------------------------------------------------------------------------------------------ alignment


def _run(contents: list[str]) -> Trajectory:
    return Trajectory(framework="f", benchmark="b", task_id="t",
                      steps=[Step(index=i, agent="a" if i % 2 else "b", content=c) for i, c in enumerate(contents)])


def test_align_collapses_the_identical_prefix_and_marks_the_intervention_and_divergence():
    aligned = align(_run(["q", "plan", "code", "out", "done"]), _run(["q", "plan", "fixed code", "out2", "done", "more"]), 2)
    assert [r.index for r in aligned.prefix] == [0, 1]
    assert [r.index for r in aligned.rows] == [2, 3, 4, 5]
    forced = aligned.rows[0]
    assert forced.forced and forced.divergence and not forced.same
    assert aligned.rows[2].same and not aligned.rows[2].divergence  # identical again after the divergence: shown, not collapsed
    assert aligned.rows[3].left is None and aligned.rows[3].right.content == "more"
    assert aligned.changed == 3


def test_align_shows_a_forced_step_even_when_it_equals_the_original():
    aligned = align(_run(["q", "same"]), _run(["q", "same"]), 1)
    assert [r.index for r in aligned.prefix] == [0]
    assert aligned.rows[0].forced and aligned.rows[0].same


def test_align_of_a_real_replay_starts_at_the_fixed_step():
    team = Bakery(WRONG_PLAN, "t")
    fixed, _, _ = team.replay(Intervention(run_id=team.original.id, step=2, new_content="```python\nprint((12 + 8) * 6)\n```"))
    aligned = align(team.original, fixed, 2)
    assert [r.index for r in aligned.prefix] == [0, 1]
    assert aligned.rows[0].forced and "120" in aligned.rows[1].right.content and "80" in aligned.rows[1].left.content


# ------------------------------------------------------------------------------------------ SQL sandbox


def test_sandbox_views_answer_like_the_warehouse_catalog(built):
    wh = built["warehouse"]
    for sql in ("SELECT id, success, n_steps FROM runs ORDER BY id", "SELECT run_id, agent, step, method FROM labels ORDER BY run_id",
                "SELECT count(*) AS n FROM steps", "SELECT id, flipped FROM replays ORDER BY id"):
        result = run_query(wh, sql)
        assert [tuple(r.values()) for r in wh.rows(sql)] == result.rows
    assert run_query(wh, "SELECT count(*) FROM labels").rows == [(4,)]


def test_sandbox_duckdb_itself_refuses_file_access_with_its_configuration_locked(built, tmp_path):
    """The statement check is bypassed here: the connection alone must refuse."""
    target = tmp_path / "leak.csv"
    con = sandbox_connection(built["warehouse"])
    try:
        for sql in (f"COPY (SELECT * FROM runs) TO '{target}'", f"COPY runs TO '{built['location']}/copied.parquet'",
                    "SELECT * FROM read_csv('/etc/passwd')", "SELECT * FROM read_text('/etc/hostname')",
                    f"SELECT * FROM read_parquet('{built['location']}/runs/*/*/*.parquet')", "SELECT * FROM glob('/*')",
                    f"ATTACH '{tmp_path / 'x.duckdb'}' AS x"):
            with pytest.raises(duckdb.PermissionException, match="file system operations are disabled"):
                con.execute(sql)
        with pytest.raises(duckdb.Error, match="configuration has been locked"):
            con.execute("SET enable_external_access = true")
        with pytest.raises(duckdb.Error, match="Loading external extensions is disabled|disabled"):
            con.execute("LOAD httpfs")
        assert con.execute("SELECT count(*) FROM runs").fetchall()[0][0] > 0  # and the views still work
    finally:
        con.close()
    assert not target.exists() and not Path(built["location"], "copied.parquet").exists()


@pytest.mark.parametrize("sql, kind", [("COPY runs TO 'x.csv'", "COPY"), ("CREATE TABLE t AS SELECT 1", "CREATE"),
                                       ("INSERT INTO runs SELECT * FROM runs", "INSERT"), ("ATTACH 'x.db'", "ATTACH"),
                                       ("INSTALL httpfs", "LOAD"), ("SET threads = 1", "SET"),
                                       ("SELECT 1; DROP VIEW runs", "DROP")])
def test_sql_box_refuses_anything_but_reads(built, sql, kind):
    with pytest.raises(QueryRefused, match=f"read-only: {kind} statements are refused"):
        run_query(built["warehouse"], sql)


def test_sql_box_limits_rows_and_time(built):
    result = run_query(built["warehouse"], "SELECT * FROM range(1000000000)", max_rows=7)
    assert len(result.rows) == 7 and result.truncated
    assert not run_query(built["warehouse"], "SELECT * FROM range(7)", max_rows=7).truncated
    with pytest.raises(TimeoutError, match="time limit of 0.5 s"):
        run_query(built["warehouse"], "SELECT count(*) FROM range(100000000000) a, range(10) b", timeout_s=0.5)


# ------------------------------------------------------------------------------------------ uploads


def test_parse_upload_reads_a_whowhen_file_with_its_label():
    data = (SHARED / UPLOAD_FILE).read_bytes()
    trajectory, label = parse_upload("/some/where/47.json", data)
    assert trajectory.source == "upload:47.json" and len(trajectory.steps) == 6
    assert (label.agent, label.step, label.method) == ("Mesopotamian_Number_Systems_Expert", 1, "human")


@pytest.mark.parametrize("data, field, problem", [
    (b"", "<file>", "is empty"),
    (b"\xff\xfe\x00garbage", "<file>", "not UTF-8"),
    (b'{"history": [', "<json>", "malformed JSON"),
    (b'{"question": "q"}', "history", "missing"),
    (b'[1, 2]', "<root>", "expected a JSON object"),
    (b'{"history": [{"content": "x", "name": "a"}], "mistake_agent": "a", "mistake_step": "4"}', "mistake_step", "outside"),
])
def test_parse_upload_names_file_field_and_problem(data, field, problem):
    with pytest.raises(InputError) as caught:
        parse_upload("trace.json", data)
    message = str(caught.value)
    assert message.startswith(f"trace.json: {field}: ") and problem in message


# ------------------------------------------------------------------------------------------ safety helpers


def test_env_secrets_are_credential_variables_of_meaningful_length():
    env = {"OPENAI_API_KEY": "sk-live-0123456789", "HF_TOKEN": "hf_abcdefghijk", "DB_PASSWORD": "hunter2hunter2",
           "SOME_KEY": "x", "PATH": "/usr/bin:/bin", "TOKENIZERS_PARALLELISM": "false"}
    assert set(env_secrets(env)) == {"sk-live-0123456789", "hf_abcdefghijk", "hunter2hunter2"}
    assert redact_text("key sk-live-0123456789 here", env_secrets(env)) == "key *** here"


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("[::1]", True),
                                            ("localhost", True), ("0.0.0.0", False), ("192.168.1.5", False),
                                            ("example.com", False), ("::", False)])
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


# ------------------------------------------------------------------------------------------ page data


def test_corpus_filters_sorts_and_counts(built):
    wh = built["warehouse"]
    page = corpus_page(wh, CorpusFilter.of({}))
    # 4 attempts and the controls of the 3 that flipped (issue 23), and the re-check's fix (its control, the
    # step-2 control of the label's search, is the same replay: ids are content-derived)
    assert page.counts["runs"] == 4 and page.counts["labels"] == 4 and page.counts["replays"] == 8
    ids = {r["id"] for r in page.rows}
    assert built["corrupted_run"] in ids  # a labelled replay is listed
    assert not ids & {r["result_run_id"] for r in wh.rows("SELECT result_run_id FROM replays WHERE purpose = 'counterfactual'")}
    only = corpus_page(wh, CorpusFilter.of({"method": "counterfactual"})).rows
    assert [(r["id"], r["agent"], r["step"], r["verified"]) for r in only] == [(built["counterfactual_run"], "Planner", 1, True)]
    assert {r["id"] for r in corpus_page(wh, CorpusFilter.of({"origin": "replays"})).rows} == \
        {r["id"] for r in wh.rows("SELECT id FROM runs WHERE parent_run_id IS NOT NULL")}
    steps = [r["n_steps"] for r in corpus_page(wh, CorpusFilter.of({"sort": "steps", "order": "desc"})).rows]
    assert steps == sorted(steps, reverse=True)
    assert [r["id"] for r in corpus_page(wh, CorpusFilter.of({"outcome": "success"})).rows] == [built["success_run"]]
    assert corpus_page(wh, CorpusFilter.of({"sort": "id; DROP VIEW runs"})).filter.sort == "run"


def test_run_view_holds_every_attempt_and_compares_the_proof_replay(built):
    view = run_view(built["warehouse"], built["counterfactual_run"][:12])
    assert (view.label.agent, view.label.step, view.label.method) == ("Planner", 1, "counterfactual")
    [evidence] = view.evidence
    # every flip is followed by its control (the step unchanged), which failed: both flips were causal
    assert [(r["intervention_step"], r["intervention_kind"], r["success_after"]) for r in evidence.attempts] == [
        (4, "fix", False), (2, "fix", True), (2, "control", False), (1, "fix", True), (1, "control", False)]
    assert view.comparison.replay["id"] == view.label.proof_replay_id
    assert view.comparison.alignment.rows[0].forced and view.comparison.alignment.rows[0].index == 1
    corrupted = run_view(built["warehouse"], built["corrupted_run"])
    assert corrupted.origin is not None and corrupted.comparison.original_id == built["success_run"]
    assert (corrupted.label.method, corrupted.label.step) == ("fault_injection", 2)
    other = run_view(built["warehouse"], built["counterfactual_run"], compare=evidence.attempts[0]["id"])
    assert other.comparison.replay["intervention_step"] == 4 and other.comparison.replayed.success is False


def test_run_view_puts_a_rechecked_label_beside_its_recheck(built):
    view = run_view(built["warehouse"], built["counterfactual_run"])
    [recheck] = view.rechecks
    assert recheck.original.label and recheck.original.annotation.id == view.label.id
    again = recheck.again.annotation
    assert (again.agent, again.step, again.verified, recheck.agrees) == ("Coder", 2, False, False)
    assert again.recheck_of == view.label.id and again.metadata["recheck_verified"] is True
    assert [(r["intervention_step"], r["intervention_kind"], r["success_after"]) for r in recheck.again.attempts] == [
        (2, "fix", True), (2, "control", False)]
    assert [e.annotation.id for e in view.evidence] == [view.label.id]  # the re-check is shown in its panel only
    assert run_view(built["warehouse"], built["success_run"]).rechecks == []


def test_evaluation_page_scores_like_rootstep_evaluate(built):
    from rootstep.gateway import register_script
    from rootstep.tracers import evaluate

    def blame_the_last_agent_step(messages, params):
        """A naive tracer: blames the last agent step, in the answer format real models use."""
        prompt = messages[-1]["content"]
        last = re.findall(r"\[step (\d+)\] ([^\n:(]+?)(?: \((?:tool|human|environment) step\))?:", prompt)
        step, agent = [(s, a) for s, a in last if "step)" not in a][-1]
        return f"Agent Name: {agent}\nStep Number: {step}\nReason for Mistake: the final answer is wrong."

    register_script("ui-last-step", blame_the_last_agent_step)
    result = evaluate(built["warehouse"], "all_at_once", "scripted/ui-last-step")
    view = evaluation_view(built["warehouse"], "benchmark")
    [scores] = view.scores
    assert scores.annotator == result.annotator and scores.overall["parsed"] == 1.0
    assert scores.rows == result.table(("benchmark",))
    assert {c["method"]: c["verified"] for c in view.costs} == {"counterfactual": 1, "fault_injection": 1}
    cf = next(c for c in view.costs if c["method"] == "counterfactual")
    assert cf["replays_per_label"] == 5 and cf["llm_calls_per_label"] == built["counterfactual"].annotation.cost.llm_calls
    assert len(view.positions) == 4


@pytest.mark.parametrize("fixture, framework", [
    ("langsmith_runs.json", "langgraph"), ("inspect_handoff.eval", "inspect"), ("ag2_runtime.db", "ag2"),
    ("langgraph_openinference.otlp.json", "langgraph"),
])
def test_upload_reads_every_trace_format_of_rootstep_import(fixture, framework):
    """The attribute page accepts what `rootstep import traces` reads (fixtures made by the real libraries)."""
    from pathlib import Path

    data = (Path(__file__).parent / "fixtures" / "traces" / fixture).read_bytes()
    trajectory, label = parse_upload(fixture, data)
    assert trajectory.framework == framework and trajectory.steps and label is None
    assert trajectory.source == f"upload:{fixture}"
