"""ext-hosting-mcp: what is built with ext, served over the Model Context Protocol.

- `McpServer`: ext tools and workbenches (under their names, descriptions and schemas, with overrides), resources
  (`Resource`, `ResourceTemplate`, `memory_resources`) and prompts (`Prompt`) on the `mcp` SDK's server.
- `PipelineTool`: a chat pipeline (with its tool loop) as one tool: question in, answer out, progress on the way.
- `current_context()` / `ToolContext`: inside a served call, progress, logs, sampling and elicitation to the client.
- Transports: `McpServer.run_stdio()`; `streamable_http_app(...)` (DNS-rebinding protection, bearer token, OAuth
  protected-resource metadata) run by `serve_http`.
- Sessions: `MemorySessionStore` (one process) or `RedisSessionStore` (`ext-hosting-mcp[redis]`): sessions and
  resumable streams that any process behind a load balancer continues, surviving restarts.
"""

from .__about__ import __version__
from ._catalog import Prompt, Resource, ResourceTemplate, memory_resources
from ._context import ClientCapabilityError, ToolContext, current_context
from ._http import StaticTokenVerifier, serve_http, streamable_http_app
from ._memory_store import MemorySessionStore
from ._pipeline_tool import PipelineTool, tool_loop_progress
from ._server import McpServer
from ._sessions import SessionRecord, SessionStore

__all__ = [
    # serving
    "McpServer",
    "serve_http",
    "streamable_http_app",
    "StaticTokenVerifier",
    # a pipeline as one tool
    "PipelineTool",
    "tool_loop_progress",
    # what is served beside tools
    "Prompt",
    "Resource",
    "ResourceTemplate",
    "memory_resources",
    # inside a served tool call
    "ClientCapabilityError",
    "ToolContext",
    "current_context",
    # sessions
    "MemorySessionStore",
    "SessionRecord",
    "SessionStore",
    "__version__",
]
