"""The analyzer / perturber call's time limit (`Limits.llm_seconds`, `--llm-seconds`).

A capable analyzer answered by hand (the `hand-model` endpoint of the issue-23 slice) takes minutes per
answer; litellm cut every call at 600 s whatever rootstep asked, and the retry then queued the same
question again. The analyzer's calls go through the session's gateway, whose provider call gets the
limit as litellm's `timeout`. The endpoint here is a real OpenAI-compatible HTTP server that answers
after a delay."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rootstep.flows._session import Limits, open_session
from rootstep.model import Step, Trajectory, Verdict

RUN = Trajectory(framework="ag2", benchmark="gsm8k", task_id="t", question="2+2?",
                 steps=[Step(index=0, agent="coder", kind="agent", content="5")], final_answer="5",
                 verdict=Verdict(success=False))


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


def _analyzer(tmp_path, monkeypatch, api_base: str, seconds: float):
    from rootstep.flows._searches import annotator_chat as _chat

    monkeypatch.setenv("OPENAI_API_BASE", api_base)
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    session = open_session(str(tmp_path / "wh"), limits=Limits(llm_seconds=seconds))
    return session, _chat


def test_the_analyzer_waits_as_long_as_llm_seconds_allows(tmp_path, monkeypatch, slow_endpoint):
    api_base, requests = slow_endpoint
    opened, chat_for = _analyzer(tmp_path, monkeypatch, api_base, 30)
    with opened as session:
        chat = chat_for(session, "openai/hand-analyzer", None, RUN, "analyzer")
        assert chat("diagnose") == '{"ok": true}'
    assert len(requests) == 1


def test_an_analyzer_call_longer_than_llm_seconds_fails(tmp_path, monkeypatch, slow_endpoint):
    from rootstep.gateway import GatewayCallError

    api_base, requests = slow_endpoint
    opened, chat_for = _analyzer(tmp_path, monkeypatch, api_base, 0.3)
    with opened as session:
        chat = chat_for(session, "openai/hand-analyzer", None, RUN, "analyzer")
        with pytest.raises(GatewayCallError, match="(?i)timeout|timed out"):
            chat("diagnose")
    assert requests  # it was asked, and cut


def test_annotate_and_pipeline_take_llm_seconds():
    from typer.testing import CliRunner

    from rootstep.cli import app

    for command in ("annotate", "pipeline"):
        out = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
        assert "--llm-seconds" in out, command
