"""The web app: server-rendered pages over a warehouse (FastAPI + Jinja2, assets shipped in the package).

Pages: `/` corpus, `/runs/<id>` a run with its evidence and replays, `/attribute` (and
`/attribute/jobs/<id>`) attribution of an uploaded or stored trace, `/evaluation`, `/sql`. JSON:
`/api/jobs/<id>` (a job's progress), `/healthz`. What keeps it safe is `Guard` (`_safety.py`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import duckdb
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from rootstep.gateway import DEFAULT_MODEL, DEFAULT_SCORER_MODEL
from rootstep.tracers import TRACERS
from rootstep.model import InputError, WarehouseError
from rootstep.warehouse import Warehouse

from . import _charts
from ._attribute import UPLOAD_FORMATS, Jobs, parse_upload
from ._corpus import CorpusFilter, corpus_page
from ._evaluation import GROUPINGS, evaluation_view
from ._run import run_view
from ._safety import Guard, UploadTooLarge, is_loopback
from ._sql import QueryRefused, run_query, view_columns

EXAMPLE_QUERIES = {
    "labels per agent per framework": "SELECT framework, agent, count(*) AS n FROM labels GROUP BY ALL ORDER BY n DESC",
    "decisive step by decile of the run": (
        "SELECT floor(10 * l.step / r.n_steps) AS decile, count(*) AS labels\n"
        "FROM labels l JOIN runs r ON r.id = l.run_id GROUP BY 1 ORDER BY 1"),
    "failures with no label yet": (
        "SELECT id, framework, benchmark FROM failures f\n"
        "WHERE NOT EXISTS (SELECT 1 FROM labels l WHERE l.run_id = f.id)"),
    "the decisive step's text": (
        "SELECT l.run_id, l.agent, l.step, left(s.content, 120) AS content\n"
        "FROM labels l JOIN steps s ON s.run_id = l.run_id AND s.step = l.step"),
    "cost per verified label by method": (
        "SELECT method, count(*) AS labels, avg(cost_llm_calls) AS llm_calls, avg(cost_replays) AS replays,\n"
        "       avg(cost_usd) AS usd FROM labels GROUP BY method"),
    "every replay and what Omega said": (
        "SELECT run_id, purpose, intervention_step, intervention_agent, success_before, success_after, flipped\n"
        "FROM replays ORDER BY created_at"),
}


@dataclass
class UISettings:
    warehouse: str
    host: str = "127.0.0.1"
    max_upload_bytes: int = 10_000_000
    sql_max_rows: int = 500
    sql_timeout_s: float = 10.0
    default_model: str = DEFAULT_MODEL


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _usd(value: Any) -> str:
    return "–" if value is None else f"${value:,.4f}"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False, default=str)


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("rootstep.ui", "templates"), autoescape=select_autoescape(["html"]),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(pct=_pct, num=_num, usd=_usd, pretty=_pretty)
    return env


def _models(warehouse: Warehouse, default: str) -> list[str]:
    """Suggestions for the model box: the default, the models of stored predictions and of stored runs."""
    annotators = warehouse.rows("SELECT DISTINCT annotator FROM annotations WHERE method = 'tracer' ORDER BY 1")
    runs = warehouse.rows("SELECT DISTINCT model FROM runs WHERE model IS NOT NULL ORDER BY 1")
    found = [default] + [re.sub(r"\+gt$", "", r["annotator"].split("/", 1)[1]) for r in annotators if "/" in r["annotator"]]
    return list(dict.fromkeys(found + [r["model"] for r in runs]))


def create_app(settings: UISettings) -> Guard:
    """The app for one warehouse. Reads open their own in-memory DuckDB connections (the catalog file
    is never locked by the UI); attribution jobs write predictions to the warehouse."""
    warehouse = Warehouse(settings.warehouse, catalog=":memory:")
    jobs = Jobs(warehouse)
    env = _environment()
    env.globals.update(warehouse_location=warehouse.location)
    templates = Jinja2Templates(env=env)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        jobs.shutdown()

    app = FastAPI(title="rootstep", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.mount("/static", StaticFiles(packages=[("rootstep.ui", "static")]), name="static")

    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    def error_page(status: int, title: str, message: str) -> bytes:
        return env.get_template("error.html").render(title=title, message=message, status=status).encode("utf-8")

    def attribute_page(request: Request, status_code: int = 200, error: str | None = None, **form: Any) -> HTMLResponse:
        labelled = warehouse.rows(
            "SELECT r.id, r.framework, r.benchmark, r.task_id, l.agent, l.step FROM labels l JOIN runs r ON r.id = l.run_id "
            "ORDER BY r.framework, r.benchmark, r.id LIMIT 300")
        return page(request, "attribute.html", status_code, nav="attribute", error=error, methods=list(TRACERS),
                    models=_models(warehouse, settings.default_model), labelled=labelled, jobs=jobs.recent(),
                    formats=UPLOAD_FORMATS, max_upload_mb=settings.max_upload_bytes / 1e6,
                    form={"method": "all_at_once", "model": settings.default_model, "ground_truth": True,
                          "max_prompt_chars": 60_000, **form})

    @app.exception_handler(WarehouseError)
    def not_found(request: Request, exc: WarehouseError) -> HTMLResponse:
        return HTMLResponse(error_page(404, "Not found", str(exc)), status_code=404)

    @app.exception_handler(UploadTooLarge)
    async def too_large(request: Request, exc: UploadTooLarge) -> HTMLResponse:
        return await run_in_threadpool(attribute_page, request, 413, error=f"{exc} (rootstep ui --max-upload-mb)")

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"ok": True, "pid": os.getpid()}

    @app.get("/", response_class=HTMLResponse)
    def corpus(request: Request) -> HTMLResponse:
        data = corpus_page(warehouse, CorpusFilter.of(dict(request.query_params)))
        return page(request, "corpus.html", nav="corpus", data=data, f=data.filter)

    @app.get("/runs/{run_id}", response_class=HTMLResponse)
    def run(request: Request, run_id: str, compare: str | None = None) -> HTMLResponse:
        view = run_view(warehouse, run_id, compare)
        return page(request, "run.html", nav="corpus", view=view, t=view.trajectory)

    @app.get("/attribute", response_class=HTMLResponse)
    def attribute_form(request: Request, run: str = "") -> HTMLResponse:
        return attribute_page(request, run_id=run)

    @app.post("/attribute", response_model=None)
    async def attribute_submit(request: Request) -> Response:
        async with request.form(max_files=1, max_fields=20) as form:
            upload = form.get("trace")
            values: dict[str, Any] = {k: str(form.get(k) or "").strip() for k in ("run_id", "method", "model",
                                                                                "max_prompt_chars")}
            values["ground_truth"] = form.get("ground_truth") is not None
            data: bytes | None = None
            filename = ""
            if isinstance(upload, UploadFile) and upload.filename:
                data, filename = await upload.read(), upload.filename
        return await run_in_threadpool(submit, request, values, data, filename or "")

    def submit(request: Request, values: dict[str, Any], data: bytes | None, filename: str) -> Response:
        """Check the form, read the trace, start the job; the form again with the problem when there is one."""
        method, model = values["method"], values["model"] or settings.default_model
        if method == "confidence" and model == settings.default_model:
            model = DEFAULT_SCORER_MODEL  # the default LLM scores no tokens: confidence has its own scorer
        problem = None
        if method not in TRACERS:
            problem = f"method {method!r} is unknown; choose one of {', '.join(TRACERS)}"
        elif data is None and not values["run_id"]:
            problem = "choose a trace file to upload or a stored run to attribute"
        elif data is not None and values["run_id"]:
            problem = "give either a trace file or a stored run, not both"
        elif not values["max_prompt_chars"].isdigit() or int(values["max_prompt_chars"]) < 1000:
            problem = "max prompt characters must be a whole number of at least 1000"
        if problem:
            return attribute_page(request, 400, error=problem, **values)
        options = dict(method=method, model=model, with_ground_truth=values["ground_truth"],
                       max_prompt_chars=int(values["max_prompt_chars"]))
        if data is not None:
            try:
                trajectory, label = parse_upload(filename, data)
            except InputError as exc:
                return attribute_page(request, 400, error=f"The upload is not a trace rootstep can read: {exc}", **values)
            job = jobs.submit(trajectory, source=f"upload {(trajectory.source or '').removeprefix('upload:')}",
                              upload_label=label, store_run=True, **options)
        else:
            try:
                run_id = warehouse.resolve_run_id(values["run_id"])
            except WarehouseError as exc:
                return attribute_page(request, 400, error=str(exc), **values)
            job = jobs.submit(warehouse.trajectory(run_id), source=f"run {run_id}", run_id=run_id, **options)
        return RedirectResponse(f"/attribute/jobs/{job.id}", status_code=303)

    @app.get("/attribute/jobs/{job_id}", response_class=HTMLResponse)
    def job_page(request: Request, job_id: str) -> HTMLResponse:
        job = jobs.get(job_id)
        if job is None:
            return HTMLResponse(error_page(404, "No such job", f"no attribution job {job_id!r} on this server "
                                           "(jobs are kept while the server runs)"), status_code=404)
        return page(request, "job.html", nav="attribute", job=job, t=job.trajectory)

    @app.get("/api/jobs/{job_id}")
    def job_status(job_id: str) -> JSONResponse:
        job = jobs.get(job_id)
        if job is None:
            return JSONResponse({"error": f"no job {job_id!r}"}, status_code=404)
        return JSONResponse(job.status())

    @app.get("/evaluation", response_class=HTMLResponse)
    def evaluation(request: Request, by: str = "benchmark") -> HTMLResponse:
        view = evaluation_view(warehouse, by)
        charts = {
            "accuracy": _charts.accuracy_chart(view.scores),
            "positions": _charts.position_chart(view.positions),
            "cost": _charts.cost_chart(view.costs),
        }
        return page(request, "evaluation.html", nav="evaluation", view=view, charts=charts, by=by,
                    groupings=list(GROUPINGS))

    @app.get("/sql", response_class=HTMLResponse)
    def sql(request: Request, q: str = "", limit: int = 0) -> HTMLResponse:
        limit = min(max(limit or settings.sql_max_rows, 1), settings.sql_max_rows)
        result, error, status = None, None, 200
        if q.strip():
            try:
                result = run_query(warehouse, q, max_rows=limit, timeout_s=settings.sql_timeout_s)
            except QueryRefused as exc:
                error, status = f"Refused: {exc}", 400
            except TimeoutError as exc:
                error, status = f"Stopped: {exc}", 400
            except duckdb.PermissionException as exc:
                error, status = f"Refused: {exc}", 400
            except duckdb.Error as exc:
                error, status = f"{type(exc).__name__}: {exc}", 400
        return page(request, "sql.html", status, nav="sql", q=q, limit=limit, result=result, error=error,
                    views=view_columns(warehouse), examples=EXAMPLE_QUERIES, max_rows=settings.sql_max_rows,
                    timeout_s=settings.sql_timeout_s)

    return Guard(app, loopback_only=is_loopback(settings.host), max_body_bytes=settings.max_upload_bytes,
                 error_page=error_page)
