"""Faults: provider errors and timeouts, retries, bad requests, unknown runs, a run that ends with a call in
flight, a gateway restart with a torn journal line, and the API key that must never reach a row, a log line or an error message."""

from __future__ import annotations

import logging
import threading
import time

import litellm
import openai
import pytest
from litellm import CustomLLM, ModelResponse
from litellm.llms.custom_llm import CustomLLMError

from rootstep.gateway import RunContext, Script, register_provider, register_script

from ._gateway_support import Harness

SECRET = "sk-TEST-SECRET-0123456789abcdef"
CLIENT_SECRET = "sk-CLIENT-SIDE-SECRET-987"
ASK = [{"role": "user", "content": "hello"}]


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def test_rate_limit_is_retried_with_backoff(h):
    script = register_script("flaky", [CustomLLMError(status_code=429, message="slow down"), "fine now"])
    h.gateway.register(RunContext(run_id="f1", model="scripted/flaky"))
    reply = h.client("f1", "a").chat.completions.create(model="m", messages=ASK)
    assert reply.choices[0].message.content == "fine now"
    assert script.calls == 2
    assert [(c.mode, c.error) for c in h.gateway.calls("f1")] == [("live", None)]


def test_persistent_rate_limit_is_a_clear_error_and_an_error_row(h):
    register_script("limited", [CustomLLMError(status_code=429, message="quota exhausted")], cycle=True)
    h.gateway.register(RunContext(run_id="f2", model="scripted/limited"))
    with pytest.raises(openai.RateLimitError) as info:
        h.client("f2", "a").chat.completions.create(model="m", messages=ASK)
    error = info.value.response.json()["error"]
    assert error["type"] == "rate_limit" and "after 3 attempt(s)" in error["message"] and "quota exhausted" in error["message"]
    (row,) = h.gateway.calls("f2")
    assert row.error is not None and "quota exhausted" in row.error and row.response["error"]["code"] == 429
    assert h.gateway.stats("f2").errors == 1

    # Replaying the run reproduces the failure (from the recording, with no provider call).
    h.gateway.register(RunContext(run_id="f2-rep", mode="replay", replay_of="f2", model="scripted/limited"))
    with pytest.raises(openai.RateLimitError, match="replayed from the recording"):
        h.client("f2-rep", "a").chat.completions.create(model="m", messages=ASK)
    assert [c.mode for c in h.gateway.calls("f2-rep")] == ["replayed"]


def test_timeout_surfaces_as_504_and_error_row(h):
    timeout = litellm.Timeout(message="provider took too long", model="slow", llm_provider="scripted")
    register_script("timeouts", [timeout], cycle=True)
    h.gateway.register(RunContext(run_id="f3", model="scripted/timeouts"))
    with pytest.raises(openai.APIStatusError) as info:
        h.client("f3", "a").chat.completions.create(model="m", messages=ASK)
    assert info.value.status_code == 504 and "timeout" in info.value.response.json()["error"]["type"]
    (row,) = h.gateway.calls("f3")
    assert "took too long" in row.error


def test_streaming_provider_error_is_an_error_event_and_row(h):
    register_script("broken", [CustomLLMError(status_code=400, message="bad prompt")])
    h.gateway.register(RunContext(run_id="f4", model="scripted/broken"))
    with pytest.raises(openai.APIError, match="bad prompt"):
        for _ in h.client("f4", "a").chat.completions.create(model="m", messages=ASK, stream=True):
            pass
    (row,) = h.gateway.calls("f4")
    assert row.error is not None and "bad prompt" in row.error


def test_a_run_that_ends_stops_its_call_in_flight_and_journals_nothing(h):
    """An episode cut by its time limit unregisters its run while an agent's call is still being answered: the
    provider call is cancelled (a local model stops generating), the client gets 410, nothing is journaled."""
    register_script("slow-end", Script(responses=["too late"], latency_s=600))
    h.gateway.register(RunContext(run_id="e1", model="scripted/slow-end"))
    outcome: dict[str, object] = {}

    def ask() -> None:
        try:
            h.client("e1", "a", timeout=600).chat.completions.create(model="m", messages=ASK)
        except openai.APIStatusError as exc:
            outcome["error"] = exc

    caller = threading.Thread(target=ask)
    caller.start()
    deadline = time.monotonic() + 120  # a bound for a slow machine; the loop ends once the call is in flight
    while not h.gateway.run("e1").in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    assert h.gateway.run("e1").in_flight, "the call never reached the provider"
    stats = h.gateway.unregister("e1")
    caller.join(120)  # far less than the script's 600 s: the call was stopped, not waited for
    assert not caller.is_alive()
    error = outcome["error"]
    assert isinstance(error, openai.APIStatusError) and error.status_code == 410 and "ended" in str(error)
    assert stats.cancelled == 1 and stats.aborted == 0 and stats.live == 0
    assert h.gateway.calls("e1") == []


