from __future__ import annotations

import asyncio
import enum
import json
import threading
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from ext.core import (
    BaseTool,
    CancellationToken,
    FunctionTool,
    SchemaTool,
    Tool,
    ToolArgumentsError,
    ToolSchema,
    value_as_string,
)


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


class Location(BaseModel):
    city: str
    country: str = "NO"


def weather(
    location: Location,
    unit: Unit = Unit.C,
    days: Annotated[int, "How many days ahead"] = 1,
    detail: Literal["short", "long"] = "short",
    note: Optional[str] = None,
    tags: list[str] | None = None,
) -> dict[str, object]:
    """Forecast for a place."""
    return {"city": location.city, "unit": unit.value, "days": days, "detail": detail, "note": note, "tags": tags}


def test_schema_from_type_hints() -> None:
    tool = FunctionTool(weather)
    schema = tool.schema
    assert schema["name"] == "weather"
    assert schema["description"] == "Forecast for a place."
    params = schema["parameters"]
    assert params["required"] == ["location"]
    props = params["properties"]
    assert props["location"]["properties"]["city"] == {"type": "string"}
    assert props["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert props["unit"]["default"] == "celsius"
    assert props["days"]["description"] == "How many days ahead"
    assert props["detail"]["enum"] == ["short", "long"]
    assert {"type": "null"} in props["note"]["anyOf"]
    assert props["tags"]["anyOf"][0] == {"items": {"type": "string"}, "type": "array"}
    assert params["additionalProperties"] is False
    assert "$defs" not in params
    assert isinstance(tool, Tool)


async def test_run_json_validates_and_calls() -> None:
    tool = FunctionTool(weather)
    out = await tool.run_json({"location": {"city": "Oslo"}, "unit": "fahrenheit", "days": 3})
    assert out == {"city": "Oslo", "unit": "fahrenheit", "days": 3, "detail": "short", "note": None, "tags": None}
    assert tool.return_value_as_string(out).startswith('{"city": "Oslo"')


async def test_bad_arguments_name_the_argument() -> None:
    tool = FunctionTool(weather)
    with pytest.raises(ToolArgumentsError, match=r"'weather'.*days"):
        await tool.run_json({"location": {"city": "Oslo"}, "days": "many"})
    with pytest.raises(ToolArgumentsError, match="location"):
        await tool.run_json({})
    with pytest.raises(ToolArgumentsError, match="bogus: Extra inputs"):
        await tool.run_json({"location": {"city": "x"}, "bogus": 1})


async def test_sync_function_runs_in_a_thread() -> None:
    seen: list[int | None] = []

    def where() -> str:
        seen.append(threading.get_ident())
        return "ok"

    tool = FunctionTool(where, description="d")
    assert await tool.run_json({}) == "ok"
    assert seen[0] != threading.get_ident()


async def test_cancellation_token_is_passed_and_cancels_async_function() -> None:
    started = asyncio.Event()
    received: list[CancellationToken] = []

    async def slow(x: int, cancellation_token: CancellationToken) -> int:
        received.append(cancellation_token)
        started.set()
        await asyncio.Event().wait()
        return x

    tool = FunctionTool(slow, description="slow")
    assert "cancellation_token" not in tool.schema["parameters"]["properties"]
    token = CancellationToken()
    task = asyncio.ensure_future(tool.run_json({"x": 1}, token))
    await started.wait()
    assert received == [token]
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_name_and_description_rules() -> None:
    assert FunctionTool(weather, description="x", name="forecast").name == "forecast"
    with pytest.raises(ValueError, match="name"):
        FunctionTool(lambda: 1, description="x")
    with pytest.raises(ValueError, match="tool name"):
        FunctionTool(weather, name="bad name")
    with pytest.raises(TypeError, match="callable"):
        FunctionTool(42, description="x")  # type: ignore[arg-type]
    assert repr(FunctionTool(weather)) == "FunctionTool(name='weather')"


def test_field_defaults_and_strict_flag() -> None:
    def f(n: int = Field(5, ge=1, description="count")) -> int:
        return n

    tool = FunctionTool(f, description="f", strict=True)
    assert tool.schema["parameters"]["properties"]["n"] == {
        "default": 5,
        "description": "count",
        "minimum": 1,
        "type": "integer",
    }
    assert tool.schema["strict"] is True


def test_value_as_string() -> None:
    assert value_as_string("x") == "x"
    assert value_as_string(None) == ""
    assert value_as_string(Location(city="A")) == '{"city":"A","country":"NO"}'
    assert value_as_string([1, {"a": 2}]) == '[1, {"a": 2}]'
    assert value_as_string(object) == json.dumps(str(object))


async def test_base_tool_subclass() -> None:
    class Args(BaseModel):
        text: str

    class Upper(BaseTool):
        def __init__(self) -> None:
            super().__init__(name="upper", description="Upper-case text", args_type=Args)

        async def run(self, args: Args, cancellation_token: CancellationToken | None) -> str:
            return args.text.upper()

    tool = Upper()
    assert await tool.run_json({"text": "hi"}) == "HI"
    assert tool.args_type is Args
    with pytest.raises(ToolArgumentsError, match="must be an object"):
        await tool.run_json(["x"])  # type: ignore[arg-type]


class _Echo(SchemaTool[BaseModel]):
    def __init__(self) -> None:
        self._name = "echo"
        self._description = "Echo the arguments."
        self._schema = {"name": "echo", "description": "Echo the arguments.", "parameters": {"type": "object"}}

    async def run_json(
        self, args: Any, cancellation_token: CancellationToken | None = None, call_id: str | None = None
    ) -> Any:
        self._check_args_object(args)
        return dict(args)


async def test_schema_tool_gives_the_tool_protocol() -> None:
    tool = _Echo()
    assert isinstance(tool, Tool)
    assert (tool.name, tool.description) == ("echo", "Echo the arguments.")
    expected: ToolSchema = {"name": "echo", "description": "Echo the arguments.", "parameters": {"type": "object"}}
    assert tool.schema == expected
    assert tool.component_type == "tool"
    assert await tool.run_json({"a": 1}) == {"a": 1}
    assert tool.return_value_as_string({"a": 1}) == '{"a": 1}'
    assert repr(tool) == "_Echo(name='echo')"
    with pytest.raises(ToolArgumentsError, match=r"arguments for tool 'echo' must be an object, got list"):
        await tool.run_json([1])
