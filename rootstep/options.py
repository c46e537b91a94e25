"""What every command of the `rootstep` CLI shares: the consoles, the options, one error helper and its
exit codes. Each stage's `cli.py` declares its own commands and takes these from here (light: typer and
rich only, so `rootstep --help` stays fast).

Exit codes, one per meaning (also in docs/cli.md):
- 0 `ExitCode.OK`: done.
- 1 `ExitCode.FAILED`: the input was fine but the work did not succeed (an episode could not be run, a
  check found problems, a server did not start or stop).
- 2 `ExitCode.USAGE`: bad input (an unknown name, an unreadable file, a bad option value); typer/click
  use 2 for their own usage errors as well.
- 130 `ExitCode.INTERRUPTED`: stopped by SIGINT (Ctrl-C) or SIGTERM; what was stored stays stored and
  running the command again resumes (128 + SIGINT, as a shell reports a Ctrl-C).
"""

from __future__ import annotations

import sys
from enum import IntEnum
from typing import TYPE_CHECKING, NoReturn, Optional

import typer
from rich.console import Console

if TYPE_CHECKING:
    from rootstep.warehouse import Warehouse


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    INTERRUPTED = 130


# Off a terminal (pipes, CI logs) rich would wrap tables at 80 columns; give them room instead.
console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)


def fail(message: str, code: int = ExitCode.USAGE) -> NoReturn:
    """Print `error: <message>` (rich markup) on stderr and exit with `code` (see `ExitCode`)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(int(code))


WarehouseOption = typer.Option(
    None,
    "--warehouse",
    "-w",
    envvar="ROOTSTEP_WAREHOUSE",
    help="Warehouse location: a local path or an fsspec URL. Default ./rootstep-data.",
    show_default=False,
)


def open_warehouse(location: Optional[str]) -> "Warehouse":
    """The warehouse at `location` (`--warehouse`), or the default one."""
    from rootstep.warehouse import Warehouse, default_location

    return Warehouse(location or default_location())
