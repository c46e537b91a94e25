"""Trace files as the tools really export them (issue 22): tests/fixtures/traces/real, made by generate.py there.

Every imported step is checked against the source file's own record of it (the span, observation, run or
event its `source_id` names): the step's words and tool calls are in that record. Each program's exports
through different tools give the same steps, agents named as the framework names them, the question and
the final answer of the run. Bad input (empty, truncated, a known shape rootstep does not read) is refused
saying so; what an import cannot keep is a warning per file, an error with `--strict`.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rootstep.gateway import register_script
from rootstep.cli import app
from rootstep.tracers import evaluate
from rootstep.model import InputError
from rootstep.warehouse import Warehouse
from rootstep.traces import detect_format, export_verdicts, import_traces, load_traces
from rootstep.traces._build import said

REAL = Path(__file__).parent / "fixtures" / "traces" / "real"
_spec = importlib.util.spec_from_file_location("real_generate", REAL / "generate.py")
GENERATOR = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GENERATOR)  # stdlib only at import time: the run's question, as the programs were given it

A, T = "agent", "tool"
LANGGRAPH = ["langgraph_supervisor.openinference.otlp.json", "langgraph_supervisor.phoenix_spans.json",
             "langgraph_supervisor.langfuse.json", "langgraph_supervisor.langsmith_batches.json",
             "langgraph_v03_supervisor.langfuse.json"]  # the last: LangChain 0.3 stack, Langfuse SDK v3
AGENTS_SDK = ["openai_agents_handoff.openinference.otlp.json", "openai_agents_handoff.phoenix_spans.json",
              "openai_agents_handoff.langfuse.json", "openai_agents_handoff.langsmith_batches.json"]
AGENT_FRAMEWORK = ["agent_framework.genai.otlp.json", "agent_framework.langfuse.json"]
# file -> (format, framework); the agent names are the ones the programs in generate.py gave their agents
FILES = {
    **{f: (fmt, "langgraph") for f, fmt in zip(LANGGRAPH, ["openinference", "phoenix", "langfuse", "langsmith", "langfuse"])},
    **{f: (fmt, fw) for f, fmt, fw in zip(AGENTS_SDK, ["openinference", "phoenix", "langfuse", "langsmith"],
                                          ["openai-agents", "phoenix", "openai-agents", "openai-agents"])},
    "agent_framework.genai.otlp.json": ("otlp", "agent-framework"),
    "agent_framework.langfuse.json": ("langfuse", "agent-framework"),
    "openai_traceable.langsmith_batches.json": ("langsmith", "langsmith"),
    "inspect_solvers.eval": ("inspect", "inspect"),
    "atif_subagents.json": ("atif", "atif"),
}


# ------------------------------------------------------------------------------------ the source file's records


def _decoded(value: Any) -> Any:
    """A JSON-encoded string decoded, recursively (attributes hold JSON inside JSON)."""
    if isinstance(value, str) and value.strip()[:1] in "[{":
        try:
            return _decoded(json.loads(value))
        except ValueError:
            return value
    if isinstance(value, dict):
        return {k: _decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    return value


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [str(value)] if value is not None else []


def _holds(value: Any, wanted: Any) -> bool:
    """`wanted` (a dict of call arguments) is somewhere in `value`, equal."""
    if value == wanted:
        return True
    if isinstance(value, dict):
        return any(_holds(v, wanted) for v in value.values())
    if isinstance(value, list):
        return any(_holds(v, wanted) for v in value)
    return False


def _records(name: str) -> dict[str, Any]:
    """Every record of a source file by the id the importer keeps as `source_id`, decoded."""
    path = REAL / name
    if path.suffix == ".eval":
        from inspect_ai.log import read_eval_log

        log = read_eval_log(str(path), resolve_attachments=True)
        return {e.uuid: _decoded(e.model_dump(mode="json")) for s in log.samples for e in s.events if getattr(e, "uuid", None)}
    data = json.loads(path.read_text())
    if "resourceSpans" in data:
        return {s["spanId"]: _decoded(s) for rs in data["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]}
    if name.endswith("phoenix_spans.json"):
        return {s["context"]["span_id"]: _decoded(s) for s in data["data"]}
    if name.endswith("langfuse.json"):
        return {o["id"]: _decoded(o) for o in data["data"]}
    if name.endswith("langsmith_batches.json"):
        records: dict[str, Any] = {}
        for batch in data:
            for run in batch.get("post", []) + batch.get("patch", []):
                records.setdefault(run["id"], []).append(_decoded(run))
        return records
    files = [data, *(json.loads((REAL / ref["trajectory_path"]).read_text()) for step in data["steps"]
                     for r in (step.get("observation") or {}).get("results", []) for ref in r.get("subagent_trajectory_ref") or [])]
    return {f"{t['trajectory_id']}#{step['step_id']}": step for t in files for step in t["steps"]}


def _run(name: str):
    [run] = [t for t in load_traces(REAL / name, strict=True)]
    return run


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_step_is_the_source_records_words_and_calls(name: str):
    fmt, framework = FILES[name]
    assert detect_format(REAL / name) == ("otlp" if fmt == "openinference" else fmt)
    run = _run(name)
    records = _records(name)
    assert run.framework == framework and run.metadata["trace"]["format"] == fmt
    assert not run.metadata.get("import_warnings") and run.metadata["content_captured"]
    for step in run.steps:
        record = records[step.metadata["source_id"]]
        leaves = _leaves(record)
        for line in filter(None, said(step.content, step.tool_calls).splitlines() if step.kind == A else [step.content]):
            assert any(line in leaf for leaf in leaves), (name, step.index, line)
        for call in step.tool_calls:
            assert any(call["name"] in leaf for leaf in leaves), (name, step.index, call)
            if isinstance(call["arguments"], dict) and call["arguments"]:  # as data, or as Python's text of it
                assert _holds(record, call["arguments"]) or str(call["arguments"]) in leaves, (name, step.index, call)
    assert run.question == GENERATOR.QUESTION
    last = [s for s in run.steps if s.kind == A][-1]
    assert run.final_answer == said(last.content, last.tool_calls) and "42" in run.final_answer  # the team's answer
    assert run.prompt_tokens > 0 and run.completion_tokens > 0


def _shape(run) -> list[tuple[str, str, str, list[tuple[str, Any]]]]:
    return [(s.agent, s.kind, said(s.content, s.tool_calls) if s.kind == A else s.content,
             [(c["name"], c["arguments"] or {}) for c in s.tool_calls]) for s in run.steps]


def test_a_langgraph_supervisor_run_is_the_same_steps_through_every_tool():
    """OpenInference OTLP, Phoenix's REST API, Langfuse's callback handler and LangSmith's client, one run; and the
    same program on the LangChain 0.3 stack through Langfuse SDK v3 (raw calls in `additional_kwargs`)."""
    shapes = [_shape(_run(name)) for name in LANGGRAPH]
    assert all(shape == shapes[0] for shape in shapes[1:])
    assert [(agent, kind) for agent, kind, _, _ in shapes[0]] == [
        ("supervisor", A), ("supervisor", T), ("math_expert", A), ("math_expert", T), ("math_expert", A),
        ("supervisor", A), ("supervisor", T), ("reviewer", A), ("supervisor", A)]
    assert shapes[0][0][3] == [("transfer_to_math_expert", {})] and shapes[0][2][3] == [("multiply", {"a": 3, "b": 12})]
    assert shapes[0][3][2] == "36" and shapes[0][1][2] == "Successfully transferred to math_expert"


def test_an_agents_sdk_handoff_keeps_responses_output_items_and_the_agent_names():
    shapes = [_shape(_run(name)) for name in AGENTS_SDK]
    spans = [s for s in shapes if len(s) == 5]  # OpenInference (OTLP, Phoenix, Langfuse) record the handoff as a tool span
    assert len(spans) == 3 and all(s == spans[0] for s in spans)
    assert [(a, k) for a, k, _, _ in spans[0]] == [("triage_agent", A), ("triage_agent", T), ("math_agent", A), ("math_agent", T), ("math_agent", A)]
    [langsmith] = [s for s in shapes if len(s) == 4]  # LangSmith's processor records the handoff as a chain run
    assert langsmith == [spans[0][0], *spans[0][2:]]
    reasoning_and_call = spans[0][2]
    assert reasoning_and_call[2] == "Multiply the boxes first, then add the singles."  # the Responses `reasoning` item
    assert reasoning_and_call[3] == [("multiply", {"a": 3, "b": 12})]  # the `function_call` item


def test_langsmith_traceable_agents_read_the_chat_completion_not_its_json():
    """`@traceable` agents over a `wrap_openai` client: the llm runs' outputs are whole ChatCompletions."""
    name = "openai_traceable.langsmith_batches.json"
    run, records = _run(name), _records(name)
    assert all("choices" in records[s.metadata["source_id"]][0]["outputs"] for s in run.steps if s.kind == A)
    assert _shape(run) == [
        ("solver", A, "Boxes first: 3 times 12.", [("multiply", {"a": 3, "b": 12})]), ("solver", T, "36", [("multiply", {"a": 3, "b": 12})]),
        ("solver", A, "36 muffins in boxes plus 5 single muffins is 42 muffins.", []),
        ("checker", A, "Checked: the bakery sells 42 muffins.", [])]


