"""LangChainToolAdapter over real langchain-core tools."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar
from uuid import UUID

import pytest
from langchain_core.callbacks import (
    AsyncCallbackHandler,
    CallbackManagerForRetrieverRun,
    CallbackManagerForToolRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import (
    BaseTool,
    BaseToolkit,
    InjectedToolArg,
    InjectedToolCallId,
    StructuredTool,
    Tool,
    ToolException,
    create_retriever_tool,
    tool,
)
from pydantic import BaseModel, Field

from ext.core import (
    CancellationToken,
    ComponentError,
    ConfigurationError,
    Image,
    StaticWorkbench,
    ToolArgumentsError,
    ToolOverride,
    Workbench,
)
from ext.core import Tool as ExtTool
from ext.testing.conformance import WorkbenchConformance
from ext.tools.langchain import LangChainToolAdapter, LangChainToolError, adapt_toolkit

PNG_1PX_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="


@tool
def add(a: int, b: Annotated[int, "the second number"] = 1) -> int:
    """Add two integers."""
    return a + b


@tool
async def shout(text: str) -> str:
    """Upper-case the text."""
    await asyncio.sleep(0)
    return text.upper()


class SearchArgs(BaseModel):
    query: str = Field(description="What to look for")
    limit: int = Field(default=3, ge=1, le=10)


class SearchTool(BaseTool):
    """A BaseTool subclass with a pydantic args_schema and a sync `_run` taking `run_manager`."""

    name: str = "search"
    description: str = "Search the catalogue."
    args_schema: type[BaseModel] = SearchArgs

    def _run(self, query: str, limit: int = 3, run_manager: CallbackManagerForToolRun | None = None) -> str:
        assert run_manager is not None  # LangChain passes it because the signature asks for it
        run_manager.on_text(f"searching {query}")
        return f"{limit} results for {query} (run {run_manager.run_id})"


class JsonSchemaTool(BaseTool):
    """A BaseTool with a JSON-schema args_schema (LangChain does not validate those)."""

    name: str = "lookup"
    description: str = "Look a key up."
    args_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"key": {"type": "string", "description": "The key"}, "default": {"type": "string"}},
        "required": ["key"],
    }
    calls: list[dict[str, Any]] = []

    def _run(self, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        return f"value of {kwargs['key']}"


class Recorder(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    async def on_tool_start(
        self, serialized: dict[str, Any], input_str: str, *, run_id: UUID, inputs: Any = None, **kwargs: Any
    ) -> None:
        self.events.append(("start", (serialized["name"], inputs, kwargs.get("tool_call_id"))))

    async def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append(("end", output.content))

    async def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append(("error", str(error)))

    async def on_text(self, text: str, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append(("text", text))


# -- schema -----------------------------------------------------------------------------------------------


def test_schema_is_what_langchain_sends_to_models() -> None:
    adapter = LangChainToolAdapter(add)
    assert isinstance(adapter, ExtTool)
    assert adapter.schema == {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "integer", "default": 1, "description": "the second number"},
            },
            "required": ["a"],
        },
    }


def test_schema_of_pydantic_and_json_schema_tools() -> None:
    search = LangChainToolAdapter(SearchTool())
    assert search.schema["parameters"] == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for"},
            "limit": {"type": "integer", "default": 3, "minimum": 1, "maximum": 10},
        },
        "required": ["query"],
    }
    lookup = LangChainToolAdapter(JsonSchemaTool())
    assert lookup.schema["parameters"]["properties"]["key"] == {"type": "string", "description": "The key"}
    assert lookup.schema["parameters"]["required"] == ["key"]
    assert lookup.description == "Look a key up."


def test_injected_arguments_are_not_in_the_schema() -> None:
    @tool
    def save(note: str, user_id: Annotated[str, InjectedToolArg], call: Annotated[str, InjectedToolCallId]) -> str:
        """Save a note."""
        return note

    assert set(LangChainToolAdapter(save).schema["parameters"]["properties"]) == {"note"}


def test_simple_tool_takes_one_string() -> None:
    adapter = LangChainToolAdapter(Tool(name="upper", func=str.upper, description="Upper-case."))
    assert adapter.schema["parameters"] == {
        "type": "object",
        "properties": {"__arg1": {"type": "string"}},
        "required": ["__arg1"],
    }


def test_names_and_overrides() -> None:
    spaced = Tool(name="web search", func=str.upper, description="d")
    with pytest.raises(ConfigurationError, match=r"tool name 'web search' is invalid.*pass name="):
        LangChainToolAdapter(spaced)
    adapter = LangChainToolAdapter(spaced, name="web_search", description="Search the web.")
    assert (adapter.name, adapter.description) == ("web_search", "Search the web.")
    assert adapter.schema["name"] == "web_search"
    assert adapter.langchain_tool is spaced
    assert repr(adapter) == "LangChainToolAdapter(name='web_search', tool=Tool)"
    with pytest.raises(ConfigurationError, match=r"langchain_tool must be a langchain_core\.tools\.BaseTool"):
        LangChainToolAdapter(lambda: 1)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="description must be a string"):
        LangChainToolAdapter(add, description=3)  # type: ignore[arg-type]


def test_cannot_be_dumped() -> None:
    with pytest.raises(ComponentError, match="cannot be dumped"):
        LangChainToolAdapter(add).dump_component()


# -- calls ------------------------------------------------------------------------------------------------


async def test_sync_and_async_tool_functions() -> None:
    assert await LangChainToolAdapter(add).run_json({"a": 2, "b": 5}) == "7"
    assert await LangChainToolAdapter(add).run_json({"a": 2}) == "3"
    assert await LangChainToolAdapter(shout).run_json({"text": "hey"}) == "HEY"


async def test_structured_tool_prefers_its_coroutine() -> None:
    used: list[str] = []

    def sync_fn(x: int) -> str:
        used.append("sync")
        return str(x)

    async def async_fn(x: int) -> str:
        used.append("async")
        return str(x * 10)

    both = StructuredTool.from_function(func=sync_fn, coroutine=async_fn, name="both", description="d")
    assert await LangChainToolAdapter(both).run_json({"x": 4}) == "40"
    only_sync = StructuredTool.from_function(func=sync_fn, name="only_sync", description="d")
    assert await LangChainToolAdapter(only_sync).run_json({"x": 4}) == "4"
    assert used == ["async", "sync"]


async def test_simple_tool_call() -> None:
    adapter = LangChainToolAdapter(Tool(name="upper", func=str.upper, description="Upper-case."))
    assert await adapter.run_json({"__arg1": "abc"}) == "ABC"


async def test_base_tool_gets_run_manager_and_callbacks_fire() -> None:
    recorder = Recorder()
    adapter = LangChainToolAdapter(SearchTool(), config={"callbacks": [recorder], "tags": ["ext"]})
    result = await adapter.run_json({"query": "lamps", "limit": 2}, call_id="call_42")
    assert result.startswith("2 results for lamps (run ")
    assert recorder.events == [
        ("start", ("search", {"query": "lamps", "limit": 2}, "call_42")),
        ("text", "searching lamps"),
        ("end", result),
    ]


async def test_tool_level_callbacks_fire_and_errors_are_reported() -> None:
    recorder = Recorder()

    def fails(x: int) -> str:
        raise ToolException(f"cannot handle {x}")

    broken = StructuredTool.from_function(func=fails, name="broken", description="Always fails.", callbacks=[recorder])
    with pytest.raises(ToolException, match="cannot handle 3"):
        await LangChainToolAdapter(broken).run_json({"x": 3})
    assert recorder.events[0][0] == "start"
    assert recorder.events[-1] == ("error", "cannot handle 3")


async def test_json_schema_tool_checks_required_arguments_first() -> None:
    lc_tool = JsonSchemaTool()
    adapter = LangChainToolAdapter(lc_tool)
    with pytest.raises(
        ToolArgumentsError, match="invalid arguments for tool 'lookup': missing required argument 'key'"
    ):
        await adapter.run_json({"default": "x"})
    assert lc_tool.calls == []
    assert await adapter.run_json({"key": "k1"}) == "value of k1"
    assert lc_tool.calls == [{"key": "k1"}]


async def test_pydantic_validation_error_names_the_argument() -> None:
    adapter = LangChainToolAdapter(SearchTool())
    with pytest.raises(ToolArgumentsError) as info:
        await adapter.run_json({"query": "q", "limit": 50})
    assert str(info.value).startswith("invalid arguments for tool 'search': argument 'limit': ")
    with pytest.raises(ToolArgumentsError, match="argument 'query': Field required"):
        await adapter.run_json({})
    with pytest.raises(ToolArgumentsError, match="must be an object, got str"):
        await adapter.run_json("q")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        (True, "disk is full"),
        ("The tool failed, try later.", "The tool failed, try later."),
        (lambda e: f"handled: {e}", "handled: disk is full"),
    ],
)
async def test_handle_tool_error(flag: Any, message: str) -> None:
    def save(text: str) -> str:
        raise ToolException("disk is full")

    lc_tool = StructuredTool.from_function(func=save, name="save", description="d", handle_tool_error=flag)
    adapter = LangChainToolAdapter(lc_tool)
    with pytest.raises(LangChainToolError) as info:
        await adapter.run_json({"text": "x"})
    assert str(info.value) == message
    async with StaticWorkbench([adapter]) as bench:
        result = await bench.call_tool("save", {"text": "x"})
    assert result.is_error is True
    assert result.to_text() == f"LangChainToolError: {message}"


async def test_handle_validation_error() -> None:
    lc_tool = SearchTool(handle_validation_error="Bad input, send a query string.")
    with pytest.raises(LangChainToolError, match=r"Bad input, send a query string\."):
        await LangChainToolAdapter(lc_tool).run_json({"limit": 3})


async def test_unhandled_exceptions_propagate() -> None:
    @tool
    def divide(a: int, b: int) -> float:
        """Divide."""
        return a / b

    with pytest.raises(ZeroDivisionError):
        await LangChainToolAdapter(divide).run_json({"a": 1, "b": 0})


async def test_injected_tool_call_id_receives_the_call_id() -> None:
    @tool
    def whoami(note: str, call: Annotated[str, InjectedToolCallId]) -> str:
        """Report the call id."""
        return f"{note} from {call}"

    adapter = LangChainToolAdapter(whoami)
    assert await adapter.run_json({"note": "hi"}, call_id="call_7") == "hi from call_7"
    generated = await adapter.run_json({"note": "hi"})
    assert generated.startswith("hi from call_")


async def test_content_and_artifact_returns_the_content() -> None:
    @tool(response_format="content_and_artifact")
    def fetch(n: int) -> tuple[str, list[int]]:
        """Fetch n numbers."""
        return f"{n} numbers", list(range(n))

    assert await LangChainToolAdapter(fetch).run_json({"n": 3}) == "3 numbers"


async def test_content_blocks_become_text_and_images() -> None:
    @tool
    def chart(title: str) -> list[dict[str, Any]]:
        """Draw a chart."""
        return [
            {"type": "text", "text": f"chart: {title}"},
            {"type": "image", "base64": PNG_1PX_B64, "mime_type": "image/png"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_1PX_B64}"}},
        ]

    adapter = LangChainToolAdapter(chart)
    value = await adapter.run_json({"title": "sales"})
    assert value[0] == "chart: sales"
    assert isinstance(value[1], Image) and isinstance(value[2], Image)
    assert value[1].to_base64() == PNG_1PX_B64
    assert adapter.return_value_as_string(value) == "chart: sales\n[image]\n[image]"
    async with StaticWorkbench([adapter]) as bench:
        result = await bench.call_tool("chart", {"title": "sales"})
    assert [type(part).__name__ for part in result.result] == [
        "TextResultContent",
        "ImageResultContent",
        "ImageResultContent",
    ]


async def test_dict_results_are_json_text() -> None:
    @tool
    def info(key: str) -> dict[str, Any]:
        """Info about a key."""
        return {"key": key, "size": 3}

    assert await LangChainToolAdapter(info).run_json({"key": "k"}) == '{"key": "k", "size": 3}'


# -- event loop, cancellation -------------------------------------------------------------------------------


async def test_sync_tools_do_not_block_the_event_loop() -> None:
    entered = threading.Event()
    release = threading.Event()

    @tool
    def blocking(x: int) -> str:
        """Blocks its thread until released."""
        entered.set()
        # Run on the event loop, this would hold the loop: nothing could set `release` until the wait timed out.
        return "released" if release.wait(timeout=10) else "loop was blocked"

    call = asyncio.ensure_future(LangChainToolAdapter(blocking).run_json({"x": 1}))
    assert await asyncio.to_thread(entered.wait, 10)
    # The tool now sits in its worker thread while this coroutine keeps running on the loop.
    release.set()
    assert await asyncio.wait_for(call, 10) == "released"


async def test_cancellation_token_cancels_an_async_tool() -> None:
    started = asyncio.Event()
    outcome: list[str] = []

    @tool
    async def wait_forever(x: int) -> str:
        """Waits until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        return "done"

    token = CancellationToken()
    call = asyncio.ensure_future(LangChainToolAdapter(wait_forever).run_json({"x": 1}, token))
    await asyncio.wait_for(started.wait(), 5)
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(call, 5)
    assert outcome == ["cancelled"]


