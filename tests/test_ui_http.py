"""The web UI over real HTTP (uvicorn on loopback): secrets, upload limits, cross-site requests, attribution."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest

from rootstep.traces.whowhen import import_paths

from ._ui_support import RECORDED_ANSWER, SHARED, UPLOAD_FILE, ThreadServer, build_warehouse

FAKE_KEY = f"sk-rootstep-fake-{uuid.uuid4().hex}"
MAX_UPLOAD = 64_000


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    from rootstep.gateway import register_script  # before litellm: it sets litellm's offline price table
    from litellm.llms.custom_llm import CustomLLMError
    from rootstep.ui import UISettings, create_app

    root = tmp_path_factory.mktemp("ui-http")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", FAKE_KEY)
        built = build_warehouse(root)
        leaked = root / "leaked" / "trace.json"  # a trace that captured a key (it happens)
        leaked.parent.mkdir()
        leaked.write_text(json.dumps({"history": [{"content": "compute 6*7", "name": "user"},
                                                  {"content": f"export OPENAI_API_KEY={FAKE_KEY}; 42", "name": "coder"}],
                                      "question": "6*7?", "ground_truth": "42"}))
        import_paths([leaked], built["warehouse"])
        register_script("ui-http-tracer", [RECORDED_ANSWER], cycle=True)
        register_script("ui-http-leaky", [CustomLLMError(status_code=401, message=f"Incorrect API key provided: {FAKE_KEY}")],
                        cycle=True)
        app = create_app(UISettings(warehouse=built["location"], max_upload_bytes=MAX_UPLOAD, sql_timeout_s=3))
        with ThreadServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
            yield {**built, "client": client, "url": server.url}


def _wait(client: httpx.Client, job_url: str) -> dict:
    job_id = job_url.rsplit("/", 1)[1]
    deadline = time.monotonic() + 300  # a server start on a busy 2-core machine
    while time.monotonic() < deadline:
        status = client.get(f"/api/jobs/{job_id}").json()
        if status["done"]:
            return status
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish: {status}")


def _attribute(client: httpx.Client, files=None, **form) -> httpx.Response:
    data = {"method": "all_at_once", "model": "scripted/ui-http-tracer", "ground_truth": "1", "max_prompt_chars": "60000",
            "run_id": "", **form}
    return client.post("/attribute", data=data, files=files)


def test_attributing_a_stored_run_stores_a_tracer_prediction_like_evaluate(ui):
    client, wh = ui["client"], ui["warehouse"]
    labels = wh.count("labels")
    answer = _attribute(client, run_id=ui["counterfactual_run"][:14])
    assert answer.status_code == 303
    status = _wait(client, answer.headers["location"])
    assert status["state"] == "done" and status["run_id"] == ui["counterfactual_run"]
    page = client.get(answer.headers["location"]).text
    assert "stored as <code>method=tracer</code>" in page
    assert "the model's answer (1)" in page  # what the tracer answered, from the annotation's transcript
    [stored] = wh.rows("SELECT * FROM annotations WHERE run_id = ? AND method = 'tracer'", [ui["counterfactual_run"]])
    assert stored["annotator"] == "all_at_once/scripted/ui-http-tracer+gt" and stored["verified"] is False
    # the recorded answer names an agent this run does not have: stored as unparseable, never guessed
    assert stored["status"] == "unresolved" and any("not an agent" in n for n in stored["notes"])
    [asked] = json.loads(stored["transcript"]) if isinstance(stored["transcript"], str) else stored["transcript"]
    assert asked["prompt_name"] == "tracer all_at_once" and asked["answer"] == RECORDED_ANSWER
    assert wh.count("labels") == labels  # a prediction never becomes a label


def test_no_page_or_response_ever_shows_an_api_key(ui):
    client, wh = ui["client"], ui["warehouse"]
    leaky = _attribute(client, run_id=ui["success_run"], model="scripted/ui-http-leaky")
    assert _wait(client, leaky.headers["location"])["state"] == "done"
    upload = _attribute(client, files={"trace": ("47.json", (SHARED / UPLOAD_FILE).read_bytes(), "application/json")})
    assert _wait(client, upload.headers["location"])["state"] == "done"
    leaked_run = wh.rows("SELECT id FROM runs WHERE source LIKE '%leaked%'")[0]["id"]
    urls = ["/", "/?origin=all", "/attribute", "/evaluation", "/evaluation?by=both", "/healthz",
            leaky.headers["location"], upload.headers["location"], "/api/jobs/" + leaky.headers["location"].rsplit("/", 1)[1],
            "/sql", "/sql?q=SELECT * FROM steps", "/sql?q=SELECT * FROM annotations", "/sql?q=SELECT * FROM llm_calls",
            "/sql?q=SELECT current_setting('threads')", "/runs/nope", "/static/app.js"]
    urls += [f"/runs/{r['id']}" for r in wh.rows("SELECT id FROM runs")]
    seen = {}
    for url in urls:
        answer = client.get(url)
        seen[url] = answer
        assert FAKE_KEY not in answer.text, url
        assert FAKE_KEY not in json.dumps(dict(answer.headers)), url
    assert "export OPENAI_API_KEY=***" in seen[f"/runs/{leaked_run}"].text  # redacted, not merely absent
    assert "Incorrect API key provided:" in seen[leaky.headers["location"]].text
    notes = wh.rows("SELECT notes FROM annotations WHERE annotator LIKE '%ui-http-leaky%'")[0]["notes"]
    assert notes and not any(FAKE_KEY in n for n in notes)  # nor is it stored


def test_a_malformed_upload_is_a_clear_message_on_the_page(ui):
    answer = _attribute(ui["client"], files={"trace": ("broken.json", b'{"history": [{"content": "x"', "application/json")})
    assert answer.status_code == 400
    assert "broken.json: &lt;json&gt;: malformed JSON" in answer.text and 'role="alert"' in answer.text
    missing = _attribute(ui["client"], files={"trace": ("plain.json", b'{"question": "q"}', "application/json")})
    assert missing.status_code == 400 and "plain.json: history: missing" in missing.text
    both = _attribute(ui["client"], run_id="run_", files={"trace": ("a.json", b"{}", "application/json")})
    assert both.status_code == 400 and "not both" in both.text
    unknown = _attribute(ui["client"], run_id="run_zzzz")
    assert unknown.status_code == 400 and "no run id starts with" in unknown.text


def test_uploads_over_the_limit_are_refused_with_413(ui):
    big = b"x" * (MAX_UPLOAD + 1)
    answer = _attribute(ui["client"], files={"trace": ("big.json", big, "application/json")})
    assert answer.status_code == 413 and "limit is 0.064 MB" in answer.text

    def chunks():  # no Content-Length: the limit is enforced while the body streams in
        boundary = b"--b0undary"
        yield boundary + b'\r\nContent-Disposition: form-data; name="trace"; filename="big.json"\r\n\r\n'
        for _ in range(40):
            yield b"y" * 4096
        yield b"\r\n" + boundary + b"--\r\n"

    streamed = ui["client"].post("/attribute", content=chunks(),
                                 headers={"content-type": "multipart/form-data; boundary=b0undary"})
    assert streamed.status_code == 413 and "larger than the limit" in streamed.text


def test_cross_site_requests_and_foreign_hosts_are_refused_and_no_cors(ui):
    client = ui["client"]
    evil = client.post("/attribute", data={"run_id": ui["success_run"], "method": "all_at_once"},
                       headers={"origin": "http://evil.example"})
    assert evil.status_code == 403
    fetch = client.post("/attribute", data={"run_id": ui["success_run"], "method": "all_at_once"},
                        headers={"sec-fetch-site": "cross-site"})
    sandboxed = client.post("/attribute", data={"run_id": ui["success_run"], "method": "all_at_once"},
                            headers={"origin": "null"})  # a sandboxed frame of another site
    assert fetch.status_code == 403 and sandboxed.status_code == 403
    same = client.post("/attribute", data={"method": "nope"}, headers={"origin": ui["url"]})
    assert same.status_code == 400  # same origin passes the guard (and the form is then checked)
    rebinding = client.get("/", headers={"host": "attacker.example:8500"})
    assert rebinding.status_code == 400 and "loopback" in rebinding.text
    preflight = client.options("/attribute", headers={"origin": "http://evil.example", "access-control-request-method": "POST"})
    page = client.get("/", headers={"origin": "http://evil.example"})
    for answer in (preflight, page):
        assert not any(h.startswith("access-control-") for h in answer.headers)
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"


def test_sql_box_over_http_refuses_copy_and_file_reads(ui, tmp_path):
    client = ui["client"]
    target = tmp_path / "out.csv"
    copy = client.get("/sql", params={"q": f"COPY (SELECT * FROM runs) TO '{target}'"})
    assert copy.status_code == 400 and "Refused: the SQL box is read-only: COPY statements are refused" in copy.text
    read = client.get("/sql", params={"q": "SELECT * FROM read_csv('/etc/passwd')"})
    assert read.status_code == 400 and "file system operations are disabled by configuration" in read.text
    assert "root:" not in read.text and not target.exists()
    slow = client.get("/sql", params={"q": "SELECT count(*) FROM range(100000000000) a, range(9) b"})
    assert slow.status_code == 400 and "time limit of 3 s" in slow.text
    ok = client.get("/sql", params={"q": "SELECT method, count(*) AS n FROM labels GROUP BY ALL ORDER BY method", "limit": "2"})
    assert ok.status_code == 200 and "more rows exist" in ok.text


def test_the_run_page_shows_a_rechecked_label_beside_its_recheck(ui):
    """Issue 23 point 5: the label and its re-check side by side (agent, step, fix, replays), and that the
    re-check lands elsewhere; the re-check is not listed again among the evidence, nor is it a label."""
    wh, recheck = ui["warehouse"], ui["recheck"]
    page = ui["client"].get(f"/runs/{ui['counterfactual_run']}")
    assert page.status_code == 200
    html = page.text
    panel = html[html.index('<section class="panel recheck"'):html.index('<div class="run-body">')]
    assert "lands elsewhere" in panel and "agrees</span>" not in panel
    original, again = panel.split('data-side="re-check"')
    assert 'data-side="original"' in original and "Planner @ <a href=\"#step-1\">step 1</a>" in original
    assert "the label</span>" in original and "(morning + afternoon) * 6" in original  # the label's fix
    assert "Coder @ <a href=\"#step-2\">step 2</a>" in again and "print(12 * 6 + 8 * 6)" in again  # the re-check's fix
    label = ui["counterfactual"].annotation
    assert f"{label.cost.replays} replays" in original and f"{recheck.cost.replays} replays" in again
    replays = {r["id"]: r for r in wh.rows("SELECT id, intervention_step, intervention_kind FROM replays")}
    assert [(replays[i]["intervention_step"], replays[i]["intervention_kind"]) for i in recheck.evidence.replay_ids] == [
        (2, "fix"), (2, "control")]  # the re-check's attempts, each with its side-by-side link
    for replay_id in recheck.evidence.replay_ids:
        assert f"?compare={replay_id}#compare" in again
    evidence = html[html.index('<aside class="evidence">'):]
    assert evidence.count('<div class="annotation') == 1  # the label alone: the re-check is shown in its panel
    [row] = wh.rows("SELECT agrees, recheck_step FROM agreement")
    assert row == {"agrees": False, "recheck_step": 2}
    assert wh.rows("SELECT agent, step FROM labels WHERE run_id = ?", [ui["counterfactual_run"]]) == [
        {"agent": "Planner", "step": 1}]
