"""`rootstep frameworks ...`: list the framework adapters and build their sandbox images.

Module-level imports stay light (adapters, docker and the frameworks' specs load inside the commands).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

app = typer.Typer(help="Framework adapters: list them, build their pinned sandbox images.",
                  invoke_without_command=True)
console = Console(stderr=True)


@app.callback()
def _default(ctx: typer.Context) -> None:
    """Without a subcommand: the same as `rootstep frameworks list`."""
    if ctx.invoked_subcommand is None:
        list_cmd(system=None)


@app.command("list")
def list_cmd(
    system: Optional[list[Path]] = typer.Option(None, "--system", help="Also list these system files (docs/your-system.md)."),
) -> None:
    """Each adapter: where it comes from (built in, a plugin, a system file), package and version, image tag
    and whether it is built, agents, task kinds; then any plugin or system file that did not load."""
    from rootstep.model import plugin_errors
    from rootstep.adapters import ADAPTERS, use_systems
    from rootstep.model import RootstepError

    out = Console(width=None if sys.stdout.isatty() else 200)
    if system:
        try:
            use_systems([str(p) for p in system])
        except RootstepError as exc:
            console.print(f"[bold red]error:[/] --system: {escape(str(exc))}")
            raise typer.Exit(2) from None
    table = Table("framework", "origin", "package", "image", "status", "agents", "task kinds")
    for entry in sorted(ADAPTERS.entries(), key=lambda e: e.name):
        name, cls = entry.name, ADAPTERS.get(entry.name)
        adapter = cls()
        built = adapter.image_built()
        status = "[yellow]no docker[/]" if built is None else ("[green]built[/]" if built else "[red]not built[/]")
        where = entry.label
        package = cls.version if where.startswith("system") else f"{cls.package}=={cls.version}"
        table.add_row(name, escape(where), escape(package), adapter.image_tag(), status,
                      ", ".join(cls.agents), ", ".join(cls.task_kinds))
    out.print(table)
    for key, why in sorted(plugin_errors().items()):
        out.print(f"[bold red]not loaded:[/] {escape(key)}: {escape(why)}", soft_wrap=True)


@app.command("build")
def build_cmd(
    framework: Optional[list[str]] = typer.Option(None, "--framework", "-f", help="Framework(s) to build (default: all)."),
    system: Optional[list[Path]] = typer.Option(None, "--system", help="Build these system files' images (only them "
                                                "unless --framework is given too)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when the image's tag exists."),
    jobs: int = typer.Option(2, "--jobs", "-j", min=1, help="Images built at once (each build's offline pip "
                             "install is mostly one core; one after another, a fresh machine's six took about 355 s)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show every line of pip and docker."),
    skip_if_no_docker: bool = typer.Option(
        False, "--skip-if-no-docker", help="Exit 0 with a message when no Docker daemon is reachable (CI)."
    ),
) -> None:
    """Build each framework's image (sandbox base + pinned wheels, offline build); a no-op when up to date.
    Frameworks that share an image (the same tag) build it once; the biggest images start first."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from rootstep.adapters import adapter_class, list_adapters
    from rootstep.sandboxes import SandboxUnavailableError
    from rootstep.sandboxes.cli import ConsoleReporter, docker_client_or_exit

    from rootstep.adapters import use_systems
    from rootstep.model import RootstepError

    systems: list[str] = []
    if system:
        try:
            systems = use_systems([str(p) for p in system])
        except RootstepError as exc:
            console.print(f"[bold red]error:[/] --system: {escape(str(exc))}")
            raise typer.Exit(2) from None
    names = [*(framework or []), *systems] or [n for n in list_adapters() if n not in systems]
    unknown = [n for n in names if n not in list_adapters()]
    if unknown:
        console.print(f"[bold red]error:[/] unknown framework(s) {unknown}; known: {list_adapters()}")
        raise typer.Exit(2)
    client = docker_client_or_exit(skip_if_no_docker, "frameworks build", "Framework adapter tests")
    reporter = ConsoleReporter(verbose)
    tags = {name: adapter_class(name)().image_tag() for name in names}
    by_tag: dict[str, list[str]] = {}
    for name in names:
        by_tag.setdefault(tags[name], []).append(name)

    def size(tag: str) -> int:
        return len(getattr(adapter_class(by_tag[tag][0]).image, "requirements", ()) or ())

    def build(tag: str) -> tuple[float, str | None]:
        first = by_tag[tag][0]
        cls = adapter_class(first)
        report = reporter.named("/".join(by_tag[tag]))
        report.step(f"framework {first} ({cls.package}=={cls.version})")
        start = time.monotonic()
        try:
            cls.build(client, report=report, force=force)
        except (SandboxUnavailableError, RootstepError) as exc:
            return time.monotonic() - start, str(exc)
        return time.monotonic() - start, None

    order = sorted(by_tag, key=size, reverse=True)
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="build") as pool:
        done = dict(zip(order, pool.map(build, order)))
    failed = [(tag, why) for tag, (_, why) in done.items() if why is not None]
    for tag, why in failed:
        console.print(f"[bold red]error:[/] {', '.join(by_tag[tag])}: {escape(why)}")
    if failed:
        raise typer.Exit(2)
    table = Table("framework", "image", "seconds")
    for name in names:
        tag = tags[name]
        seconds = done[tag][0] if by_tag[tag][0] == name else 0.0
        table.add_row(name, tag, f"{seconds:.1f}")
    console.print(table)


COMMANDS = {"frameworks": app}
"""Mounted on `rootstep` by `rootstep.cli` (a command path -> a command or a sub-app)."""
