"""Tools given on the command line: `--mcp`, `--http-tool`, `--tool module:function`."""

from __future__ import annotations

import inspect
import shlex
import sys
from importlib import import_module
from pathlib import Path
from typing import Any

from ext.core import BaseTool, ComponentModel, FunctionTool, Tool, Workbench

from ._errors import CliError
from ._files import read_json_file


def _require(module: str, distribution: str, extra: str) -> Any:
    try:
        return import_module(module)
    except ImportError:
        raise CliError(
            f"{distribution} is not installed",
            hint=(
                f"install it (from a clone: pip install -e 'packages/ext-cli[{extra}]', "
                f"or pip install -e packages/{distribution})"
            ),
        ) from None


def mcp_workbench(spec: str) -> Workbench:
    """An `McpWorkbench` for `spec`: a URL (streamable HTTP; an URL ending in /sse is SSE) or a command line."""
    mcp = _require("ext.tools.mcp", "ext-tools-mcp", "mcp")
    spec = spec.strip()
    if not spec:
        raise CliError(
            "--mcp needs a command or a URL", hint="for example --mcp 'npx -y @modelcontextprotocol/server-memory'"
        )
    if spec.startswith(("http://", "https://")):
        # OAuth with the default settings: used only if the server asks for it, with what `ext mcp login` stored.
        auth = mcp.OAuthSettings()
        if spec.rstrip("/").endswith("/sse"):
            params = mcp.SseServerParams(url=spec, auth=auth)
        else:
            params = mcp.StreamableHttpServerParams(url=spec, auth=auth)
    else:
        try:
            argv = shlex.split(spec)
        except ValueError as exc:
            raise CliError(f"--mcp {spec!r}: {exc}") from None
        params = mcp.StdioServerParams(command=argv[0], args=argv[1:])
    workbench: Workbench = mcp.McpWorkbench(params)
    return workbench


def http_tool(path: str) -> Tool:
    """An `HttpTool` from a JSON file: a component dump, or the `HttpTool` arguments as an object."""
    http = _require("ext.tools.http", "ext-tools-http", "http")
    data = read_json_file(Path(path), f"--http-tool {path}")
    if not isinstance(data, dict):
        raise CliError(f"--http-tool {path}: expected a JSON object, got {type(data).__name__}")
    try:
        if "provider" in data and "config" in data:
            tool: Tool = http.HttpTool.load_component(ComponentModel.model_validate(data))
        else:
            tool = http.HttpTool(**data)
    except TypeError as exc:
        raise CliError(f"--http-tool {path}: {exc}") from None
    except ValueError as exc:  # ConfigurationError, ComponentError and pydantic's errors
        raise CliError(f"--http-tool {path}: {exc}") from None
    return tool


def function_tool(spec: str) -> Tool:
    """A `FunctionTool` for `module:function` (the current directory is importable, as with `python -m`)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CliError(f"--tool expects module:function, got {spec!r}", hint="for example --tool mytools:get_weather")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        module = import_module(module_name)
    except ImportError as exc:
        raise CliError(f"--tool {spec}: cannot import {module_name!r}: {exc}") from None
    func = getattr(module, attr, None)
    if func is None:
        raise CliError(f"--tool {spec}: {module_name!r} has no attribute {attr!r}")
    if isinstance(func, BaseTool):
        return func
    if not callable(func):
        raise CliError(f"--tool {spec}: {attr!r} is not a function")
    description = inspect.getdoc(func) or f"Calls {attr}."
    return FunctionTool(func, description=description.split("\n\n")[0])