def test_agent_framework_genai_parts_and_agents_as_tools():
    otlp, langfuse = (_shape(_run(name)) for name in AGENT_FRAMEWORK)
    assert otlp == langfuse
    assert [(a, k) for a, k, _, _ in otlp] == [("planner", A), ("planner", T), ("calculator", A), ("calculator", T),
                                                ("calculator", A), ("planner", A)]
    assert otlp[0][3] == [("calculator", {"task": "3 boxes of 12 muffins plus 5 single muffins"})]
    assert otlp[2] == ("calculator", A, "", [("multiply", {"a": 3, "b": 12})])  # a `tool_call` part, no text part


def test_inspect_steps_sit_in_their_solver_and_attachments_are_resolved():
    run = _run("inspect_solvers.eval")
    with zipfile.ZipFile(REAL / "inspect_solvers.eval") as z:
        assert "attachment://" in z.read("samples/muffins_epoch_1.json").decode()  # the writer did condense
    assert [(s.agent, s.kind) for s in run.steps] == [("draft", A), ("draft", T), ("draft", A), ("review", A)]
    assert not any("attachment://" in s.content for s in run.steps)
    assert run.steps[3].content.startswith("Reviewed: 36 boxed muffins") and run.ground_truth == "41"
    assert run.verdict is not None and run.verdict.success is False


