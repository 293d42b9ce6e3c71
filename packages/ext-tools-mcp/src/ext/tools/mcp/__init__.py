"""ext-tools-mcp: the tools, resources and prompts of an MCP server as an ext `Workbench`."""

from ext.core import ToolOverride

from .__about__ import __version__
from ._errors import McpConnectionError, McpError, McpTimeoutError
from ._mapping import PromptResult
from ._params import ServerParams, SseServerParams, StdioServerParams, StreamableHttpServerParams
from ._workbench import ElicitationCallback, McpWorkbench, McpWorkbenchConfig, Roots

__all__ = [
    # application code: the workbench and its servers
    "McpWorkbench",
    "McpWorkbenchConfig",
    "ServerParams",
    "SseServerParams",
    "StdioServerParams",
    "StreamableHttpServerParams",
    "ToolOverride",
    # application code: what a server can ask back, and prompts
    "ElicitationCallback",
    "PromptResult",
    "Roots",
    # application code: errors
    "McpConnectionError",
    "McpError",
    "McpTimeoutError",
    "__version__",
]
