"""The errors fallback and cooldowns raise."""

from __future__ import annotations

from dataclasses import dataclass

from ext.core import ErrorKind, ExtError


@dataclass(frozen=True, slots=True)
class Attempt:
    """One client tried (or skipped) by a fallback: its name, what went wrong, and the error's kind.

    `error` is the error as the client raised it (an SDK error, unchanged) or None when the client answered but its
    result was refused (`reason` says why) or it was skipped because it is cooling down (`skipped`)."""

    client: str
    error: BaseException | None
    kind: ErrorKind | None
    reason: str = ""
    skipped: bool = False

    def summary(self) -> str:
        """What went wrong without the error's text (which may echo what the server was sent): the kind and the
        error's class, or the reason."""
        if self.error is None:
            return self.reason
        kind = f"{self.kind.value}: " if self.kind is not None else ""
        return f"{kind}{type(self.error).__name__}"

    def describe(self) -> str:
        """One line: `client: kind: error` (or the reason)."""
        if self.skipped:
            return f"{self.client}: skipped ({self.reason})"
        if self.error is None:
            return f"{self.client}: {self.reason}"
        kind = f"{self.kind.value}: " if self.kind is not None else ""
        return f"{self.client}: {kind}{type(self.error).__name__}: {self.error}"


class AllClientsFailedError(ExtError):
    """Every client of a fallback failed, was refused by a result rule or was cooling down. `attempts` lists them
    in the order they were tried; the last error is also the `__cause__`."""

    def __init__(self, attempts: list[Attempt]) -> None:
        self.attempts = list(attempts)
        lines = "\n".join(f"  {i}. {a.describe()}" for i, a in enumerate(self.attempts, 1))
        super().__init__(f"every client failed ({len(self.attempts)} attempts):\n{lines}")


class ClientCoolingDownError(ExtError):
    """A client is cooling down (it failed too often, or was refused) and was not called. `client` names it,
    `remaining` is the seconds left."""

    def __init__(self, client: str, remaining: float) -> None:
        super().__init__(f"{client} is cooling down for {remaining:.1f} s more after repeated failures")
        self.client = client
        self.remaining = remaining