def test_atif_subagent_in_a_sibling_file_and_costs_per_step():
    run = _run("atif_subagents.json")
    root = json.loads((REAL / "atif_subagents.json").read_text())
    assert [(s.agent, s.kind) for s in run.steps] == [("system", "environment"), ("user", "human"), ("supervisor", A),
                                                      ("user", "human"), ("calculator", A), ("calculator", A), ("supervisor", A)]
    assert run.cost_usd == pytest.approx(root["final_metrics"]["total_cost_usd"])
    costs = [s.metadata["usage"]["cost_usd"] for s in run.steps if "usage" in s.metadata]
    assert sum(costs) == pytest.approx(root["final_metrics"]["total_cost_usd"]) and len(costs) == 4
    assert run.metadata["trace"]["subagent_files"] == [str((REAL / "atif_subagents.calculator.json").resolve())]


def test_atif_subagent_file_absent_is_a_warning_and_strict_refuses(tmp_path: Path):
    alone = tmp_path / "atif_subagents.json"
    shutil.copy(REAL / "atif_subagents.json", alone)
    [run] = load_traces(alone)
    [warning] = run.metadata["import_warnings"]
    assert "calculator-7" in warning and "atif_subagents.calculator.json is not beside the file" in warning
    assert [s.agent for s in run.steps if s.kind == A] == ["supervisor", "supervisor"]
    with pytest.raises(InputError, match=r"calculator-7.*--strict"):
        load_traces(alone, strict=True)


def test_a_tool_recorded_as_a_span_observation_is_a_tool_step(tmp_path: Path):
    """Langfuse stores what it cannot type as SPAN: the Agent Framework export with its tool observations so typed."""
    data = json.loads((REAL / "agent_framework.langfuse.json").read_text())
    for o in data["data"]:
        if o["type"] == "TOOL":
            o["type"] = "SPAN"
    spans = tmp_path / "as_spans.json"
    spans.write_text(json.dumps(data))
    assert _shape(load_traces(spans, strict=True)[0]) == _shape(_run("agent_framework.langfuse.json"))


