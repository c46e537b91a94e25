"""Traces from observability tools: every fixture was made by the real library (tests/fixtures/traces/generate.py).

Each format is imported into a real warehouse (DuckDB + Parquet) and read back from `runs`/`steps`; bad input
is refused naming file, span and field; the tracers attribute imported traces (scripted analyst), refuse the
trace recorded without content; the verdicts go back in each source tool's own schema, checked with that
tool's own parser or models (OTLP protobuf, Langfuse SDK, Phoenix client types, Harbor's ATIF schema).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rootstep.gateway import register_script
from rootstep.cli import app
from rootstep.tracers import all_at_once, evaluate
from rootstep.model import InputError, RootstepError
from rootstep.warehouse import Warehouse
from rootstep.traces import detect_format, export_verdicts, import_traces, load_traces

FIXTURES = Path(__file__).parent / "fixtures" / "traces"
A, T, H, E = "agent", "tool", "human", "environment"

# file -> (format detected, framework, the failed run's steps as (agent, kind), its decisive (agent, step))
EXPECTED = {
    "smolagents_openinference.otlp.json": ("otlp", "smolagents", [("manager", A), ("math_agent", A), ("math_agent", T), ("math_agent", A), ("math_agent", T), ("manager", A), ("manager", T)], ("math_agent", 3)),
    "langgraph_openinference.otlp.json": ("otlp", "langgraph", [("planner", A), ("tools", T), ("calculator", A)], ("calculator", 2)),
    "pydantic_ai_genai.otlp.json": ("otlp", "pydantic-ai", [("planner", A), ("planner", T), ("solver", A), ("solver", T), ("solver", A), ("planner", A)], ("solver", 4)),
    "langfuse_observations.json": ("langfuse", "langfuse", [("solver", A), ("solver", T), ("solver", A), ("checker", A)], ("solver", 2)),
    "langsmith_runs.json": ("langsmith", "langgraph", [("planner", A), ("tools", T), ("calculator", A)], ("calculator", 2)),
    "inspect_handoff.eval": ("inspect", "inspect", [("supervisor", A), ("supervisor", T), ("calculator", A), ("calculator", T), ("calculator", A), ("calculator", T), ("supervisor", A), ("supervisor", T)], ("calculator", 4)),
    "inspect_handoff.json": ("inspect", "inspect", [("supervisor", A), ("supervisor", T), ("calculator", A), ("calculator", T), ("calculator", A), ("calculator", T), ("supervisor", A), ("supervisor", T)], ("calculator", 4)),
    "smolagents_memory.json": ("smolagents", "smolagents", [("user", H), ("manager", A), ("math_agent", A), ("math_agent", A), ("manager", A)], ("math_agent", 3)),
    "ag2_runtime.db": ("ag2", "ag2", [("User", H), ("Planner", A), ("Calculator", A), ("Reviewer", A)], ("Calculator", 2)),
    "ag2_groupchat.json": ("ag2", "ag2", [("User", H), ("Planner", A), ("Calculator", A), ("Reviewer", A)], ("Calculator", 2)),
    "atif_trajectory.json": ("atif", "atif", [("system", E), ("user", H), ("supervisor", A), ("user", H), ("calculator", A), ("calculator", A), ("supervisor", A)], ("calculator", 5)),
}


def _failed(trajectories):
    """The run of a fixture that holds the muffin failure (Inspect logs also hold a passing control sample)."""
    return next(t for t in trajectories if t.verdict is None or not t.verdict.success)


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    """A private copy of the fixtures (without the generator and the ATIF schema, which are not traces)."""
    target = tmp_path / "traces"
    target.mkdir()
    for name in [*EXPECTED, "pydantic_ai_genai_no_content.otlp.json"]:
        shutil.copy(FIXTURES / name, target / name)
    return target


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_format_round_trips_into_runs_and_steps_with_its_agents_in_order(name: str, tmp_path: Path, warehouse: Warehouse):
    fmt, framework, expected, _ = EXPECTED[name]
    path = tmp_path / name
    shutil.copy(FIXTURES / name, path)
    assert detect_format(path) == fmt
    report = import_traces([path], warehouse)
    assert report.runs_written == len(load_traces(path)) and not report.invalid
    run = _failed(t for _, t in warehouse.trajectories())
    run_id = next(rid for rid, t in warehouse.trajectories() if t == run)
    rows = warehouse.rows("SELECT step, agent, kind, metadata FROM steps WHERE run_id = ? ORDER BY step", [run_id])
    assert [(r["agent"], r["kind"]) for r in rows] == expected
    assert run.framework == framework and run.source == str(path)
    assert "bakery" in run.question and "42" in (run.final_answer or "")
    source_ids = [json.loads(r["metadata"]).get("source_id") for r in rows]
    assert all(source_ids) and len(set(source_ids)) == len(source_ids)  # every step points back to its source record
    assert run.metadata["trace"]["format"] in (fmt, "openinference") and run.metadata["content_captured"] is True
    assert import_traces([path], warehouse).runs_written == 0  # idempotent


def test_source_ids_are_the_tools_own_ids(tmp_path: Path):
    spans = {s["spanId"]: s["name"] for rs in json.loads((FIXTURES / "smolagents_openinference.otlp.json").read_text())["resourceSpans"]
             for ss in rs["scopeSpans"] for s in ss["spans"]}
    run = load_traces(FIXTURES / "smolagents_openinference.otlp.json")[0]
    assert [spans[s.metadata["source_id"]] for s in run.steps] == [
        "OpenAIModel.generate", "OpenAIModel.generate", "SimpleTool", "OpenAIModel.generate", "FinalAnswerTool",
        "OpenAIModel.generate", "FinalAnswerTool"]
    assert run.metadata["trace"]["trace_id"] == next(iter(
        rs["scopeSpans"][0]["spans"][0]["traceId"] for rs in json.loads((FIXTURES / "smolagents_openinference.otlp.json").read_text())["resourceSpans"]))
    observations = {o["id"] for o in json.loads((FIXTURES / "langfuse_observations.json").read_text())["data"]}
    assert {s.metadata["source_id"] for s in load_traces(FIXTURES / "langfuse_observations.json")[0].steps} <= observations


def test_inspect_outcome_comes_from_the_score_so_failed_samples_are_found_without_a_flag():
    runs = {t.task_id: t for t in load_traces(FIXTURES / "inspect_handoff.eval")}
    assert runs["muffins"].verdict.success is False and runs["muffins"].ground_truth == "41"
    assert runs["control"].verdict.success is True and runs["control"].verdict.details["value"] == "C"
    assert runs["muffins"].benchmark == "muffin_handoff" and runs["muffins"].model == "mockllm/model"


def test_inspect_without_its_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    with pytest.raises(RootstepError, match=r"optional extra `inspect`.*\.\[inspect\]"):
        load_traces(FIXTURES / "inspect_handoff.eval")


def test_the_langfuse_fixture_is_valid_for_the_langfuse_sdk():
    from langfuse.api import ObservationsV2Response
    from langfuse.api.core.pydantic_utilities import parse_obj_as  # the SDK's own reader of API JSON (camelCase aliases)

    parsed = parse_obj_as(ObservationsV2Response, json.loads((FIXTURES / "langfuse_observations.json").read_text()))
    assert {o.type for o in parsed.data} == {"SPAN", "AGENT", "GENERATION", "TOOL"}


# ------------------------------------------------------------------------------------ bad input


def test_a_file_in_no_format_says_what_was_tried_and_why(tmp_path: Path, warehouse: Warehouse):
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"spans": []}))
    with pytest.raises(InputError) as caught:
        import_traces([odd], warehouse)
    message = str(caught.value)
    for fmt in ("ag2", "inspect", "otlp", "atif", "langsmith", "langfuse", "smolagents"):
        assert f"{fmt}: " in message
    assert "resourceSpans" in message and str(odd) in message


def test_a_malformed_span_names_file_span_and_field_and_nothing_is_written(traces: Path, warehouse: Warehouse):
    import_traces([traces / "ag2_groupchat.json"], warehouse)
    before = sorted(p.name for p in Path(warehouse.root).rglob("*.parquet"))
    bad = traces / "smolagents_openinference.otlp.json"
    data = json.loads(bad.read_text())
    span = data["resourceSpans"][0]["scopeSpans"][0]["spans"][2]
    span["startTimeUnixNano"] = "yesterday"
    bad.write_text(json.dumps(data))
    with pytest.raises(InputError) as caught:
        import_traces([traces], warehouse)
    assert caught.value.file == str(bad) and caught.value.field == f"span {span['spanId']}.startTimeUnixNano"
    assert sorted(p.name for p in Path(warehouse.root).rglob("*.parquet")) == before  # nothing already stored touched
    report = import_traces([traces], warehouse, skip_invalid=True)
    assert [path for path, _ in report.invalid] == [str(bad)]
    assert report.runs_written == warehouse.count("runs") - 1 and report.runs_skipped == 1  # the groupchat was stored


def test_import_traces_command_and_show(traces: Path, tmp_path: Path):
    wh = str(tmp_path / "wh")
    done = CliRunner().invoke(app, ["import", "traces", str(traces / "smolagents_openinference.otlp.json"), "-w", wh])
    assert done.exit_code == 0, done.output
    assert "imported 1 runs and 0 labels from 1 file(s)" in done.output
    run_id = Warehouse(wh).rows("SELECT id FROM runs")[0]["id"]
    shown = CliRunner().invoke(app, ["show", run_id[:10], "-w", wh, "--width", "0"])
    assert shown.exit_code == 0, shown.output
    assert "step 3 · math_agent · agent" in shown.output and "5c3303342574ef20" in shown.output
    assert "imported trace" in shown.output and "-> final_answer" in shown.output
    odd = tmp_path / "odd.json"
    odd.write_text("[1, 2]")
    refused = CliRunner().invoke(app, ["import", "traces", str(odd), "-w", wh])
    assert refused.exit_code == 2 and "no known trace format" in refused.output and "Nothing was written" in refused.output


def test_annotate_refuses_an_imported_run(traces: Path, tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    import_traces([traces / "langfuse_observations.json"], wh)
    run_id = wh.rows("SELECT id FROM runs")[0]["id"]
    refused = CliRunner().invoke(app, ["annotate", "--run-id", run_id[:12], "-w", str(tmp_path / "wh")])
    assert refused.exit_code == 2
    text = " ".join(refused.output.split())
    assert "not recorded by rootstep" in text and "cannot re-simulate it" in text and "rootstep evaluate --unlabelled" in text


# ------------------------------------------------------------------------------------ attribution and verdicts


def _analyst(messages, params):
    """A scripted analyst that answers as real models do: the first agent step whose text says 42."""
    prompt = messages[-1]["content"]
    blocks = re.findall(r"\[step (\d+)\] ([^\n(:]+?)(?: \((\w+) step\))?:\n(.*?)(?=\n\[step |\n\nFind the decisive)", prompt, re.S)
    said = {int(i): re.split(r"\n  (?:tool call|observation): ", text)[0] for i, a, kind, text in blocks}  # the message
    step, agent = next((int(i), a) for i, a, kind, text in blocks if not kind and "42" in said[int(i)])
    return f"Agent Name: {agent}\nStep Number: {step}\nReason for Mistake: 3 boxes of 12 plus 5 is 41; the agent added wrong and said 42."


def test_evaluate_attributes_imported_traces_and_refuses_the_one_without_content(traces: Path, warehouse: Warehouse):
    import_traces([traces], warehouse)
    register_script("trace-analyst", _analyst)
    result = evaluate(warehouse, "all_at_once", "scripted/trace-analyst", unlabelled=True)
    assert not result.scored  # no labels: nothing to score, every prediction is stored
    by_source = {t.source: (run_id, t) for run_id, t in warehouse.trajectories()}
    predicted = {p["run_id"]: p for p in result.unlabelled}
    for name, (_, _, _, (agent, step)) in EXPECTED.items():
        run_id, t = next(v for k, v in by_source.items() if k.endswith(name) and (v[1].verdict is None or not v[1].verdict.success))
        assert (predicted[run_id]["agent"], predicted[run_id]["step"]) == (agent, step), name
    dark_id, _ = by_source[str(traces / "pydantic_ai_genai_no_content.otlp.json")]
    assert predicted[dark_id]["agent"] is None and "content capture was off" in predicted[dark_id]["error"]
    stored = warehouse.rows("SELECT status, notes, cost_llm_calls FROM annotations WHERE run_id = ?", [dark_id])
    assert stored[0]["status"] == "unresolved" and stored[0]["cost_llm_calls"] == 0  # refused before any LLM call
    successes = {rid for rid, t in warehouse.trajectories() if t.verdict is not None and t.verdict.success}
    assert successes and not successes & set(predicted)  # Inspect's passing samples are not attributed
    again = evaluate(warehouse, "all_at_once", "scripted/trace-analyst", unlabelled=True)
    assert again.predicted == 0 and len(again.unlabelled) == len(result.unlabelled)


def test_a_tracer_called_directly_refuses_a_trace_without_content():
    [dark] = load_traces(FIXTURES / "pydantic_ai_genai_no_content.otlp.json")
    refused = all_at_once(dark, model="scripted/never-called")
    assert refused.error.startswith("refused: no message text") and refused.cost.llm_calls == 0


@pytest.fixture
def attributed(traces: Path, warehouse: Warehouse) -> Warehouse:
    import_traces([traces], warehouse)
    register_script("trace-analyst", _analyst)
    evaluate(warehouse, "all_at_once", "scripted/trace-analyst", unlabelled=True)
    return warehouse


def _hex_to_base64(node):
    """OTLP/JSON writes ids as hex; protobuf's generic JSON mapping (json_format) reads bytes as base64."""
    if isinstance(node, dict):
        return {k: base64.b64encode(bytes.fromhex(v)).decode() if k in ("traceId", "spanId", "parentSpanId") else _hex_to_base64(v)
                for k, v in node.items()}
    return [_hex_to_base64(v) for v in node] if isinstance(node, list) else node


