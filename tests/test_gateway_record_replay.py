"""Record a multi-agent run through the gateway with the real openai client, then replay it:
exactly, with an intervention at call k or at a step, and with a divergent prefix."""

from __future__ import annotations

import openai
import pytest

from rootstep.gateway import RunContext, register_script
from rootstep.model import Intervention

from ._gateway_support import Harness, run_framework, team_script


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def record(h: Harness, run_id: str = "rec-1", **kwargs) -> list[dict]:
    register_script("team-rec", team_script("REC"))
    h.gateway.register(RunContext(run_id=run_id, framework="toyteam", benchmark="toy", model="scripted/team-rec"))
    return run_framework(h, run_id, **kwargs)


def test_record_multi_agent_run(h):
    received = record(h)
    calls = h.gateway.calls("rec-1")
    assert [c.agent for c in calls] == ["planner", "coder", "planner", "coder"]
    assert all(c.mode == "live" and c.simulated and c.provider == "scripted" for c in calls)
    assert calls[1].response["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "run_python"
    assert received[1]["tool_calls"][0]["function"]["arguments"] == '{"code": "print(6*7)"}'
    assert received[3]["content"].startswith("REC#4 coder")
    assert all(c.counter == 0 for c in calls)  # every request differs: each key seen once
    assert len({c.id for c in calls}) == 4
    assert calls[0].request["messages"][-1]["content"] == "planner, your turn (0)"
    assert calls[0].prompt_tokens > 0 and calls[0].completion_tokens > 0 and calls[0].latency_s > 0
    assert h.gateway.stats("rec-1").live == 4


def test_exact_replay_reproduces_the_run_with_zero_live_calls(h):
    original = record(h, stamp=True)
    # A live call would now get a different answer (or fail): replay must not make one.
    register_script("team-rec", ["a live call happened"], cycle=True)
    h.gateway.register(RunContext(run_id="rep-1", mode="replay", replay_of="rec-1", model="scripted/team-rec"))
    replayed = run_framework(h, "rep-1", stamp=True)  # fresh uuid and timestamp: normalised for matching
    assert replayed == original
    stats = h.gateway.stats("rep-1")
    assert (stats.live, stats.replayed, stats.forced, stats.divergence) == (0, 4, 0, None)
    assert [c.mode for c in h.gateway.calls("rep-1")] == ["replayed"] * 4
    assert all(c.simulated for c in h.gateway.calls("rep-1"))  # replayed scripted output stays labelled
    assert [c.response for c in h.gateway.calls("rep-1")] == [c.response for c in h.gateway.calls("rec-1")]


@pytest.mark.parametrize("k", [0, 2, 3])
def test_intervention_at_call_k(h, k):
    original = record(h)
    register_script("team-live", team_script("LIVE"))
    fix = Intervention(run_id="rec-1", step=0, new_content="FORCED: use 6*7=42 directly")
    h.gateway.register(
        RunContext(run_id=f"int-{k}", mode="replay", replay_of="rec-1", model="scripted/team-live",
                   intervention=fix, intervention_call=k)
    )
    received = run_framework(h, f"int-{k}")
    modes = [c.mode for c in h.gateway.calls(f"int-{k}")]
    assert modes == ["replayed"] * k + ["forced"] + ["live"] * (3 - k)
    assert received[:k] == original[:k]
    assert received[k]["content"] == "FORCED: use 6*7=42 directly"
    for later in received[k + 1 :]:
        if later.get("content"):
            assert later["content"].startswith("LIVE#")
    stats = h.gateway.stats(f"int-{k}")
    assert (stats.replayed, stats.forced, stats.live) == (k, 1, 3 - k)


def test_forced_call_keeps_or_replaces_tool_calls(h):
    record(h)
    register_script("team-live", team_script("LIVE"))
    keep = Intervention(run_id="rec-1", step=1, new_content="I will check the arithmetic first.")
    h.gateway.register(RunContext(run_id="keep", mode="replay", replay_of="rec-1", model="scripted/team-live",
                                  intervention=keep, intervention_call=1))
    received = run_framework(h, "keep")
    assert received[1]["content"] == "I will check the arithmetic first."
    assert received[1]["tool_calls"][0]["function"]["name"] == "run_python"  # the original had a tool call
    forced = h.gateway.calls("keep")[1]
    assert forced.mode == "forced" and forced.response["choices"][0]["finish_reason"] == "tool_calls"
    assert not forced.simulated and forced.response["system_fingerprint"] == "rootstep-forced"

    replace = Intervention(run_id="rec-1", step=1, new_content="",
                           tool_calls=[{"name": "run_python", "arguments": {"code": "print(6*8)"}}])
    h.gateway.register(RunContext(run_id="replace", mode="replay", replay_of="rec-1", model="scripted/team-live",
                                  intervention=replace, intervention_call=1))
    received = run_framework(h, "replace")
    assert received[1]["tool_calls"][0]["function"]["arguments"] == '{"code": "print(6*8)"}'


def test_intervention_addressed_by_step(h):
    record(h, step_headers=True)
    calls = h.gateway.calls("rec-1")
    assert [c.step_index for c in calls] == [0, 1, 2, 3]
    register_script("team-live", team_script("LIVE"))
    fix = Intervention(run_id="rec-1", step=2, new_content="planner: the answer is 42", agent="planner")
    h.gateway.register(RunContext(run_id="by-step", mode="replay", replay_of="rec-1", model="scripted/team-live",
                                  intervention=fix))
    received = run_framework(h, "by-step")
    assert received[2]["content"] == "planner: the answer is 42"
    assert [c.mode for c in h.gateway.calls("by-step")] == ["replayed", "replayed", "forced", "live"]


def test_step_without_calls_is_a_readable_error(h):
    record(h)
    with pytest.raises(ValueError, match="step 7 of run rec-1 has no recorded call"):
        h.gateway.register(RunContext(run_id="nope", mode="replay", replay_of="rec-1", model="scripted/team-rec",
                                      intervention=Intervention(run_id="rec-1", step=7, new_content="x")))


def test_divergent_prefix_aborts_with_a_diff(h):
    record(h)
    h.gateway.register(RunContext(run_id="div", mode="replay", replay_of="rec-1", model="scripted/team-rec"))
    with pytest.raises(openai.ConflictError) as info:
        run_framework(h, "div", task="Compute 6*8")  # the task changed: the very first request differs
    message = info.value.response.json()["error"]["message"]
    assert "replay of run rec-1 diverged" in message and "agent 'planner'" in message
    assert '-   "content": "Compute 6*7",' in message and '+   "content": "Compute 6*8",' in message
    assert h.gateway.stats("div").divergence is not None
    assert h.gateway.stats("div").live == 0 and h.gateway.calls("div") == []


def test_repeated_identical_requests_match_by_occurrence(h):
    register_script("echo", ["first", "second", "third"])
    h.gateway.register(RunContext(run_id="same", model="scripted/echo"))
    ask = [{"role": "user", "content": "again?"}]
    a, b = h.client("same", "a"), h.client("same", "b")
    out = [a.chat.completions.create(model="m", messages=ask).choices[0].message.content,
           b.chat.completions.create(model="m", messages=ask).choices[0].message.content,
           a.chat.completions.create(model="m", messages=ask).choices[0].message.content]
    assert out == ["first", "second", "third"]
    assert [(c.agent, c.counter) for c in h.gateway.calls("same")] == [("a", 0), ("b", 0), ("a", 1)]

    h.gateway.register(RunContext(run_id="same-rep", mode="replay", replay_of="same", model="scripted/echo"))
    a, b = h.client("same-rep", "a"), h.client("same-rep", "b")
    # Another interleaving: agent a twice, then b. Matching is per (agent, request, occurrence), not global order.
    again = [a.chat.completions.create(model="m", messages=ask).choices[0].message.content,
             a.chat.completions.create(model="m", messages=ask).choices[0].message.content,
             b.chat.completions.create(model="m", messages=ask).choices[0].message.content]
    assert again == ["first", "third", "second"]
    with pytest.raises(openai.ConflictError, match="this is occurrence 3"):
        a.chat.completions.create(model="m", messages=ask)


def test_record_through_litellm_openai_provider_with_custom_api_base(h, tmp_path):
    """A real litellm provider path (`openai/...` over HTTP to a custom `api_base`): the upstream
    here is a second gateway serving a script, standing in for any OpenAI-compatible server."""
    from ._gateway_support import Harness as _Harness

    upstream = _Harness(tmp_path / "upstream")
    try:
        register_script("upstream", ["from upstream", "streamed from upstream"])
        upstream.gateway.register(RunContext(run_id="up", model="scripted/upstream"))
        h.gateway.register(RunContext(run_id="via-openai", model="openai/some-model",
                                      api_base=upstream.server.base_url("up", "proxy"), api_key="sk-upstream-key"))
        client = h.client("via-openai", "solver")
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "from upstream"
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}], stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "streamed from upstream"
        calls = h.gateway.calls("via-openai")
        assert [(c.provider, c.mode, c.simulated) for c in calls] == [("openai", "live", False)] * 2
        assert calls[1].response["choices"][0]["message"]["content"] == "streamed from upstream"
        assert all("sk-upstream-key" not in c.model_dump_json() for c in calls)
        assert [c.agent for c in upstream.gateway.calls("up")] == ["proxy", "proxy"]
    finally:
        upstream.close()


