"""The analyzer / perturber call's time limit (`Chat.timeout`, `Limits.llm_seconds`, `--llm-seconds`).

A capable analyzer answered by hand (the `hand-model` endpoint of the issue-23 slice) takes minutes per
answer; litellm cut every call at 600 s whatever rootstep asked, and the OpenAI client's retry then
queued the same question again. The endpoint here is a real OpenAI-compatible HTTP server that answers
after a delay."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rootstep.flows._session import Limits, Session
from rootstep.tracers import Chat
from rootstep.warehouse import Step, Trajectory, Verdict


@pytest.fixture
def slow_endpoint():
    """`(api_base, requests)`: answers every chat completion after 1.5 s; `requests` counts the POSTs."""
    requests: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            requests.append(time.time())
            time.sleep(1.5)
            body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "slow",
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": '{"ok": true}'}}],
                               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
            try:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:  # the client gave up (its timeout): nothing to answer
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", requests
    server.shutdown()


def test_a_call_waits_as_long_as_its_timeout_allows(slow_endpoint):
    api_base, requests = slow_endpoint
    chat = Chat("openai/hand-analyzer", api_base=api_base, timeout=30, extra={"api_key": "x", "max_retries": 0})
    assert chat("diagnose") == '{"ok": true}'
    assert chat.usage.calls == 1 and len(requests) == 1


def test_a_call_longer_than_its_timeout_fails(slow_endpoint):
    import litellm

    api_base, _ = slow_endpoint
    chat = Chat("openai/hand-analyzer", api_base=api_base, timeout=0.3, extra={"api_key": "x", "max_retries": 0})
    with pytest.raises(litellm.Timeout):
        chat("diagnose")


def test_the_annotation_flows_analyzer_takes_the_sessions_llm_seconds():
    from rootstep.flows.annotate import _chat

    run = Trajectory(framework="ag2", benchmark="gsm8k", task_id="t", question="2+2?",
                     steps=[Step(index=0, agent="coder", kind="agent", content="5")], final_answer="5",
                     verdict=Verdict(success=False))
    session = Session(None, None, None, limits=Limits(llm_seconds=2400))
    assert _chat(session, "openai/hand-analyzer", None, run).chat.timeout == 2400
    assert _chat(Session(None, None, None), "openai/hand-analyzer", None, run).chat.timeout == 600


def test_annotate_and_pipeline_take_llm_seconds():
    from typer.testing import CliRunner

    from rootstep.cli import app

    for command in ("annotate", "pipeline"):
        out = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
        assert "--llm-seconds" in out, command