def test_otlp_verdicts_parse_with_the_otlp_protobuf_and_sit_under_the_decisive_span(attributed: Warehouse, tmp_path: Path):
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out = tmp_path / "verdicts.otlp.json"
    n = export_verdicts(attributed, out, "otlp", where="source LIKE '%smolagents_openinference%'")
    request = json_format.Parse(json.dumps(_hex_to_base64(json.loads(out.read_text()))), ExportTraceServiceRequest())
    [span] = request.resource_spans[0].scope_spans[0].spans
    assert n == 1 and span.name == "rootstep.verdict"
    assert span.parent_span_id.hex() == "5c3303342574ef20"  # the LLM span of math_agent's 42
    attributes = {a.key: a.value for a in span.attributes}
    assert attributes["rootstep.verdict.agent"].string_value == "math_agent"
    assert attributes["rootstep.verdict.step"].int_value == 3 and "41" in attributes["rootstep.verdict.reason"].string_value
    assert span.events[0].name == "gen_ai.evaluation.result"
    source_trace = load_traces(FIXTURES / "smolagents_openinference.otlp.json")[0].metadata["trace"]["trace_id"]
    assert span.trace_id.hex() == source_trace


def test_langfuse_verdicts_are_valid_score_requests_for_the_langfuse_sdk(attributed: Warehouse, tmp_path: Path):
    from langfuse.api import CreateScoreRequest
    from langfuse.api.core.pydantic_utilities import parse_obj_as

    out = tmp_path / "scores.json"
    export_verdicts(attributed, out, "langfuse", where="source LIKE '%langfuse_observations%'")
    [score] = [parse_obj_as(CreateScoreRequest, s) for s in json.loads(out.read_text())]
    trace_id = json.loads((FIXTURES / "langfuse_observations.json").read_text())["data"][0]["traceId"]
    assert score.observation_id == "cef10869ae0e25c7" and score.trace_id == trace_id
    assert score.data_type == "BOOLEAN" and score.metadata["agent"] == "solver" and score.metadata["step"] == 2


