"""`rootstep ui`: serve the web UI (foreground or daemon), and `status`, `logs`, `stop` (registered by
rootstep/cli.py)."""

from __future__ import annotations

import sys
import time
from datetime import datetime
from pathlib import Path
from typing import NoReturn, Optional

import typer

from rootstep.options import WarehouseOption

from ._daemon import DEFAULT_HOST, DEFAULT_PORT

app = typer.Typer(help="The web UI: the corpus, a run with its evidence and replays, attribution, evaluation, SQL.")

PortOption = typer.Option(None, "--port", "-p", help="The server's port (default: the only one running, else 8500).")


def _fail(message: str) -> NoReturn:
    """The UI's errors are about a server that did not start, stop or log (`ExitCode.FAILED`)."""
    from rootstep.options import ExitCode, fail

    fail(message, ExitCode.FAILED)


def _warehouse_arg(location: str) -> str:
    """A local warehouse path made absolute (a daemon does not depend on where it was started from)."""
    return location if "://" in location else str(Path(location).expanduser().resolve())


@app.callback(invoke_without_command=True)
def ui(
    ctx: typer.Context,
    host: str = typer.Option(DEFAULT_HOST, "--host", help="Address to bind. Anything but loopback serves the warehouse "
                             "to the network, without authentication."),
    port: int = typer.Option(DEFAULT_PORT, "--port", "-p", help="Port to serve on."),
    daemon: bool = typer.Option(False, "--daemon", "-d", help="Run in the background (see `rootstep ui status|logs|stop`)."),
    max_upload_mb: float = typer.Option(10.0, help="Largest trace file accepted by the attribute page, in MB."),
    sql_rows: int = typer.Option(500, help="Most rows the SQL box returns."),
    sql_timeout: float = typer.Option(10.0, help="Seconds after which a SQL box query is stopped."),
    model: Optional[str] = typer.Option(None, "--model", help="Default model of the attribute page (default: the offline local model)."),
    warehouse: Optional[str] = WarehouseOption,
    state_log: Optional[str] = typer.Option(None, hidden=True, help="The log file a daemon's output goes to."),
) -> None:
    """Serve the web UI on http://127.0.0.1:8500 (foreground; --daemon for the background)."""
    if ctx.invoked_subcommand is not None:
        return
    from rootstep.gateway import DEFAULT_MODEL
    from rootstep.warehouse import default_location

    from ._daemon import busy_message, port_busy, start_daemon
    from ._safety import is_loopback

    location = _warehouse_arg(warehouse or default_location())
    from rootstep.options import console, err_console

    if not is_loopback(host):
        err_console.print(f"[bold yellow]warning:[/] --host {host} serves the warehouse, the SQL box and attribution with this "
                  "machine's model keys to every host that can reach it, without authentication", soft_wrap=True)
    if port_busy(host, port):
        _fail(busy_message(host, port))
    options = ["--host", host, "--port", str(port), "--max-upload-mb", str(max_upload_mb), "--sql-rows", str(sql_rows),
               "--sql-timeout", str(sql_timeout), "--warehouse", location] + (["--model", model] if model else [])
    if daemon:
        from ._daemon import log_file

        try:
            instance = start_daemon(options + ["--state-log", str(log_file(port))], port)
        except RuntimeError as exc:
            _fail(f"the UI did not start: {exc}")
        console.print(f"rootstep ui serving {location} at {instance.url} (pid {instance.pid}, log {instance.log}); "
                      f"`rootstep ui stop --port {port}` stops it", highlight=False, soft_wrap=True)
        return
    from ._app import UISettings
    from ._serve import serve

    print(f"rootstep ui: serving {location} at http://{host}:{port} (Ctrl+C stops)", flush=True)
    serve(UISettings(warehouse=location, host=host, max_upload_bytes=int(max_upload_mb * 1_000_000), sql_max_rows=sql_rows,
                     sql_timeout_s=sql_timeout, default_model=model or DEFAULT_MODEL), port, log=state_log)


@app.command("status")
def status_cmd() -> None:
    """The UI servers running on this machine (exit code 1 when none is)."""
    from rich.table import Table

    from rootstep.options import console

    from ._daemon import instances

    running = instances()
    if not running:
        console.print("no rootstep ui is running")
        raise typer.Exit(1)
    table = Table(header_style="bold cyan")
    for column in ("url", "pid", "answers", "warehouse", "since", "log"):
        table.add_column(column)
    for i in running:
        since = datetime.fromtimestamp(i.started).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(i.url, str(i.pid), "yes" if i.healthy() else "[red]no[/]", i.warehouse, since, i.log or "(foreground)")
    console.print(table)


@app.command("logs")
def logs_cmd(
    port: Optional[int] = PortOption,
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing what is appended (Ctrl+C stops)."),
    lines: int = typer.Option(50, "--lines", "-n", help="Lines printed from the end of the log (0: all)."),
) -> None:
    """Print a daemon's log (its access log and errors); without --port, the running daemon's or the latest."""
    from ._daemon import follow as follow_lines
    from ._daemon import latest_log, log_file, pick, tail

    instance = pick(port)
    if instance is not None and instance.log:
        path = Path(instance.log)
    else:  # a stopped daemon's log stays: the port's, or the latest written
        path = log_file(port) if port is not None else latest_log() or log_file(DEFAULT_PORT)
    if not path.exists():
        _fail(f"no log at {path}: a daemon (`rootstep ui --daemon`) writes one; a foreground server logs to its terminal")
    if not follow:
        text = path.read_text(errors="replace") if lines == 0 else tail(path, lines)
        sys.stdout.write(text + ("\n" if text and not text.endswith("\n") else ""))
        return
    try:
        for line in follow_lines(path):
            sys.stdout.write(line)
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass


@app.command("stop")
def stop_cmd(port: Optional[int] = PortOption) -> None:
    """Stop a UI server (SIGTERM, then SIGKILL after 10 s)."""
    from rootstep.options import console

    from ._daemon import instances, pick, stop

    instance = pick(port)
    if instance is None:
        running = ", ".join(f"{i.url} (pid {i.pid})" for i in instances())
        if not running:
            _fail("no rootstep ui is running")
        _fail(f"no rootstep ui on port {port}; running: {running}" if port else
              f"several rootstep ui servers run, say which with --port: {running}")
    started = time.monotonic()
    if not stop(instance):
        _fail(f"pid {instance.pid} did not stop")
    console.print(f"stopped rootstep ui at {instance.url} (pid {instance.pid}) in {time.monotonic() - started:.1f} s")


COMMANDS = {"ui": app}
"""Mounted on `rootstep` by `rootstep.cli` (a command path -> a command or a sub-app)."""
