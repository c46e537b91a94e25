"""The OpenAI-compatible HTTP face of the gateway (FastAPI), and running it in a thread or a process.

Routes (any OpenAI client: set `base_url` to the part before `/chat/completions`):
- `POST /run/{run_id}/agent/{agent}/v1/chat/completions`, `GET .../v1/models`: the call belongs to a run
  and an agent.
- `POST /run/{run_id}/v1/chat/completions`: for frameworks that set one URL for all agents; the agent
  comes from the run's agent header or system-prompt rules (`RunContext.agent_header`, `agent_prompts`),
  else the `X-Rootstep-Agent` header, else `unknown` (`Gateway.agent_for`).
- `POST /v1/chat/completions`: run from `X-Rootstep-Run` (else the gateway's default run), agent as above.
Optional headers on a call: `X-Rootstep-Step` (the step index it produces) and `X-Rootstep-Purpose`
(`step`, `speaker_selection`, `parse_retry`, `planning`, `summary`, `other`). Responses carry
`X-Rootstep-Call-Id` (link it to the step: `Step.call_ids`), `X-Rootstep-Mode` and (non-streaming)
`X-Rootstep-Cost-Usd`.
Admin routes (`/admin/...`) register runs, report stats and flush to a warehouse; when the gateway has
an admin token they need `Authorization: Bearer <token>`. The `Authorization` header of a call itself is
ignored: the provider's key is the gateway's, never the client's.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, get_args

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from rootstep.model import CallPurpose

from ._chunks import SSE_DONE, sse
from ._context import DEFAULT_MODEL, RunContext
from ._gateway import CallMeta, Gateway, UnattributedRequest, UnknownRun
from ._providers import ProviderError
from ._replay import ReplayDivergence

log = logging.getLogger("rootstep.gateway")

_PURPOSES = set(get_args(CallPurpose))


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status, "param": None}}, status_code=status)


def _json(payload: Any, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)
    return Response(body, media_type="application/json", headers=headers)


def _meta(request: Request) -> CallMeta:
    purpose = request.headers.get("x-rootstep-purpose", "step")
    if purpose not in _PURPOSES:
        raise ValueError(f"X-Rootstep-Purpose {purpose!r} is not one of {sorted(_PURPOSES)}")
    step = request.headers.get("x-rootstep-step")
    return CallMeta(purpose=purpose, step_index=None if step in (None, "") else int(step))  # type: ignore[arg-type]


def create_app(gateway: Gateway, *, admin_token: str | None = None) -> FastAPI:
    """The FastAPI app serving `gateway`."""
    app = FastAPI(title="rootstep LLM gateway", docs_url=None, redoc_url=None, openapi_url=None)

    async def chat(request: Request, run_id: str | None, url_agent: str | None) -> Response:
        run_id = run_id or request.headers.get("x-rootstep-run")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "invalid_request_error", "the request body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "invalid_request_error", "a chat completion needs a non-empty `messages` list")
        try:
            agent = gateway.agent_for(run_id, url_agent, request.headers, body)
        except UnattributedRequest as exc:
            log.warning("%s", exc)
            return _error(400, "unattributed_request", str(exc))
        try:
            meta = _meta(request)
            if body.get("stream"):
                return await stream_command(run_id, agent, body, meta)
            call, response = await gateway.complete(run_id, agent, body, meta)
        except UnknownRun as exc:
            return _error(404, "unknown_run", str(exc))
        except ReplayDivergence as exc:
            return _error(409, "replay_divergence", str(exc))
        except ProviderError as exc:
            return _error(exc.status_code, exc.kind, str(exc))
        except ValueError as exc:
            return _error(400, "invalid_request_error", str(exc))
        return _json(response, {"x-rootstep-call-id": call.id, "x-rootstep-mode": call.mode,
                                "x-rootstep-cost-usd": repr(call.cost_usd)})

    async def stream_command(run_id: str | None, agent: str, body: dict[str, Any], meta: CallMeta) -> Response:
        events = gateway.stream(run_id, agent, body, meta)
        head = await events.__anext__()  # errors before the first chunk become an HTTP status

        async def body_iter():
            try:
                async for chunk in events:
                    yield sse(chunk)
            except ProviderError as exc:
                yield sse({"error": {"message": str(exc), "type": exc.kind, "code": exc.status_code}})
                return
            finally:
                await events.aclose()
            yield SSE_DONE

        return StreamingResponse(
            body_iter(), media_type="text/event-stream", headers={"x-rootstep-call-id": head["call_id"], "cache-control": "no-cache"}
        )

    def models(run_id: str | None) -> Response:
        if run_id is not None:
            try:
                ctx = gateway.run(run_id).ctx
            except UnknownRun as exc:
                return _error(404, "unknown_run", str(exc))
            names = [ctx.model, *ctx.agent_models.values()]
        else:
            names = [DEFAULT_MODEL, *(c.model for c in gateway.runs())]
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "rootstep"} for n in dict.fromkeys(names)]
        return _json({"object": "list", "data": data})

    @app.post("/run/{run_id}/agent/{agent}/v1/chat/completions")
    async def run_agent_chat(request: Request, run_id: str, agent: str) -> Response:
        return await chat(request, run_id, agent)

    @app.post("/run/{run_id}/v1/chat/completions")
    async def run_chat(request: Request, run_id: str) -> Response:
        return await chat(request, run_id, None)

    @app.post("/v1/chat/completions")
    async def plain_chat(request: Request) -> Response:
        return await chat(request, None, None)

    @app.get("/run/{run_id}/agent/{agent}/v1/models")
    async def run_agent_models(run_id: str, agent: str) -> Response:
        return models(run_id)

    @app.get("/run/{run_id}/v1/models")
    async def run_models(run_id: str) -> Response:
        return models(run_id)

    @app.get("/v1/models")
    async def plain_models(request: Request) -> Response:
        return models(request.headers.get("x-rootstep-run"))

    @app.get("/health")
    async def health() -> Response:
        return _json({"ok": True, "runs": len(gateway.runs())})

    def admin_ok(request: Request) -> bool:
        return admin_token is None or request.headers.get("authorization") == f"Bearer {admin_token}"

    @app.post("/admin/runs")
    async def admin_register(request: Request) -> Response:
        if not admin_ok(request):
            return _error(401, "unauthorized", "admin routes need the gateway's admin token")
        try:
            payload = await request.json()
            default = bool(payload.pop("default", False))
            ctx = RunContext.model_validate(payload)
            gateway.register(ctx, default=default)
        except ValueError as exc:
            return _error(400, "invalid_request_error", str(exc))
        return _json({"registered": ctx.run_id, "mode": ctx.mode})

    def admin_run(request: Request, run_id: str, action: Any) -> Response:
        """`action(run_id)`'s stats as JSON, for the admin token only; 404 when the run is not registered."""
        if not admin_ok(request):
            return _error(401, "unauthorized", "admin routes need the gateway's admin token")
        try:
            return _json(action(run_id).as_dict())
        except UnknownRun as exc:
            return _error(404, "unknown_run", str(exc))
        except KeyError:
            return _error(404, "unknown_run", f"run {run_id!r} is not registered")

    @app.get("/admin/runs/{run_id}")
    async def admin_stats(request: Request, run_id: str) -> Response:
        return admin_run(request, run_id, gateway.stats)

    @app.delete("/admin/runs/{run_id}")
    async def admin_unregister(request: Request, run_id: str) -> Response:
        return admin_run(request, run_id, gateway.unregister)

    @app.post("/admin/flush")
    async def admin_flush(request: Request) -> Response:
        if not admin_ok(request):
            return _error(401, "unauthorized", "admin routes need the gateway's admin token")
        from rootstep.warehouse import Warehouse

        payload = await request.json()
        report = gateway.flush(Warehouse(payload["warehouse"]), payload.get("run_ids"))
        return _json({"written": dict(report.written), "skipped": dict(report.skipped)})

    return app


