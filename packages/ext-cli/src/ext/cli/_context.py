"""What every `ext` subcommand shares: the state the group puts on the click context, and how a subcommand runs
its coroutine (errors as one line plus a hint, Ctrl-C as exit 130).

Its own module so that subcommand modules (`_eval`) and the entry module (`_main`) both import it and neither
imports the other.
"""

from __future__ import annotations

import asyncio
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click

from ._errors import CliError
from ._output import Output

T = TypeVar("T")

EXIT_INTERRUPTED = 130


class State:
    """What the `ext` group puts on the click context for its subcommands: --debug and the output."""

    def __init__(self, debug: bool, quiet: bool) -> None:
        self.debug = debug
        self.out = Output(quiet=quiet)


def run_command(ctx: click.Context, make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine the way every subcommand does: errors as one line plus a hint, Ctrl-C as exit 130."""
    state: State = ctx.obj
    try:
        return asyncio.run(_awaited(make))
    except KeyboardInterrupt:
        state.out.out.flush()
        state.out.info("interrupted", style="yellow")
        ctx.exit(EXIT_INTERRUPTED)
    except CliError as exc:
        _report(state, exc, exc.message, exc.hint)
    except click.exceptions.Exit:
        raise
    except Exception as exc:
        _report(state, exc, f"{type(exc).__name__}: {exc}", _hint_for(exc))
    ctx.exit(1)
    raise AssertionError("unreachable")  # pragma: no cover - ctx.exit raises


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


def _report(state: State, exc: BaseException, message: str, hint: str | None) -> None:
    if state.debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    state.out.err.print(f"[bold red]error:[/] {_escape(message)}")
    if hint:
        state.out.err.print(f"[yellow]hint:[/] {_escape(hint)}")
    if not state.debug:
        state.out.err.print("[dim](run with --debug for the traceback)[/]")


def _escape(text: str) -> str:
    """The first line of `text`, safe for rich markup: errors are one line; --debug shows the rest."""
    from rich.markup import escape

    return escape(text.strip().split("\n")[0])


def _hint_for(exc: BaseException) -> str | None:
    name = type(exc).__name__
    text = str(exc).lower()
    command = getattr(exc, "command", None)
    if isinstance(command, str) and name == "McpNeedsLoginError":
        return f"run `{command}` where a browser can be opened, then try again"
    if isinstance(exc, ConnectionError) or "connect" in text:
        return "is the server running and the address right?"
    if "api key" in text or "api_key" in text or name in {"AuthenticationError", "PermissionDeniedError"}:
        return "set the provider's key in the environment (ext models lists what each provider reads)"
    if isinstance(exc, TimeoutError):
        return "the server did not answer in time; try again or raise the timeout"
    return None