async def test_cancellation_returns_at_once_for_a_sync_tool() -> None:
    entered = threading.Event()
    release = threading.Event()

    @tool
    def stuck(x: int) -> str:
        """Blocks until released."""
        entered.set()
        release.wait(timeout=10)
        return "late"

    token = CancellationToken()
    call = asyncio.ensure_future(LangChainToolAdapter(stuck).run_json({"x": 1}, token))
    assert await asyncio.to_thread(entered.wait, 5)
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(call, 5)  # the caller is free although the thread still runs
    release.set()


async def test_cancelled_token_before_the_call_runs_nothing() -> None:
    calls: list[int] = []

    @tool
    def count(x: int) -> str:
        """Counts."""
        calls.append(x)
        return "ok"

    token = CancellationToken()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await LangChainToolAdapter(count).run_json({"x": 1}, token)
    assert calls == []


# -- tools that ship with langchain-core -------------------------------------------------------------------


class KeywordRetriever(BaseRetriever):
    """An in-memory retriever: documents sharing the most words with the query, best first."""

    documents: list[Document]
    k: int = 1

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        words = set(re.findall(r"\w+", query.lower()))
        scored = sorted(self.documents, key=lambda d: -len(words & set(re.findall(r"\w+", d.page_content.lower()))))
        return scored[: self.k]