def test_a_run_ended_just_before_its_call_reaches_the_provider_never_calls_it(h, monkeypatch):
    """The race: the run ends (another thread) after the call found its run, before the provider is called."""
    script = register_script("never", ["not asked"])
    h.gateway.register(RunContext(run_id="e2", model="scripted/never"))
    provider_body = h.gateway._provider_body

    def run_ends_now(run, agent, body):
        h.gateway.unregister("e2")
        return provider_body(run, agent, body)

    monkeypatch.setattr(h.gateway, "_provider_body", run_ends_now)
    with pytest.raises(openai.APIStatusError) as refused:
        h.client("e2", "a").chat.completions.create(model="m", messages=ASK)
    assert refused.value.status_code == 410
    assert script.calls == 0 and h.gateway.journal.calls("e2") == []


def test_malformed_requests_and_unknown_runs(h):
    import httpx

    h.gateway.register(RunContext(run_id="f5", model="scripted/none"))
    url = h.server.url
    with httpx.Client() as http:
        bad_json = http.post(f"{url}/run/f5/agent/a/v1/chat/completions", content=b"{not json")
        assert bad_json.status_code == 400 and "not JSON" in bad_json.json()["error"]["message"]
        no_messages = http.post(f"{url}/run/f5/agent/a/v1/chat/completions", json={"model": "m"})
        assert no_messages.status_code == 400 and "messages" in no_messages.json()["error"]["message"]
        bad_step = http.post(f"{url}/run/f5/agent/a/v1/chat/completions", json={"model": "m", "messages": ASK},
                             headers={"X-Rootstep-Purpose": "gossip"})
        assert bad_step.status_code == 400 and "X-Rootstep-Purpose" in bad_step.json()["error"]["message"]
    with pytest.raises(openai.NotFoundError, match="run 'ghost' is not registered"):
        h.client("ghost", "a").chat.completions.create(model="m", messages=ASK)
    with pytest.raises(openai.NotFoundError, match="no script named 'none'"):
        h.client("f5", "a").chat.completions.create(model="m", messages=ASK)
    assert h.gateway.calls("f5")[0].error is not None


def test_plain_v1_route_takes_run_and_agent_from_headers(h):
    register_script("plain", ["via headers", "via default"])
    h.gateway.register(RunContext(run_id="f6", model="scripted/plain"), default=True)
    client = openai.OpenAI(base_url=h.server.url + "/v1", api_key="x", max_retries=0,
                           default_headers={"X-Rootstep-Run": "f6", "X-Rootstep-Agent": "critic"})
    assert client.chat.completions.create(model="m", messages=ASK).choices[0].message.content == "via headers"
    assert [m.id for m in client.models.list()] == ["scripted/plain"]
    bare = openai.OpenAI(base_url=h.server.url + "/v1", api_key="x", max_retries=0)
    assert bare.chat.completions.create(model="m", messages=ASK).choices[0].message.content == "via default"
    assert [c.agent for c in h.gateway.calls("f6")] == ["critic", "unknown"]


def test_gateway_restart_keeps_the_journal(tmp_path):
    register_script("restart", ["one", "two", "three"])
    first = Harness(tmp_path)
    first.gateway.register(RunContext(run_id="r1", model="scripted/restart"))
    client = first.client("r1", "a")
    client.chat.completions.create(model="m", messages=ASK)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "more"}])
    first.close()
    path = tmp_path / "journal" / "r1.jsonl"
    with path.open("ab") as f:  # a crash in the middle of a write leaves a torn last line
        f.write(b'{"run_id":"r1","framework":"unkn')

    second = Harness(tmp_path)
    try:
        second.gateway.register(RunContext(run_id="r1", model="scripted/restart"))
        assert [c.response["choices"][0]["message"]["content"] for c in second.gateway.calls("r1")] == ["one", "two"]
        reply = second.client("r1", "a").chat.completions.create(model="m", messages=ASK)
        assert reply.choices[0].message.content == "three"
        calls = second.gateway.calls("r1")
        assert [c.counter for c in calls] == [0, 0, 1]  # the repeated request continues its occurrence count
        assert len({c.id for c in calls}) == 3
        second.gateway.register(RunContext(run_id="r1-rep", mode="replay", replay_of="r1", model="scripted/restart"))
        rep = second.client("r1-rep", "a")
        assert rep.chat.completions.create(model="m", messages=ASK).choices[0].message.content == "one"
        assert second.gateway.stats("r1-rep").replayed == 1
    finally:
        second.close()