def test_persistent_intervention_keeps_instructing_the_agent_after_the_forced_call(h):
    """`Intervention.persist`: every later live call of the intervened agent carries the instruction in its
    system prompt (what the provider sees and the journal records); the other agent's calls do not, and
    the request hash stays that of what the framework sent."""
    record(h)
    seen: list[tuple[str, str]] = []

    def live(messages, params):
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        seen.append((messages[-1]["content"], system))
        return "LIVE answer"

    register_script("team-persist", live)
    corruption = Intervention(run_id="rec-1", step=0, new_content="I will use 6*8.", kind="corruption",
                              persist="Always multiply by 8, never by 7.")
    h.gateway.register(RunContext(run_id="per-1", mode="replay", replay_of="rec-1", model="scripted/team-persist",
                                  intervention=corruption, intervention_call=0))
    run_framework(h, "per-1")
    calls = h.gateway.calls("per-1")
    assert [(c.agent, c.mode) for c in calls] == [("planner", "forced"), ("coder", "live"), ("planner", "live"),
                                                 ("coder", "live")]
    planner_live = calls[2]
    assert planner_live.request["messages"][0]["content"].endswith("\n\nAlways multiply by 8, never by 7.")
    assert all("multiply by 8" not in str(c.request) for c in calls if c.agent == "coder")
    assert [("multiply by 8" in system) for _, system in seen] == [False, True, False]
    from rootstep.gateway._hashing import request_hash

    assert planner_live.request_hash != request_hash(planner_live.request)  # hashed as the framework sent it


def test_with_instruction_adds_a_system_message_or_a_text_part():
    from rootstep.gateway._replay import with_instruction

    body = {"messages": [{"role": "user", "content": "hi"}]}
    assert with_instruction(body, "Be brief.")["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["messages"] == [{"role": "user", "content": "hi"}]  # a copy: the request is not touched
    parts = {"messages": [{"role": "system", "content": [{"type": "text", "text": "You code."}]}]}
    assert with_instruction(parts, "Be brief.")["messages"][0]["content"][-1] == {"type": "text", "text": "\n\nBe brief."}
