"""ext-tools-a2a: a remote Agent2Agent (A2A) agent as an ext tool (`A2AAgentTool`) and as an agent on ext's
runtime (`A2ARemoteAgent`), over the `a2a-sdk` 1.x client."""

from .__about__ import __version__
from ._agent import A2ARemoteAgent, A2ARequest
from ._card import check_card, fetch_card
from ._errors import (
    A2ACardMismatchError,
    A2ARefusedError,
    A2AResponseError,
    A2ATaskFailedError,
    A2ATimeoutError,
    A2AToolError,
    A2AUnreachableError,
)
from ._events import A2AReply
from ._tool import A2AAgentTool, A2AAgentToolConfig

__all__ = [
    # The tool and the runtime agent
    "A2AAgentTool",
    "A2AAgentToolConfig",
    "A2ARemoteAgent",
    "A2AReply",
    "A2ARequest",
    # Errors
    "A2ACardMismatchError",
    "A2ARefusedError",
    "A2AResponseError",
    "A2ATaskFailedError",
    "A2ATimeoutError",
    "A2AToolError",
    "A2AUnreachableError",
    # The card check, on its own
    "check_card",
    "fetch_card",
    "__version__",
]
