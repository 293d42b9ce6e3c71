"""Semantic Kernel and ext both ways: ext clients and tools in a kernel; kernel services, plugins and agents in ext.

semantic-kernel pins mcp<2 and pydantic<2.14: install this distribution in an environment without ext-tools-mcp.
"""

from .__about__ import __version__
from ._agents import KernelAgentHost, KernelAnswer, KernelTask, host_kernel_agent
from ._client import KernelChatCompletionClient
from ._kernel import build_kernel, kernel_with_client
from ._service import ExtChatCompletion, ExtPromptExecutionSettings
from ._tools import KernelFunctionTool, function_schema, kernel_tools, tool_function, tools_plugin, workbench_plugin

__all__ = [
    # ext clients and tools in a kernel
    "build_kernel",
    "ExtChatCompletion",
    "ExtPromptExecutionSettings",
    "kernel_with_client",
    "tool_function",
    "tools_plugin",
    "workbench_plugin",
    # kernel services, plugins and agents in ext
    "host_kernel_agent",
    "kernel_tools",
    "KernelAgentHost",
    "KernelAnswer",
    "KernelChatCompletionClient",
    "KernelFunctionTool",
    "KernelTask",
    # schema mapping
    "function_schema",
    "__version__",
]
