"""Pieces of the gateway on their own: hashing and redaction, the journal, the cache, the CLI, and the
offline default model."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
from typer.testing import CliRunner

from rootstep.gateway import Journal, RunContext, canonical_request, redact, register_script, request_hash
from rootstep.model import Intervention, LLMCall

from ._gateway_support import Harness


def test_hash_ignores_uuids_timestamps_stream_and_credentials_but_not_content():
    a = {"model": "x", "messages": [{"role": "user", "content": "id 0b7e2c7a-3c52-4b8e-9f62-2f1a64c1d0aa at 2026-11-22T21:40:03.123Z"}]}
    b = {"model": "y", "stream": True, "api_key": "sk-1", "messages": [
        {"role": "user", "content": "id 5d1b7f9e-1111-4c2d-8e3f-000000000000 at 2026-11-23 08:00:00+01:00"}]}
    assert request_hash(a) == request_hash(b)
    assert request_hash(a) != request_hash({**a, "temperature": 0.5})
    assert request_hash(a) != request_hash({"messages": [{"role": "user", "content": "something else"}]})
    assert canonical_request(b)["messages"][0]["content"] == "id <uuid> at <timestamp>"
    assert redact({"api_key": "k", "x": {"Authorization": "Bearer k", "y": [{"api_key": "k"}]}}) == {"x": {"y": [{}]}}



def test_hash_ignores_the_memory_address_of_an_object_repr():
    """smolagents showed the manager the repr of the function its code defined (a real replay of MBPP 478 on
    the issue-23 slice): the address differs in every process, and every replay past that step diverged."""
    def observed(address: str) -> dict:
        text = ("Observation:\nExecution logs:\nLast output from code snippet:\n"
                f"<function create_function.<locals>.new_func at {address}>")
        return {"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}

    assert request_hash(observed("0x7f0f59145bc0")) == request_hash(observed("0x7f1508539bc0"))
    assert canonical_request(observed("0x7f0f59145bc0"))["messages"][0]["content"][0]["text"].endswith(
        "new_func at <address>>")
    assert request_hash({"messages": [{"role": "user", "content": "jump to 0x7f0f59145bc0"}]}) != request_hash(
        {"messages": [{"role": "user", "content": "jump to 0x7f1508539bc0"}]})  # a hex number alone is content


def _call(run_id: str, counter: int) -> LLMCall:
    return LLMCall(run_id=run_id, framework="f", benchmark="b", agent="a", request_hash="h", counter=counter,
                   model="scripted/x", provider="scripted", response={"choices": []})


def test_journal_skips_torn_lines_and_repairs_the_tail(tmp_path):
    journal = Journal(tmp_path)
    journal.append(_call("r", 0))
    journal.close()
    with journal.path("r").open("ab") as f:
        f.write(b'{"run_id": "r", "torn')
    journal = Journal(tmp_path)
    journal.append(_call("r", 1))
    assert [c.counter for c in journal.calls("r")] == [0, 1]
    lines = journal.path("r").read_bytes().split(b"\n")
    assert lines[1] == b'{"run_id": "r", "torn' and json.loads(lines[2])["counter"] == 1


def test_response_cache_serves_temperature_zero_repeats(tmp_path):
    script = register_script("cached", ["first", "second", "third"])
    h = Harness(tmp_path, cache=True)
    try:
        h.gateway.register(RunContext(run_id="c1", model="scripted/cached", cache=True))
        client = h.client("c1", "a")
        ask = [{"role": "user", "content": "same question"}]
        answers = [client.chat.completions.create(model="m", messages=ask, temperature=0).choices[0].message.content
                   for _ in range(2)]
        warm = client.chat.completions.create(model="m", messages=ask, temperature=0.7).choices[0].message.content
        assert answers == ["first", "first"] and warm == "second"
        assert script.calls == 2
        assert [c.mode for c in h.gateway.calls("c1")] == ["live", "cached", "live"]
        assert h.gateway.stats("c1").cached == 1
        h.gateway.register(RunContext(run_id="c2", model="scripted/cached"))  # not opted in
        assert h.client("c2", "a").chat.completions.create(model="m", messages=ask, temperature=0).choices[0].message.content == "third"
    finally:
        h.close()


def test_run_context_checks_its_replay_settings():
    with pytest.raises(ValueError, match="needs `replay_of`"):
        RunContext(run_id="r", mode="replay")
    with pytest.raises(ValueError, match="its own run_id"):
        RunContext(run_id="r", mode="replay", replay_of="r")
    with pytest.raises(ValueError, match="names run 'other'"):
        RunContext(run_id="r2", mode="replay", replay_of="r",
                   intervention=Intervention(run_id="other", step=0, new_content="x"))
    with pytest.raises(ValueError, match="needs mode='replay'"):
        RunContext(run_id="r", intervention=Intervention(run_id="r", step=0, new_content="x"))


def test_cli_models_lists_the_offline_default():
    from rootstep.cli import app

    result = CliRunner().invoke(app, ["gateway", "models"])
    assert result.exit_code == 0, result.output
    assert "local/qwen2.5-coder-0.5b" in result.output and "(agents' default)" in result.output
    assert "local/qwen2.5-coder-1.5b" in result.output and "(analyzer/perturber default)" in result.output
    assert "local/gemma-3-270m" in result.output and "scripted/<name>" in result.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_serve_runs_as_a_subprocess(tmp_path):
    port = _free_port()
    rootstep = os.path.join(os.path.dirname(sys.executable), "rootstep")
    proc = subprocess.Popen(
        [rootstep, "gateway", "serve", "--port", str(port), "--journal-dir", str(tmp_path),
         "--run-id", "cli-run", "--model", "scripted/nothing"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 300  # the CLI imports litellm first: 60 s ran out on a busy 2-core machine
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stdout.read().decode()
                assert time.monotonic() < deadline, "the gateway subprocess did not come up"
                time.sleep(0.2)
        assert health.json() == {"ok": True, "runs": 1}
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models").json()
        assert "scripted/nothing" in [m["id"] for m in models["data"]]
        # No script is registered in that process: a clear 404 from the scripted provider, journaled.
        reply = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                           json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert reply.status_code == 404 and "no script named 'nothing'" in reply.json()["error"]["message"]
        assert (tmp_path / "cli-run.jsonl").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.realmodel
def test_offline_default_model_generates_text(tmp_path):
    pytest.importorskip("xllamacpp")
    h = Harness(tmp_path)
    try:
        h.gateway.register(RunContext(run_id="local-1"))  # the default model: no key, no network
        reply = h.client("local-1", "a", timeout=900).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "The capital of France is"}], max_tokens=8, temperature=0
        )
        (call,) = h.gateway.calls("local-1")
        assert call.model == "local/qwen2.5-coder-0.5b" and call.provider == "local" and not call.simulated
        assert reply.choices[0].message.content.strip()
        assert 0 < call.completion_tokens <= 8 and call.prompt_tokens > 0
    finally:
        h.close()


def test_admin_routes_register_report_and_need_the_token(tmp_path):
    from rootstep.gateway import Gateway, GatewayServer

    register_script("admin", ["via admin"])
    gateway = Gateway(tmp_path / "journal")
    with GatewayServer(gateway, admin_token="let-me-in") as server, httpx.Client(base_url=server.url) as http:
        run = {"run_id": "adm", "framework": "toyteam", "benchmark": "toy", "model": "scripted/admin", "default": True}
        assert http.post("/admin/runs", json=run).status_code == 401
        auth = {"Authorization": "Bearer let-me-in"}
        assert http.post("/admin/runs", json=run, headers=auth).json() == {"registered": "adm", "mode": "record"}
        bad = http.post("/admin/runs", json={"run_id": "x", "framework": "no spaces allowed"}, headers=auth)
        assert bad.status_code == 400 and "framework" in bad.json()["error"]["message"]
        reply = http.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert reply.json()["choices"][0]["message"]["content"] == "via admin"
        assert reply.headers["x-rootstep-mode"] == "live" and reply.headers["x-rootstep-call-id"].startswith("call_")
        assert http.get("/admin/runs/adm", headers=auth).json()["live"] == 1
        assert http.delete("/admin/runs/adm", headers=auth).json()["live"] == 1
        assert http.get("/admin/runs/adm", headers=auth).status_code == 404
    gateway.close()


def test_per_model_concurrency_limit(tmp_path, monkeypatch):
    """At most `max_concurrency` calls of one model are in flight at once; another model's run beside them
    (counted, not timed: a slow machine changes the durations, never the counts)."""
    import asyncio
    from collections import Counter

    import litellm

    from rootstep.gateway import Gateway, Providers, Script

    register_script("limited-a", Script(fn=lambda m, p: "ok", latency_s=0.05))
    register_script("limited-b", Script(fn=lambda m, p: "ok", latency_s=0.05))
    in_flight: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    together: list[int] = []
    original = litellm.acompletion

    async def counted(**kwargs):
        model = kwargs["model"]
        in_flight[model] += 1
        peak[model] = max(peak[model], in_flight[model])
        together.append(sum(in_flight.values()))
        try:
            return await original(**kwargs)
        finally:
            in_flight[model] -= 1

    monkeypatch.setattr(litellm, "acompletion", counted)
    gateway = Gateway(tmp_path, providers=Providers(max_concurrency=2))
    gateway.register(RunContext(run_id="ca", model="scripted/limited-a"))
    gateway.register(RunContext(run_id="cb", model="scripted/limited-b"))

    async def main() -> None:
        asks = [gateway.complete("ca", "x", {"messages": [{"role": "user", "content": f"a{i}"}]}) for i in range(4)]
        asks += [gateway.complete("cb", "x", {"messages": [{"role": "user", "content": f"b{i}"}]}) for i in range(2)]
        await asyncio.gather(*asks)

    asyncio.run(main())
    assert peak["scripted/limited-a"] == 2 and peak["scripted/limited-b"] == 2
    assert max(together) > 2  # model b's calls were not queued behind model a's limit
    assert len(gateway.calls("ca")) == 4 and len(gateway.calls("cb")) == 2
    gateway.close()
