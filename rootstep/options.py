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

import functools
import inspect
import sys
from collections.abc import Callable, Iterable
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NoReturn, Optional, TypeVar

import typer
from rich.console import Console

if TYPE_CHECKING:
    from rootstep.warehouse import Warehouse

F = TypeVar("F", bound=Callable[..., Any])


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


def listed(names: Callable[[], Iterable[str]], *extra: str) -> str:
    """The names a registry option takes, for its `--help` (read when the command line is built: the built-ins
    and installed plugins; a plugin that cannot be loaded leaves the list to the usage error)."""
    try:
        return ", ".join([*extra, *names()])
    except Exception:  # noqa: BLE001 - a broken plugin must not break --help; one_of names it when used
        return "see docs"


def one_of(names: Callable[[], Iterable[str]], *extra: str) -> Callable[[Optional[str]], Optional[str]]:
    """A typer `callback` that accepts a name of a live registry (`names()` is read when the command runs,
    so a tracer or trace format registered after import is accepted) or one of `extra` (`auto`); any
    other value is a usage error (exit 2) listing the known names."""

    def check(value: Optional[str]) -> Optional[str]:
        if value is None:
            return value
        known = [*extra, *names()]
        if value not in known:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(known)}")
        return value

    return check


def option_group(name: str, options: dict[str, tuple[Any, Any]], build: Callable[..., Any]) -> Callable[[F], F]:
    """A decorator that declares a set of options once for many commands: it adds `options` (parameter
    name -> (type, `typer.Option(...)`)) to the command's signature, and the command receives
    `build(**their values)` as its parameter `name` instead (a `Runner`, a `Budget`)."""

    def decorate(command: F) -> F:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != name]
        added = [inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)
                 for key, (annotation, option) in options.items()]

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            values = {key: kwargs.pop(key) for key in options}
            return command(*args, **{name: build(**values)}, **kwargs)

        run.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*[p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own], *added])
        return run  # type: ignore[return-value]

    return decorate