CAPITALS = [
    Document(page_content="Oslo is the capital of Norway."),
    Document(page_content="Lima is the capital of Peru."),
    Document(page_content="Hanoi is the capital of Vietnam."),
]


def _retriever_tool(response_format: str = "content") -> BaseTool:
    return create_retriever_tool(
        KeywordRetriever(documents=CAPITALS),
        "capitals",
        "Find facts about capital cities.",
        response_format=response_format,  # type: ignore[arg-type]
    )


async def test_retriever_tool_from_langchain_core() -> None:
    adapter = LangChainToolAdapter(_retriever_tool())
    assert adapter.schema == {
        "name": "capitals",
        "description": "Find facts about capital cities.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "query to look up in retriever"}},
            "required": ["query"],
        },
    }
    assert await adapter.run_json({"query": "capital of peru"}) == "Lima is the capital of Peru."
    artifact_tool = LangChainToolAdapter(_retriever_tool("content_and_artifact"))
    assert await artifact_tool.run_json({"query": "norway"}) == "Oslo is the capital of Norway."


async def test_retriever_tool_in_a_workbench() -> None:
    async with StaticWorkbench([LangChainToolAdapter(_retriever_tool())]) as bench:
        (schema,) = await bench.list_tools()
        assert schema["name"] == "capitals"
        result = await bench.call_tool("capitals", {"query": "vietnam"})
        assert (result.is_error, result.to_text()) == (False, "Hanoi is the capital of Vietnam.")
        bad = await bench.call_tool("capitals", {"q": "x"})
        assert bad.is_error is True
        assert "argument 'query': Field required" in bad.to_text()