class GatewayServer:
    """Run a gateway's HTTP server in a background thread (tests, notebooks, flows).

    `host="0.0.0.0"` (or the Docker bridge address, usually 172.17.0.1) makes it reachable from
    containers, which then use `http://172.17.0.1:<port>/run/...`; the default serves this machine only.
    `port=0` picks a free port; `url` tells which.
    """

    def __init__(self, gateway: Gateway, host: str = "127.0.0.1", port: int = 0, *, admin_token: str | None = None):
        import uvicorn

        self.gateway = gateway
        self.host = host
        # log_config=None: uvicorn must not run logging.config.dictConfig in this process. dictConfig
        # closes and flushes every handler of the process while holding logging's lock; inside a Prefect
        # flow that flush waits for Prefect's log worker, which needs the same lock to start: a deadlock.
        config = uvicorn.Config(
            create_app(gateway, admin_token=admin_token), host=host, port=port, log_level="warning",
            log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self.port = port

    def start(self, timeout: float = 20.0) -> "GatewayServer":
        self._thread = threading.Thread(target=self._server.run, name="rootstep-gateway", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the gateway did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def base_url(self, run_id: str, agent: str | None = None) -> str:
        """The `base_url` an OpenAI client of this run (and agent) should use."""
        return f"{self.url}/run/{run_id}" + (f"/agent/{agent}" if agent else "") + "/v1"

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> "GatewayServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