def _conforms(value, annotation, where: str) -> None:
    """`value` is an instance of the (generated, typing.TypedDict) Phoenix REST type `annotation`.

    pydantic cannot validate `typing.TypedDict` on Python 3.11, so the client's own type definitions are
    walked here: required keys present, no unknown key, every value of its declared type."""
    import collections.abc
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if typing.is_typeddict(annotation):
        hints = typing.get_type_hints(annotation)
        assert isinstance(value, dict), where
        assert annotation.__required_keys__ <= value.keys(), f"{where}: missing {annotation.__required_keys__ - value.keys()}"
        assert value.keys() <= hints.keys(), f"{where}: unknown keys {value.keys() - hints.keys()}"
        for key, item in value.items():
            hint = hints[key]
            while typing.get_origin(hint) in (typing.NotRequired, typing.Required):
                hint = typing.get_args(hint)[0]
            _conforms(item, hint, f"{where}.{key}")
    elif origin is typing.Literal:
        assert value in args, f"{where}: {value!r} not in {args}"
    elif origin in (collections.abc.Sequence, list):
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            _conforms(item, args[0], f"{where}[{i}]")
    elif origin in (collections.abc.Mapping, dict):
        assert isinstance(value, dict), where
    elif origin is typing.Union:
        assert any(_matches(value, option) for option in args), where
    elif annotation is float:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), where
    elif annotation is not typing.Any:
        assert isinstance(value, annotation), f"{where}: {value!r} is not {annotation}"


