"""The agent's errors: one base (`AgentError`) and one class per thing a caller handles differently."""

from __future__ import annotations

from ext.core import ExtError

__all__ = ["AgentError", "ApprovalPendingError", "NothingToResumeError", "OutputValidationError"]


class AgentError(ExtError):
    """Base of the errors `ext.agent` raises itself (model, tool and store errors propagate as they are)."""


class OutputValidationError(AgentError, ValueError):
    """The model's answer did not match `output_type`, also after the corrective retry.

    `text` is the model's last raw answer (untrusted: log it, do not act on it), `errors` the validation message
    (bounded in length), `attempts` how many answers were checked (2: the answer and the corrected one)."""

    def __init__(self, output_type: str, *, text: str, errors: str, attempts: int) -> None:
        super().__init__(
            f"the model's answer does not match {output_type} after {attempts} attempt(s) "
            f"(one corrective retry with the validation error): {errors}"
        )
        self.text = text
        self.errors = errors
        self.attempts = attempts


class ApprovalPendingError(AgentError, RuntimeError):
    """The session waits for decisions on held tool calls (`approve` / `deny`, then `resume`), or a result
    that is waiting for approval has no output yet. `call_ids` are the calls still undecided."""

    def __init__(self, session_id: str, call_ids: list[str], what: str) -> None:
        shown = ", ".join(call_ids) or "none"
        super().__init__(f"session {session_id!r} waits for approval of tool call(s) {shown}: {what}")
        self.session_id = session_id
        self.call_ids = call_ids


class NothingToResumeError(AgentError, RuntimeError):
    """`resume()` on a session with no unfinished turn."""