def test_replay_resumed_after_a_restart_stays_live_after_the_intervention(tmp_path):
    from rootstep.model import Intervention

    register_script("resume", ["r0", "r1", "r2"])
    asks = [[{"role": "user", "content": f"q{i}"}] for i in range(3)]
    first = Harness(tmp_path)
    first.gateway.register(RunContext(run_id="rs", model="scripted/resume"))
    for ask in asks:
        first.client("rs", "a").chat.completions.create(model="m", messages=ask)
    register_script("resume", ["live-1", "live-2"])
    ctx = RunContext(run_id="rs-int", mode="replay", replay_of="rs", model="scripted/resume",
                     intervention=Intervention(run_id="rs", step=0, new_content="forced"), intervention_call=0)
    first.gateway.register(ctx)
    assert first.client("rs-int", "a").chat.completions.create(model="m", messages=asks[0]).choices[0].message.content == "forced"
    first.close()

    second = Harness(tmp_path)  # the gateway restarts in the middle of the replay
    try:
        second.gateway.register(ctx)
        out = [second.client("rs-int", "a").chat.completions.create(model="m", messages=a).choices[0].message.content
               for a in asks[1:]]
        assert out == ["live-1", "live-2"]
        assert [c.mode for c in second.gateway.calls("rs-int")] == ["forced", "live", "live"]
    finally:
        second.close()


def test_journal_flushes_to_the_warehouse_once(h, warehouse):
    register_script("wh", ["a", "b"])
    h.gateway.register(RunContext(run_id="w1", framework="toyteam", benchmark="toy", model="scripted/wh"))
    client = h.client("w1", "a")
    client.chat.completions.create(model="m", messages=ASK)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
    assert h.gateway.flush(warehouse, ["w1"]).written["llm_calls"] == 2
    assert h.gateway.flush(warehouse, ["w1"]).written.get("llm_calls", 0) == 0
    assert warehouse.count("llm_calls") == 2


class _KeyEcho(CustomLLM):
    """A provider that checks the key it gets and, like some real ones, echoes it in its errors."""

    seen: list[str | None] = []

    async def acompletion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                          encoding, api_key, logging_obj, optional_params, *args, **kwargs):
        _KeyEcho.seen.append(api_key)
        logging.getLogger("rootstep.gateway").warning("calling provider with key %s", api_key)
        if messages[-1]["content"] == "fail":
            raise CustomLLMError(status_code=401, message=f"Incorrect API key provided: {api_key}")
        return ModelResponse(model=model, choices=[{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                                    "finish_reason": "stop"}])


def test_api_key_never_stored_logged_or_returned(h, caplog):
    caplog.set_level(logging.DEBUG)
    register_provider("keyecho", _KeyEcho)
    h.gateway.register(RunContext(run_id="k1", model="keyecho/m", api_key=SECRET))
    client = openai.OpenAI(base_url=h.server.base_url("k1", "a"), api_key=CLIENT_SECRET, max_retries=0)
    client.chat.completions.create(model="m", messages=ASK, extra_body={"api_key": CLIENT_SECRET})
    with pytest.raises(openai.AuthenticationError) as info:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "fail"}])
    assert _KeyEcho.seen[-2:] == [SECRET, SECRET]  # the provider got the gateway's key, never the client's
    assert SECRET not in info.value.response.text and "Incorrect API key provided" in info.value.response.text
    journal_text = h.gateway.journal.path("k1").read_text()
    # The client runs in this process too: its own loggers (openai, httpx, httpcore) log what *it* sent.
    client_side = ("openai", "httpx", "httpcore")
    gateway_logs = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith(client_side))
    rows = h.gateway.calls("k1")
    assert len(rows) == 2 and rows[1].error is not None
    for secret in (SECRET, CLIENT_SECRET):
        assert secret not in journal_text
        assert all(secret not in row.model_dump_json() for row in rows)
        assert secret not in gateway_logs
    assert "api_key" not in rows[0].request
    assert "calling provider with key ***" in gateway_logs  # the log line was kept, the key scrubbed
    ctx = h.gateway.run("k1").ctx
    assert SECRET not in repr(ctx) and SECRET not in ctx.model_dump_json()
