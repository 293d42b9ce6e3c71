"""ext-tools-mcp: the tools, resources and prompts of an MCP server as an ext `Workbench`."""

from ext.core import ToolOverride

from .__about__ import __version__
from ._errors import McpAuthError, McpConnectionError, McpError, McpNeedsLoginError, McpTimeoutError
from ._mapping import PromptResult
from ._oauth import Interaction
from ._oauth_login import login, logout
from ._oauth_settings import OAuthSettings
from ._params import ServerParams, SseServerParams, StdioServerParams, StreamableHttpServerParams
from ._token_store import FileTokenStore, TokenStore
from ._token_store_redis import RedisTokenStore
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
    # application code: OAuth (settings, token stores, logging in and out)
    "FileTokenStore",
    "Interaction",
    "OAuthSettings",
    "RedisTokenStore",
    "TokenStore",
    "login",
    "logout",
    # application code: what a server can ask back, and prompts
    "ElicitationCallback",
    "PromptResult",
    "Roots",
    # application code: errors
    "McpAuthError",
    "McpConnectionError",
    "McpError",
    "McpNeedsLoginError",
    "McpTimeoutError",
    "__version__",
]
