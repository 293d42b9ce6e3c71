"""Errors an A2A call raises. Bad configuration raises `ext.core.ConfigurationError` and bad arguments
`ext.core.ToolArgumentsError`, both before any request is sent."""

from __future__ import annotations

from ext.core import ExtError


class A2AToolError(ExtError):
    """Base class of the errors a call to a remote A2A agent raises."""


class A2AUnreachableError(A2AToolError, ConnectionError):
    """The agent could not be reached (refused connection, reset, DNS, a card that could not be fetched)."""


class A2ARefusedError(A2AToolError):
    """The agent answered but refused the request: a protocol error (JSON-RPC or HTTP status), a rejected task,
    or a task that needs authentication. `reason` holds the agent's own words, cut to 200 characters."""

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


class A2AResponseError(A2AToolError):
    """The agent's answer could not be read as A2A (malformed JSON, a field of the wrong shape)."""


class A2ATaskFailedError(A2AToolError):
    """The remote task ended `failed` or `canceled`. `state`, `task_id` and `agent_message` (the status message
    the agent sent with it) are attributes."""

    def __init__(self, message: str, *, state: str, task_id: str, agent_message: str) -> None:
        super().__init__(message)
        self.state = state
        self.task_id = task_id
        self.agent_message = agent_message


class A2ACardMismatchError(A2AToolError):
    """The agent's card does not match what the tool expects (name, skill, transport or streaming)."""


class A2ATimeoutError(A2AToolError, TimeoutError):
    """The call did not finish within its `timeout`, or the stream went quiet for longer than `idle_timeout`.
    Also a builtin `TimeoutError`."""