def test_a_trace_without_content_warns_and_strict_refuses_naming_the_first_span():
    dark = REAL.parent / "pydantic_ai_genai_no_content.otlp.json"
    [run] = load_traces(dark)
    silent = [s for s in run.steps if s.kind == A and not s.tool_calls]
    results = [s for s in run.steps if s.kind == T]
    assert silent and results and all(not s.content for s in silent + results)
    assert run.metadata["import_warnings"] == [
        f"{len(silent)} step(s) stored with no text and no tool call (first: {silent[0].metadata['source_id']})",
        f"{len(results)} tool step(s) stored with no result (first: {results[0].metadata['source_id']})"]
    with pytest.raises(InputError, match=f"first: {silent[0].metadata['source_id']}"):
        load_traces(dark, strict=True)


def test_a_message_in_a_shape_no_reader_knows_is_counted_and_strict_refuses(tmp_path: Path):
    """The LangSmith batches of the LangGraph run with one generation's outputs replaced by a shape no tool writes."""
    batches = json.loads((REAL / "langgraph_supervisor.langsmith_batches.json").read_text())
    llm = [run for batch in batches for run in batch.get("post", []) if run["run_type"] == "llm"]
    llm[1]["outputs"] = {"vendor_blob": {"tokens": [1, 2, 3]}}
    odd = tmp_path / "odd_outputs.json"
    odd.write_text(json.dumps(batches))
    [run] = load_traces(odd)
    assert run.metadata["import_warnings"] == [f"1 message(s) in a shape not read, kept as raw JSON (first: {llm[1]['id']})"]
    assert '"vendor_blob"' in next(s.content for s in run.steps if s.metadata["source_id"] == llm[1]["id"])
    with pytest.raises(InputError, match="shape not read.*--strict"):
        load_traces(odd, strict=True)


# ------------------------------------------------------------------------------------ bad input


