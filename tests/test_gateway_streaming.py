"""Streaming (SSE) through the gateway: live, replayed and forced; tool calls; a client that hangs up."""

from __future__ import annotations

import time

import httpx
import pytest

from rootstep.gateway import RunContext, Script, register_script
from rootstep.model import Intervention

from ._gateway_support import TOOLS, Harness


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def collect(stream) -> tuple[str, list[dict], str | None, object]:
    text, tools, finish, usage = "", {}, None, None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                slot = tools.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                slot["id"] = call.id or slot["id"]
                slot["name"] += call.function.name or ""
                slot["arguments"] += call.function.arguments or ""
            finish = choice.finish_reason or finish
    return text, [tools[i] for i in sorted(tools)], finish, usage


def test_streaming_text_and_tool_calls_are_recorded_whole(h):
    register_script("streamer", [
        "The answer is forty two.",
        {"content": "Let me run it.", "tool_calls": [{"name": "run_python", "arguments": {"code": "print(42)"}}]},
    ])
    h.gateway.register(RunContext(run_id="s1", model="scripted/streamer"))
    client = h.client("s1", "solo")
    ask = [{"role": "user", "content": "what is 6*7?"}]
    text, tools, finish, usage = collect(client.chat.completions.create(model="m", messages=ask, stream=True))
    assert (text, tools, finish) == ("The answer is forty two.", [], "stop")
    assert usage is not None and usage.completion_tokens == 5
    text, tools, finish, _ = collect(
        client.chat.completions.create(model="m", messages=ask + [{"role": "user", "content": "run it"}], tools=TOOLS, stream=True)
    )
    assert text == "Let me run it." and finish == "tool_calls"
    assert tools[0]["name"] == "run_python" and tools[0]["arguments"] == '{"code": "print(42)"}'
    calls = h.gateway.calls("s1")
    assert [c.response["choices"][0]["message"]["content"] for c in calls] == ["The answer is forty two.", "Let me run it."]
    assert calls[1].response["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "run_python"
    assert calls[0].request["stream"] is True


def test_streamed_replay_and_forced_call(h):
    register_script("streamer", ["one", "two"])
    h.gateway.register(RunContext(run_id="s2", model="scripted/streamer"))
    client = h.client("s2", "solo")
    asks = [[{"role": "user", "content": "first"}], [{"role": "user", "content": "second"}]]
    recorded = [collect(client.chat.completions.create(model="m", messages=a, stream=True))[0] for a in asks]
    assert recorded == ["one", "two"]

    # Replay: a non-streaming recording replays to a streaming client and back; here stream -> stream.
    h.gateway.register(RunContext(run_id="s2-rep", mode="replay", replay_of="s2", model="scripted/streamer"))
    client = h.client("s2-rep", "solo")
    assert [collect(client.chat.completions.create(model="m", messages=a, stream=True))[0] for a in asks] == recorded
    assert h.gateway.stats("s2-rep").live == 0

    h.gateway.register(RunContext(run_id="s2-int", mode="replay", replay_of="s2", model="scripted/streamer",
                                  intervention=Intervention(run_id="s2", step=0, new_content="forced two"),
                                  intervention_call=1))
    client = h.client("s2-int", "solo")
    assert collect(client.chat.completions.create(model="m", messages=asks[0], stream=True))[0] == "one"
    assert collect(client.chat.completions.create(model="m", messages=asks[1], stream=True))[0] == "forced two"
    assert [c.mode for c in h.gateway.calls("s2-int")] == ["replayed", "forced"]


def test_client_disconnect_mid_stream_leaves_no_record(h):
    words = " ".join(f"word{i}" for i in range(40))
    register_script("slow", Script(responses=[words, "after the hang-up"], latency_s=0.8))
    h.gateway.register(RunContext(run_id="s3", model="scripted/slow"))
    url = h.server.base_url("s3", "solo") + "/chat/completions"
    body = {"model": "m", "messages": [{"role": "user", "content": "talk"}], "stream": True}
    with httpx.Client(timeout=10) as http:
        with http.stream("POST", url, json=body) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("data: "):
                    break  # the first chunk arrived: hang up while the rest is still coming
    deadline = time.monotonic() + 60  # a bound for a slow machine; the loop ends when the abort is seen
    while h.gateway.stats("s3").aborted == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert h.gateway.stats("s3").aborted == 1
    assert h.gateway.calls("s3") == []
    assert h.gateway.journal.path("s3").exists() is False or h.gateway.journal.path("s3").read_text() == ""
    # The same request again gets occurrence 0: the aborted call left no gap in the counters.
    reply = h.client("s3", "solo").chat.completions.create(model="m", messages=body["messages"])
    assert reply.choices[0].message.content == "after the hang-up"
    assert [(c.counter, c.mode) for c in h.gateway.calls("s3")] == [(0, "live")]
