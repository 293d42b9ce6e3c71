"""Tools both ways: ext tools and workbenches as kernel plugins, kernel functions as ext tools.

A kernel function's schema is what the kernel's own connectors send a model (one JSON Schema per parameter); an ext
tool's schema is one object schema. Each side is mapped to the other once, here, and what cannot map (a name the
other side refuses, a parameter with no schema) is a `ConfigurationError` naming it, raised before any call.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from ext.core import (
    CHAT_TOOL_ERROR_PREFIX,
    CancellationToken,
    ConfigurationError,
    Tool,
    ToolSchema,
    Workbench,
    normalize_parameters,
    run_cancellable,
    tool_schema_of,
    value_as_string,
)
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.function_calling_utils import kernel_function_metadata_to_function_call_format
from semantic_kernel.filters.functions.function_invocation_context import FunctionInvocationContext
from semantic_kernel.functions import KernelArguments, KernelFunction, KernelFunctionMetadata, KernelPlugin
from semantic_kernel.functions.function_result import FunctionResult
from semantic_kernel.functions.kernel_parameter_metadata import KernelParameterMetadata

__all__ = [
    "KernelFunctionTool",
    "function_schema",
    "kernel_tools",
    "tool_function",
    "tools_plugin",
    "workbench_plugin",
]

# The kernel's own name rules (semantic_kernel.utils.validation): a plugin name has no '-', because the kernel
# joins plugin and function with it; function and parameter names allow it.
_PLUGIN_NAME = re.compile(r"^[0-9A-Za-z_]+$")
_NAME = re.compile(r"^[0-9A-Za-z_-]+$")

Runner = Callable[[dict[str, Any]], Awaitable[str]]


# --- kernel -> ext ---------------------------------------------------------------------------------------------


def function_schema(metadata: KernelFunctionMetadata) -> ToolSchema:
    """A kernel function's schema as an ext `ToolSchema`, named as the kernel's connectors name it
    (`plugin-function`). Raises `ConfigurationError` for a parameter the kernel gives no JSON Schema."""
    where = metadata.fully_qualified_name
    for param in metadata.parameters:
        if param.include_in_function_choices and _unmappable(param):
            raise ConfigurationError(
                f"kernel function {where!r}: parameter {param.name!r} (type {param.type_!r}) has no JSON Schema, so "
                "a model cannot be told how to fill it; annotate it with a JSON type, a dict or a pydantic model"
            )
    function = kernel_function_metadata_to_function_call_format(metadata)["function"]
    try:
        return tool_schema_of(function)
    except ConfigurationError as exc:
        raise ConfigurationError(f"kernel function {where!r}: {exc}") from None


def _unmappable(param: KernelParameterMetadata) -> bool:
    """No schema, or the empty object schema the kernel infers for a plain class (which it then cannot even build
    from a model's JSON): a dict, a pydantic model or `Any` map; `Thing` does not."""
    if not param.schema_data:
        return True
    kind = param.type_object
    if param.schema_data != {"type": "object", "properties": {}} or not isinstance(kind, type):
        return False
    return not issubclass(kind, (Mapping, BaseModel)) and kind is not object


class KernelFunctionTool:
    """A kernel function as an ext `Tool`: run by ext's tool loop or an agent, invoked through its kernel (so the
    kernel's filters apply). Its name is the kernel's `plugin-function`."""

    def __init__(self, function: KernelFunction, kernel: Kernel) -> None:
        if not isinstance(function, KernelFunction):
            raise ConfigurationError(f"function must be a KernelFunction, got {type(function).__name__}")
        if not isinstance(kernel, Kernel):
            raise ConfigurationError(f"kernel must be a semantic_kernel.Kernel, got {type(kernel).__name__}")
        self._function = function
        self._kernel = kernel
        self._schema = function_schema(function.metadata)

    @property
    def name(self) -> str:
        return self._schema["name"]

    @property
    def description(self) -> str:
        return self._schema.get("description", "")

    @property
    def schema(self) -> ToolSchema:
        return self._schema

    async def run_json(
        self, args: Mapping[str, Any], cancellation_token: CancellationToken | None = None, call_id: str | None = None
    ) -> Any:
        """Invoke the function with `args`; a cancelled token cancels the invocation."""
        invocation = self._function.invoke(self._kernel, KernelArguments(**dict(args)))
        result = await run_cancellable(invocation, cancellation_token)
        return result.value if isinstance(result, FunctionResult) else result

    def return_value_as_string(self, value: Any) -> str:
        return value_as_string(value)

    def __repr__(self) -> str:
        return f"KernelFunctionTool({self.name!r})"


def kernel_tools(kernel: Kernel, *, plugins: Iterable[str] | None = None) -> list[KernelFunctionTool]:
    """Every function of `kernel`'s plugins (or of the plugins named) as ext tools."""
    if not isinstance(kernel, Kernel):
        raise ConfigurationError(f"kernel must be a semantic_kernel.Kernel, got {type(kernel).__name__}")
    names = None if plugins is None else list(plugins)
    if names is not None:
        missing = [n for n in names if n not in kernel.plugins]
        if missing:
            raise ConfigurationError(f"plugins: {missing} are not in the kernel (it has {sorted(kernel.plugins)})")
    selected = kernel.plugins.values() if names is None else [kernel.plugins[n] for n in names]
    return [KernelFunctionTool(function, kernel) for plugin in selected for function in plugin.functions.values()]


# --- ext -> kernel ---------------------------------------------------------------------------------------------


class _ToolFunction(KernelFunction):
    """A kernel function that runs an ext tool (or a workbench's tool) with the arguments the model gave."""

    runner: Any = Field(exclude=True)
    """The `Runner`: the tool's arguments in, the text the model reads out."""

    async def _invoke_internal(self, context: FunctionInvocationContext) -> None:
        arguments = {p.name: context.arguments[p.name] for p in self.parameters if p.name in context.arguments}
        text = await self.runner(arguments)
        context.result = FunctionResult(function=self.metadata, value=text)

    async def _invoke_internal_stream(self, context: FunctionInvocationContext) -> None:
        # A tool has one result: the stream is that result.
        await self._invoke_internal(context)


def _parameters(schema: ToolSchema, where: str) -> list[KernelParameterMetadata]:
    parameters = normalize_parameters(schema.get("parameters"))
    required = set(parameters.get("required", []))
    out: list[KernelParameterMetadata] = []
    for name, prop in parameters.get("properties", {}).items():
        if not _NAME.match(name):
            raise ConfigurationError(
                f"{where}: parameter {name!r} cannot be a kernel function parameter (the kernel accepts letters, "
                "digits, '_' and '-')"
            )
        if not isinstance(prop, Mapping):
            raise ConfigurationError(f"{where}: parameter {name!r} has a schema that is not an object: {prop!r}")
        json_type = prop.get("type")
        out.append(
            KernelParameterMetadata(
                name=name,
                description=prop.get("description"),
                type=json_type if isinstance(json_type, str) else "object",
                is_required=name in required,
                schema_data=dict(prop),
            )
        )
    return out


def _function(schema: ToolSchema, runner: Runner, plugin_name: str | None) -> KernelFunction:
    where = f"tool {schema['name']!r}"
    if not _NAME.match(schema["name"]):
        raise ConfigurationError(f"{where}: the name cannot be a kernel function name")
    metadata = KernelFunctionMetadata(
        name=schema["name"],
        plugin_name=plugin_name,
        description=schema.get("description") or None,
        parameters=_parameters(schema, where),
        is_prompt=False,
        is_asynchronous=True,
    )
    return _ToolFunction(metadata=metadata, runner=runner)


def tool_function(tool: Tool, *, plugin_name: str | None = None) -> KernelFunction:
    """An ext tool as a kernel function (its name, description and argument schema kept). The kernel passes the
    model's arguments; the tool's return value reaches the model as `return_value_as_string` gives it."""
    if not isinstance(tool, Tool):
        raise ConfigurationError(f"tools entries must be ext Tools, got {type(tool).__name__}")
    if plugin_name is not None:
        _check_plugin_name(plugin_name)

    async def run(arguments: dict[str, Any]) -> str:
        return tool.return_value_as_string(await tool.run_json(arguments, None))

    return _function(tool_schema_of(tool), run, plugin_name)


def tools_plugin(name: str, tools: Sequence[Tool], *, description: str | None = None) -> KernelPlugin:
    """ext tools as one kernel plugin: `kernel.add_plugin(tools_plugin("math", [add, multiply]))`. The model sees
    each as `name-tool`."""
    _check_plugin_name(name)
    given: object = tools
    if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
        raise ConfigurationError(f"tools must be a list of ext Tools, got {type(tools).__name__}")
    functions = [tool_function(tool) for tool in tools]
    names = [f.name for f in functions]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"tools: duplicate tool names in {names}")
    return KernelPlugin(name=name, description=description, functions=functions)


async def workbench_plugin(name: str, workbench: Workbench, *, description: str | None = None) -> KernelPlugin:
    """A started workbench's tools (as `list_tools` presents them now) as one kernel plugin. Each call goes to
    `workbench.call_tool`; an error result reaches the model as text starting with "Error: "."""
    _check_plugin_name(name)
    if not isinstance(workbench, Workbench):
        raise ConfigurationError(f"workbench must be an ext Workbench, got {type(workbench).__name__}")
    functions = []
    for schema in await workbench.list_tools():
        functions.append(_function(schema, _workbench_runner(workbench, schema["name"]), None))
    return KernelPlugin(name=name, description=description, functions=functions)


def _workbench_runner(workbench: Workbench, tool: str) -> Runner:
    async def run(arguments: dict[str, Any]) -> str:
        result = await workbench.call_tool(tool, arguments)
        text = result.to_text()
        return CHAT_TOOL_ERROR_PREFIX + text if result.is_error else text

    return run


def _check_plugin_name(name: str) -> None:
    if not isinstance(name, str) or not _PLUGIN_NAME.match(name):
        raise ConfigurationError(
            f"plugin name {name!r} is invalid: the kernel accepts letters, digits and '_' (it joins plugin and "
            "function names with '-')"
        )
