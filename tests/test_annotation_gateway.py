"""The analyzer's and perturber's calls go through the session's gateway like an agent's: journaled as
`llm_calls` rows (purpose `annotation`) of a gateway run of their own, costed, and kept on the annotation
as its transcript (`Evidence.transcript`), which `rootstep show` prints. The search is the pure one of
tests/test_annotation_core.py (a simulated run, no Docker); the analyzer is a scripted model."""

from __future__ import annotations

import json

from rich.console import Console

from rootstep.annotation import Budget, find_decisive_step
from rootstep.gateway import register_script
from rootstep.gateway import Chat
from rootstep.model import Recording, Task

from .test_annotation_core import Ledger, at_step, correct_value, decline, diag


def _recorded_ledger_run(ledger: Ledger):
    task = Task(benchmark="ledger", task_id="t1", prompt="Start at 4, apply the plan.", verifier="numeric", kind="math")
    return ledger.trajectory().model_copy(update={"recording": Recording(gateway_run_id="sim-t1-rec", task=task)})


def test_a_scripted_analyzers_calls_are_in_llm_calls_and_its_transcript_on_the_annotation(tmp_path):
    from rootstep._render import print_trajectory
    from rootstep.flows._session import open_session
    from rootstep.flows._searches import Annotated, AnnotatedRun, annotator_chat as _chat

    seen: list[dict] = []

    def analyzer(messages, params):
        seen.append(params)
        if at_step(messages[-1]["content"]) is not None:
            return decline()
        # the first proposal is not JSON: re-asked (sampled, since the analyzer is greedy), then a fix of step 3
        return "step 3 looks wrong" if len(seen) == 1 else diag(3)

    register_script("gw-analyzer", analyzer)
    ledger = Ledger({3})
    run = _recorded_ledger_run(ledger)
    with open_session(str(tmp_path / "wh")) as session:
        session.warehouse.write_trajectories([run])
        chat = _chat(session, "scripted/gw-analyzer", None, run, "analyzer")
        result = find_decisive_step(run, run.verdict, None, chat, ledger.replay, Budget())
        a = result.annotation
        assert (a.status, a.verified, a.step) == ("labelled", True, 3)
        row = AnnotatedRun(method="counterfactual", run_id=run.id, framework=run.framework,
                           benchmark=run.benchmark, task_id=run.task_id, status=a.status)
        session.store(Annotated(row=row, replays=result.replays, annotations=[a],
                                calls=session.gateway.calls(a.evidence.transcript_run_id)))
        wh = session.warehouse
        stored = wh.annotations(run.id)
        calls = wh.rows("SELECT * FROM llm_calls WHERE run_id = ? ORDER BY created_at", [a.evidence.transcript_run_id])

    # four analyzer calls: the bad answer, its re-ask, then steps 0 and 1 examined and declined
    transcript = a.evidence.transcript
    assert [(x.prompt_name, x.problem is None) for x in transcript] == [
        ("analyzer.j2", False), ("analyzer.j2", True), ("analyzer_at_step.j2", True), ("analyzer_at_step.j2", True)]
    assert a.evidence.fix == f"I recompute carefully: value = {correct_value(3)}"
    assert a.evidence.transcript_run_id.startswith(f"analyzer-{run.id}-")
    assert [c["id"] for c in calls] == [x.call_id for x in transcript]
    assert {(c["agent"], c["purpose"], c["model"], c["mode"], c["framework"]) for c in calls} == {
        ("analyzer", "annotation", "scripted/gw-analyzer", "live", "sim")}
    assert [json.loads(c["response"])["choices"][0]["message"]["content"] for c in calls] == [x.answer for x in transcript]
    assert a.cost.llm_calls == 4 + 3 + 3  # the analyzer's 4 calls, the fix's and the control's 3 live calls each
    # the re-ask was sampled, and the temperature given back for the next proposal
    assert [json.loads(c["request"])["temperature"] for c in calls] == [0.0, 0.7, 0.0, 0.0]
    assert [p["temperature"] for p in seen] == [0.0, 0.7, 0.0, 0.0]

    [back] = stored
    assert back == a and back.id == a.id and back.evidence.transcript == transcript
    console = Console(record=True, width=200)
    print_trajectory(console, run.id, run, back, stored, width=300)
    text = console.export_text()
    assert "counterfactual transcript" in text and "analyzer_at_step.j2" in text and calls[0]["id"] in text
    assert "gateway run sim-t1-rec" in text


def test_the_transcript_is_not_part_of_the_annotation_id():
    ledger = Ledger({3})
    run = ledger.trajectory()
    register_script("gw-plain", lambda messages, params: decline() if at_step(messages[-1]["content"]) is not None
                    else diag(3))
    a = find_decisive_step(run, run.verdict, None, Chat("scripted/gw-plain"), ledger.replay, Budget()).annotation
    assert len(a.evidence.transcript) == 3 and a.evidence.transcript_run_id is None  # no gateway: litellm directly
    bare = a.model_copy(update={"evidence": a.evidence.model_copy(update={"transcript": []})})
    assert bare.id == a.id


def test_json_mode_goes_with_every_call_through_the_gateway(tmp_path):
    """What `_chat` sends a `local/` analyzer (llama.cpp's JSON grammar) reaches the provider through the gateway."""
    from rootstep.gateway import Gateway, GatewayServer, RunContext

    seen: list[dict] = []
    register_script("gw-json", lambda messages, params: seen.append(params) or '{"ok": true}')
    gateway = Gateway(tmp_path / "journal")
    gateway.register(RunContext(run_id="perturber-x", framework="sim", benchmark="ledger", model="scripted/gw-json"))
    with GatewayServer(gateway) as server:
        chat = Chat("scripted/gw-json", extra={"response_format": {"type": "json_object"}},
                    gateway_route=server.base_url("perturber-x", "perturber"), gateway_run_id="perturber-x")
        assert chat("corrupt step 2") == '{"ok": true}'
    [call] = gateway.calls("perturber-x")
    assert call.id == chat.last_call_id and call.request["response_format"] == {"type": "json_object"}
    assert seen[0]["response_format"] == {"type": "json_object"}
    assert (chat.usage.llm_calls, call.agent, call.purpose) == (1, "perturber", "annotation")
    gateway.close()