async def test_retriever_tool_over_langchain_cores_in_memory_vector_store() -> None:
    # InMemoryVectorStore and DeterministicFakeEmbedding ship with langchain-core but need numpy,
    # which langchain-core does not install.
    pytest.importorskip("numpy")
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_documents(CAPITALS)
    lc_tool = create_retriever_tool(store.as_retriever(search_kwargs={"k": 1}), "capitals", "Capital facts.")
    # The fake embedding is a pure function of the text, so a document is its own nearest neighbour.
    assert await LangChainToolAdapter(lc_tool).run_json({"query": "Lima is the capital of Peru."}) == (
        "Lima is the capital of Peru."
    )


@pytest.mark.filterwarnings("ignore:This API is in beta")  # Runnable.as_tool is marked beta
async def test_runnable_as_tool() -> None:
    def describe(payload: dict[str, Any]) -> str:
        return f"{payload['city']} has {payload['people']} people"

    lc_tool = RunnableLambda(describe).as_tool(
        name="describe_city",
        description="Describe a city.",
        arg_types={"city": str, "people": int},
    )
    adapter = LangChainToolAdapter(lc_tool)
    assert adapter.schema["parameters"]["properties"] == {"city": {"type": "string"}, "people": {"type": "integer"}}
    assert await adapter.run_json({"city": "Oslo", "people": 709000}) == "Oslo has 709000 people"


