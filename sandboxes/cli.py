"""`rootstep sandbox ...`: build the images, diagnose the setup, reap orphaned containers.

Module-level imports stay light (docker is imported inside the commands) so `rootstep --help` is fast.
"""

from __future__ import annotations

import time
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.markup import escape
from rich.text import Text

from rootstep.options import fail

app = typer.Typer(help="Docker sandboxes: build images, diagnose, clean up.", no_args_is_help=True)
console = Console(stderr=True)


class ConsoleReporter:
    """Build progress on stderr: each phase with the time since the build began, tool output dimmed. `name`
    prefixes every line (`named`: builds that run side by side share the clock)."""

    def __init__(self, verbose: bool, name: str = "", start: float | None = None):
        self.start = time.monotonic() if start is None else start
        self.verbose = verbose
        self.name = name
        self.lines = 0

    def named(self, name: str) -> "ConsoleReporter":
        return ConsoleReporter(self.verbose, name, self.start)

    def step(self, message: str) -> None:
        who = f"{escape(self.name)}: " if self.name else ""
        console.print(f"[bold cyan][{time.monotonic() - self.start:6.1f}s][/] {who}{message}", highlight=False)

    def line(self, message: str) -> None:
        self.lines += 1
        if self.verbose or message.startswith(("I: Retrieving", "I: Extracting", "Step ", "Successfully")):
            who = f"{self.name}: " if self.name else ""
            console.print(Text("          " + who + message, style="dim"), highlight=False)




def docker_client_or_exit(skip_if_no_docker: bool, command: str, tests: str) -> Any:
    """The Docker client for a build `command`; without a daemon it exits: 0 with a note that the build and
    `tests` are skipped when `skip_if_no_docker` (CI), else a usage error saying how to get one."""
    from rootstep.sandboxes._docker import docker_client
    from rootstep.sandboxes._limits import SandboxUnavailableError

    try:
        return docker_client()
    except SandboxUnavailableError as exc:
        if skip_if_no_docker:
            console.print(f"[yellow]{command} skipped:[/] {exc}\n{tests} will be skipped.")
            raise typer.Exit(0) from None
        fail(str(exc))


@app.command("build")
def build_cmd(
    env: Optional[list[str]] = typer.Option(None, "--env", "-e", help="Environment(s) to build (default: all)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when the image's tag exists."),
    prune: bool = typer.Option(False, "--prune", help="Remove images of older input versions afterwards."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show every line of debootstrap, pip and docker."),
    skip_if_no_docker: bool = typer.Option(
        False, "--skip-if-no-docker", help="Exit 0 with a message when no Docker daemon is reachable (CI)."
    ),
) -> None:
    """Build the base image (debootstrap) and the environment images; a no-op when they are up to date."""
    from rootstep.sandboxes._images import build_all, stale_images
    from rootstep.sandboxes._limits import SandboxUnavailableError

    client = docker_client_or_exit(skip_if_no_docker, "sandbox build", "Docker sandbox tests")
    reporter = ConsoleReporter(verbose)
    try:
        built = build_all(client, env or None, report=reporter, force=force)
    except (SandboxUnavailableError, ValueError) as exc:
        fail(str(exc))
    table = Table("environment", "image", "seconds")
    for name, (tag, seconds) in built.items():
        table.add_row(name, tag, f"{seconds:.1f}")
    console.print(table)
    if prune:
        for tag in stale_images(client):
            client.images.remove(tag)
            console.print(f"removed {tag}")


@app.command("doctor")
def doctor_cmd() -> None:
    """Check what the sandbox needs; print what is missing and how to fix it (exit 1 if required)."""
    from rootstep.sandboxes._diagnostics import diagnose

    checks = diagnose()
    table = Table("check", "", "detail", "fix")
    for check in checks:
        mark = "[green]ok[/]" if check.ok else ("[red]missing[/]" if check.required else "[yellow]note[/]")
        table.add_row(check.name, mark, check.detail, "" if check.ok else check.fix)
    Console().print(table)
    if any(not c.ok and c.required for c in checks):
        raise typer.Exit(1)


@app.command("reap")
def reap_cmd(
    all_: bool = typer.Option(False, "--all", help="Remove every rootstep sandbox container, owners alive or not."),
) -> None:
    """Remove sandbox containers whose owner process is dead (crashed runs)."""
    from rootstep.sandboxes._cleanup import reap
    from rootstep.sandboxes._docker import docker_client
    from rootstep.sandboxes._limits import SandboxUnavailableError

    try:
        report = reap(docker_client(), everything=all_)
    except SandboxUnavailableError as exc:
        fail(str(exc))
    Console().print(f"removed {len(report.containers)} container(s)" + (
        ": " + ", ".join(report.containers) if report.containers else ""
    ))


COMMANDS = {"sandbox": app}
"""Mounted on `rootstep` by `rootstep.cli` (a command path -> a command or a sub-app)."""