def test_a_truncated_file_says_it_ends_early_and_where(tmp_path: Path):
    text = (REAL / "langgraph_supervisor.langfuse.json").read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    with pytest.raises(InputError) as caught:
        load_traces(cut)
    line = text[: len(text) // 2].count("\n") + 1
    assert caught.value.field == "<json>" and "ends early" in caught.value.problem and f"line {line}," in caught.value.problem
    assert "jsonl" not in str(caught.value)


def test_a_file_cut_inside_a_string_says_it_ends_early_where_it_ends(tmp_path: Path):
    """Cut in the middle of a string value, the decoder names where the string starts ("Unterminated
    string"); the file still ends early, at its last byte."""
    text = (REAL / "langgraph_supervisor.phoenix_spans.json").read_text()
    end = text.index('"', 3000) + 5  # inside a string
    cut = tmp_path / "cut.json"
    cut.write_text(text[:end])
    with pytest.raises(InputError) as caught:
        load_traces(cut)
    assert caught.value.field == "<json>" and "ends early" in caught.value.problem
    assert f"line {text[:end].count(chr(10)) + 1}," in caught.value.problem and f"(byte {end} of {end})" in caught.value.problem


def test_json_lines_whose_last_line_ends_early_say_so(tmp_path: Path):
    """A Collector's file exporter killed mid-write: one request per line, the last one cut."""
    line = json.dumps(json.loads((REAL / "agent_framework.genai.otlp.json").read_text()))
    cut = tmp_path / "spans.jsonl"
    cut.write_text(line + "\n" + line[: len(line) // 3])
    with pytest.raises(InputError) as caught:
        load_traces(cut)
    assert caught.value.field == "<jsonl line 2>" and "ends early" in caught.value.problem


def test_an_empty_file_says_it_is_empty(tmp_path: Path):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(InputError, match="the file is empty"):
        load_traces(empty)


def test_a_known_shape_rootstep_does_not_read_is_named(tmp_path: Path):
    """A chat message list as a Langfuse generation recorded it: no agent names, so no multi-agent run."""
    observations = json.loads((REAL / "openai_agents_handoff.langfuse.json").read_text())["data"]
    messages = next(o["input"] for o in observations if o["type"] == "GENERATION")
    dump = tmp_path / "messages.json"
    dump.write_text(json.dumps(messages))
    with pytest.raises(InputError, match=r"known shape rootstep does not read: a bare chat message list \(resembles ag2"):
        load_traces(dump)


# ------------------------------------------------------------------------------------ the command on a folder


def test_import_traces_on_a_folder_prints_each_files_format_runs_steps_warnings(tmp_path: Path):
    folder = tmp_path / "real"
    shutil.copytree(REAL, folder, ignore=shutil.ignore_patterns("*.py", "*.txt", "*.md"))
    shutil.copy(REAL.parent / "pydantic_ai_genai_no_content.otlp.json", folder)
    wh = str(tmp_path / "wh")
    done = CliRunner().invoke(app, ["import", "traces", str(folder), "-w", wh])
    assert done.exit_code == 0, done.output
    lines = {line.split(":", 1)[0]: line for line in done.output.splitlines() if line.startswith(str(folder))}
    assert lines[str(folder / "langgraph_supervisor.langsmith_batches.json")].endswith(": langsmith, 1 run(s), 9 step(s), 0 warning(s)")
    assert lines[str(folder / "openai_agents_handoff.phoenix_spans.json")].endswith(": phoenix, 1 run(s), 5 step(s), 0 warning(s)")
    assert lines[str(folder / "langgraph_supervisor.phoenix_spans.json")].endswith(
        f": phoenix, 1 run(s) (the same as {folder / 'langgraph_supervisor.openinference.otlp.json'}'s), 9 step(s), 0 warning(s)")
    assert lines[str(folder / "atif_subagents.calculator.json")].endswith(
        f": atif, included in {folder / 'atif_subagents.json'}, 3 step(s), 0 warning(s)")
    assert lines[str(folder / "pydantic_ai_genai_no_content.otlp.json")].endswith(": otlp, 1 run(s), 6 step(s), 2 warning(s)")
    assert "step(s) stored with no text and no tool call" in done.output
    # the sibling subagent file is not a run of its own; one run exported twice alike (OTLP and Phoenix's copy of the
    # LangGraph spans) is one run: ids are content-derived
    distinct = {t.id for name in [*FILES, "pydantic_ai_genai_no_content.otlp.json"] for t in load_traces(folder / name)}
    assert Warehouse(wh).count("runs") == len(distinct) == len(FILES)
    refused = CliRunner().invoke(app, ["import", "traces", str(folder), "-w", str(tmp_path / "wh2"), "--strict"])
    assert refused.exit_code == 2 and "pydantic_ai_genai_no_content" in refused.output and "--strict" in refused.output


# ------------------------------------------------------------------------------------ verdicts back to each tool


@pytest.fixture(scope="module")
def attributed(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    warehouse = Warehouse(tmp_path_factory.mktemp("real") / "wh")
    import_traces([REAL], warehouse, strict=True)
    from tests.test_traces import _analyst  # the first agent step whose words say 42, as a model would name it

    register_script("real-trace-analyst", _analyst)
    evaluate(warehouse, "all_at_once", "scripted/real-trace-analyst", unlabelled=True)
    return warehouse


def _decisive(warehouse: Warehouse, name: str) -> tuple[str, str]:
    """(source id, agent) of the step the analyst named in the run imported from `name`."""
    run_id, run = next((rid, t) for rid, t in warehouse.trajectories() if t.source.endswith(name))
    verdict = warehouse.rows("SELECT step FROM annotations WHERE run_id = ?", [run_id])[0]
    step = run.steps[verdict["step"]]
    return step.metadata["source_id"], step.agent


@pytest.mark.parametrize("name", ["langgraph_supervisor.openinference.otlp.json", "agent_framework.genai.otlp.json",
                                  "openai_agents_handoff.openinference.otlp.json"])
def test_otlp_verdicts_of_real_traces_parse_with_the_otlp_protobuf(attributed: Warehouse, tmp_path: Path, name: str):
    import base64

    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out = tmp_path / "v.json"
    assert export_verdicts(attributed, out, "otlp", where=f"source LIKE '%{name}'") == 1
    body = json.loads(out.read_text())
    for span in body["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for key in ("traceId", "spanId", "parentSpanId"):
            span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    [span] = json_format.Parse(json.dumps(body), ExportTraceServiceRequest()).resource_spans[0].scope_spans[0].spans
    decisive, agent = _decisive(attributed, name)
    assert span.parent_span_id.hex() == decisive and decisive in _records(name)
    attributes = {a.key: a.value for a in span.attributes}
    assert attributes["rootstep.verdict.agent"].string_value == agent
    assert span.trace_id.hex() == _records(name)[decisive]["traceId"]


def test_the_otlp_verdict_sent_into_its_trace_imports_back_with_the_same_steps(attributed: Warehouse, tmp_path: Path):
    """The source spans and rootstep's verdict spans in one OTLP/JSON Lines file (a Collector's file exporter
    writes one request per line): the same steps as the source alone, and the verdict read back."""
    name = "agent_framework.genai.otlp.json"
    verdict = tmp_path / "v.json"
    export_verdicts(attributed, verdict, "otlp", where=f"source LIKE '%{name}'")
    both = tmp_path / "with_verdict.otlp.jsonl"
    both.write_text(json.dumps(json.loads((REAL / name).read_text())) + "\n" + json.dumps(json.loads(verdict.read_text())) + "\n")
    [back] = load_traces(both, strict=True)
    assert _shape(back) == _shape(_run(name)) and back.question == _run(name).question
    [sent] = back.metadata["trace"]["rootstep_verdicts"]
    decisive, agent = _decisive(attributed, name)
    assert sent["source_span_id"] == decisive and sent["agent"] == agent and back.steps[sent["step"]].metadata["source_id"] == decisive


@pytest.mark.parametrize("name", LANGGRAPH[2:3] + LANGGRAPH[4:] + AGENTS_SDK[2:3] + AGENT_FRAMEWORK[1:])
def test_langfuse_verdicts_of_real_exports_are_valid_score_requests(attributed: Warehouse, tmp_path: Path, name: str):
    from langfuse.api import CreateScoreRequest
    from langfuse.api.core.pydantic_utilities import parse_obj_as

    out = tmp_path / "scores.json"
    export_verdicts(attributed, out, "langfuse", where=f"source LIKE '%{name}'")
    [score] = [parse_obj_as(CreateScoreRequest, s) for s in json.loads(out.read_text())]
    observation = _records(name)[score.observation_id]
    assert observation["type"] == "GENERATION" and score.trace_id == observation["traceId"]


@pytest.mark.parametrize("stored, phoenix", [(LANGGRAPH[0], LANGGRAPH[1]), (AGENTS_SDK[1], AGENTS_SDK[1])])
def test_phoenix_verdicts_land_on_a_span_phoenix_holds(attributed: Warehouse, tmp_path: Path, stored: str, phoenix: str):
    """The LangGraph run from Phoenix is the run of its OTLP export (the same spans, one content-derived id)."""
    from phoenix.client.__generated__.v1 import AnnotateSpansRequestBody

    from tests.test_traces import _conforms

    out = tmp_path / "annotations.json"
    export_verdicts(attributed, out, "phoenix", where=f"source LIKE '%{stored}'")
    body = json.loads(out.read_text())
    _conforms(body, AnnotateSpansRequestBody, "body")
    [annotation] = body["data"]
    assert _records(phoenix)[annotation["span_id"]]["span_kind"] == "LLM"


def test_atif_export_of_a_real_run_imports_back_as_the_same_steps(attributed: Warehouse, tmp_path: Path):
    import jsonschema

    schema = json.loads((REAL.parent / "atif.schema.json").read_text())
    for name in ("langgraph_supervisor.langsmith_batches.json", "agent_framework.genai.otlp.json", "inspect_solvers.eval"):
        out = tmp_path / name
        assert export_verdicts(attributed, out, "atif", where=f"source LIKE '%{name}'") == 1
        [written] = out.glob("*.json")
        jsonschema.validate(json.loads(written.read_text()), schema)
        [back] = load_traces(written, strict=True)
        original = _run(name)
        assert _shape(back) == _shape(original) and back.question == original.question
        assert back.final_answer == original.final_answer