# -- toolkits ---------------------------------------------------------------------------------------------


class MathToolkit(BaseToolkit):
    def get_tools(self) -> list[BaseTool]:
        return [add, shout, SearchTool()]


async def test_adapt_toolkit_wraps_each_tool() -> None:
    adapters = adapt_toolkit(MathToolkit())
    assert [a.name for a in adapters] == ["add", "shout", "search"]
    assert all(isinstance(a, LangChainToolAdapter) for a in adapters)
    assert [a.name for a in adapt_toolkit([add, shout])] == ["add", "shout"]
    async with StaticWorkbench(adapters) as bench:
        assert [t["name"] for t in await bench.list_tools()] == ["add", "shout", "search"]
        assert (await bench.call_tool("add", {"a": 20, "b": 22})).to_text() == "42"
        assert (await bench.call_tool("shout", {"text": "ok"})).to_text() == "OK"


# -- workbench conformance ----------------------------------------------------------------------------------


@tool
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@tool
def fail() -> str:
    """Always fails."""
    raise ToolException("this tool always fails")


@tool
async def slow() -> str:
    """Never finishes unless cancelled."""
    await asyncio.Event().wait()
    return "unreachable"


class TestLangChainWorkbenchConformance(WorkbenchConformance):
    echo_tool = "echo"
    failing_tool = "fail"
    slow_tool = "slow"
    failing_arguments: ClassVar[dict[str, Any]] = {}

    async def make_workbench(self, tool_overrides: Mapping[str, ToolOverride] | None = None) -> Workbench:
        return StaticWorkbench(adapt_toolkit([echo, fail, slow]), tool_overrides)
