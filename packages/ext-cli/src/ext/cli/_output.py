"""Where the command writes: the answer on stdout (plain text, token by token), everything else on stderr.

Piping stdout gives just the answer. Progress, tool calls and usage go to stderr, styled only when stderr
is a terminal (rich turns styles off otherwise).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.markup import escape


class Output:
    """The command's two streams."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None, *, quiet: bool = False) -> None:
        self.out = out if out is not None else sys.stdout
        self.err = Console(file=err if err is not None else sys.stderr, highlight=False, soft_wrap=True)
        self.quiet = quiet

    def answer(self, text: str) -> None:
        """A piece of the model's answer, written as it comes."""
        if text:
            self.out.write(text)
            self.out.flush()

    def end_answer(self) -> None:
        self.out.write("\n")
        self.out.flush()

    def info(self, text: str, style: str = "dim") -> None:
        """A line on stderr (skipped with --quiet)."""
        if not self.quiet:
            self.err.print(f"[{style}]{escape(text)}[/]")

    def thought(self, text: str) -> None:
        if text and not self.quiet:
            self.err.print(f"[dim italic]{escape(text)}[/]", end="")

    @contextmanager
    def status(self, text: str) -> Iterator[None]:
        """A spinner on a terminal, one line otherwise, while slow work (loading a model, connecting) runs."""
        if self.quiet:
            yield
        elif self.err.is_terminal:
            with self.err.status(escape(text)):
                yield
        else:
            self.err.print(escape(text))
            yield
