"""The command's own error: one readable line, plus a hint saying what to do."""

from __future__ import annotations


class CliError(Exception):
    """An error the command reports as `error: <message>` and `hint: <hint>`, without a traceback."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