def _matches(value, annotation) -> bool:
    try:
        _conforms(value, annotation, "")
    except AssertionError:
        return False
    return True


def test_phoenix_verdicts_match_the_phoenix_span_annotation_schema(attributed: Warehouse, tmp_path: Path):
    from phoenix.client.__generated__.v1 import AnnotateSpansRequestBody

    out = tmp_path / "annotations.json"
    n = export_verdicts(attributed, out, "phoenix", where="json_extract_string(metadata, '$.trace.format') IN ('otlp', 'openinference')")
    body = json.loads(out.read_text())
    _conforms(body, AnnotateSpansRequestBody, "body")
    assert n == len(body["data"]) == 3  # smolagents, langgraph, pydantic-ai (the content-less trace has no verdict)
    assert not _matches({"data": [{k: v for k, v in body["data"][0].items() if k != "span_id"}]}, AnnotateSpansRequestBody)
    by_span = {a["span_id"]: a for a in body["data"]}
    assert by_span["5c3303342574ef20"]["result"]["label"] == "math_agent" and by_span["5c3303342574ef20"]["annotator_kind"] == "LLM"


def test_atif_verdicts_validate_against_harbors_schema_and_import_back(attributed: Warehouse, tmp_path: Path):
    import jsonschema

    schema = json.loads((FIXTURES / "atif.schema.json").read_text())
    n = export_verdicts(attributed, tmp_path / "atif", "atif", where="source LIKE '%inspect_handoff.eval%'")
    [written] = list((tmp_path / "atif").glob("*.json"))
    document = json.loads(written.read_text())
    jsonschema.validate(document, schema)
    assert n == 1 and document["extra"]["rootstep_verdict"]["agent"] == "calculator"
    [back] = load_traces(written)
    original = _failed(load_traces(FIXTURES / "inspect_handoff.eval"))
    # the same steps back: agent steps with their words and calls, tool steps (kept as marked observation results)
    assert [(s.agent, s.kind, s.content, s.tool_calls) for s in back.steps] == \
        [(s.agent, s.kind, s.content, s.tool_calls) for s in original.steps]
    assert back.framework == "inspect" and back.ground_truth == "41" and back.final_answer == original.final_answer


def test_export_verdicts_command(attributed: Warehouse, tmp_path: Path):
    out = tmp_path / "v.json"
    done = CliRunner().invoke(app, ["export", "verdicts", str(out), "--format", "phoenix", "-w", str(attributed.location)])
    assert done.exit_code == 0, done.output
    assert json.loads(out.read_text())["data"] and "verdict(s) as phoenix" in done.output
