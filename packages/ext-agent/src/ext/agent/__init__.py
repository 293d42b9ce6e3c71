"""ext-agent: `ChatAgent`, a thin agent over the chat pipeline. Instructions, tools, memory and a typed answer;
sessions kept in any `StateStore` and continued from any process; tool calls held for a person's approval
across restarts; each step saved so a turn resumed after a crash never repeats a finished tool call; an agent as
another agent's tool, and hosted on the agent runtimes."""

from .__about__ import __version__
from ._agent import ChatAgent, load_agent
from ._approval import ApprovalPredicate, RequireApproval
from ._errors import AgentError, ApprovalPendingError, NothingToResumeError, OutputValidationError
from ._events import (
    AgentEvent,
    ApprovalRequested,
    OutputRetry,
    PendingApproval,
    RunFinished,
    RunResult,
    RunStatus,
    TextDelta,
    ToolFinished,
    ToolStarted,
)
from ._hosting import AgentReply, AgentRequest, ChatAgentHost, PendingCall
from ._instructions import Variable
from ._session import AgentInput, AgentSession, SessionSnapshot
from ._spec import AgentSpecCheck, check_agent_spec
from ._tool import AgentTool, AgentToolArgs

__all__ = [
    # application code: the agent and its sessions
    "AgentInput",
    "AgentSession",
    "ChatAgent",
    "RunResult",
    "RunStatus",
    "SessionSnapshot",
    "Variable",
    # application code: agent spec files
    "AgentSpecCheck",
    "check_agent_spec",
    "load_agent",
    # application code: approval
    "ApprovalPredicate",
    "PendingApproval",
    "RequireApproval",
    # application code: the events of run_stream
    "AgentEvent",
    "ApprovalRequested",
    "OutputRetry",
    "RunFinished",
    "TextDelta",
    "ToolFinished",
    "ToolStarted",
    # errors
    "AgentError",
    "ApprovalPendingError",
    "NothingToResumeError",
    "OutputValidationError",
    # agents as tools and on the runtimes
    "AgentReply",
    "AgentRequest",
    "AgentTool",
    "AgentToolArgs",
    "ChatAgentHost",
    "PendingCall",
    "__version__",
]
