"""`ChatAgent`: a model client or pipeline, instructions, tools, memory and an output type, run as one object.

The agent owns no chat logic: it builds one `ChatPipeline` whose outermost middleware is a `ToolLoop` over its
tools (so every middleware of a pipeline it is given sees each model turn and each tool call, as when the
loop is placed first with `ChatClientBuilder`), with `MemoryMiddleware` in front when it has memory. The loop's
`on_event` and `hold` hooks are how the agent saves each step and holds calls for approval (`_session`).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar, cast, overload

from pydantic import BaseModel

from ext.core import (
    AgentRuntime,
    AgentType,
    CancellationToken,
    ChatCompletionClient,
    ChatOptions,
    ConfigurationError,
    InMemoryStateStore,
    LLMMessage,
    StateStore,
    SystemMessage,
    Tool,
    ToolChoice,
    Workbench,
    check_tool_name,
)
from ext.memory import MemoryMiddleware, VectorMemory
from ext.pipeline import ChatMiddleware, ChatPipeline, ToolLoop

from ._approval import ApprovalPolicy, RequireApproval
from ._events import AgentEvent, RunFinished, RunResult
from ._history import turns_to_drop
from ._hosting import register_agent
from ._instructions import Variable, check_variables, render_instructions
from ._output import check_output_type
from ._record import SessionRecord
from ._session import AgentInput, AgentParts, AgentSession, loop_event, loop_hold
from ._spec import agent_from_spec
from ._tool import AgentTool

__all__ = ["ChatAgent"]

OutputT = TypeVar("OutputT")
ModelT = TypeVar("ModelT", bound=BaseModel)

DEFAULT_RESERVE_TOKENS = 1024
"""Tokens kept free for the answer when trimming the history (at most a quarter of the window)."""

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


class ChatAgent(Generic[OutputT]):
    """An agent: `run(input)` answers, running tools as the model asks, in a session kept in `store`.

    - `client`: any `ChatCompletionClient`, or a `ChatPipeline` (its middlewares apply to every model turn and
      tool call; it must not hold a tool loop of its own). The agent owns it: `close()` closes it.
    - `instructions`: the system text, with `{variable}` fields filled per run from `variables` (the agent's,
      updated by the run's).
    - `tools`: `Tool`s and `Workbench`es (MCP, HTTP, LangChain, another agent's `as_tool()`, ...).
    - `memory`: a `VectorMemory` (recalled into each call by `MemoryMiddleware` with its defaults) or a
      configured `MemoryMiddleware`.
    - `output_type`: a pydantic model class for a typed answer (`RunResult.output` is an instance); None for text.
    - `name` (letters, digits, `_`, `-`; the tool name of `as_tool()`), `description`.
    - `store`: where sessions live (any `StateStore`; in memory by default).
    - `require_approval`: tool names, or names mapped to True or to a predicate on the call's arguments.
    - `options`: `ChatOptions` for every model call; `max_iterations`: model turns per run (the tool loop's cap);
      `output_retries`: corrective retries for a typed answer (1).
    - `context_window`, `reserve_tokens`: the history rule's budget (default: the client's model info, and
      1024 tokens or a quarter of the window for the answer). See `_history`.
    """

    @overload
    def __init__(
        self: ChatAgent[str],
        client: ChatCompletionClient,
        *,
        instructions: str | None = None,
        tools: Sequence[Tool | Workbench] = (),
        memory: VectorMemory | MemoryMiddleware | None = None,
        output_type: None = None,
        name: str = "agent",
        description: str = "",
        store: StateStore | None = None,
        require_approval: RequireApproval | None = None,
        variables: Mapping[str, Variable] | None = None,
        options: ChatOptions | None = None,
        max_iterations: int = 10,
        output_retries: int = 1,
        context_window: int | None = None,
        reserve_tokens: int | None = None,
        tool_choice: ToolChoice = "auto",
        on_event: Callable[[AgentEvent[Any]], None] | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: ChatAgent[ModelT],
        client: ChatCompletionClient,
        *,
        instructions: str | None = None,
        tools: Sequence[Tool | Workbench] = (),
        memory: VectorMemory | MemoryMiddleware | None = None,
        output_type: type[ModelT],
        name: str = "agent",
        description: str = "",
        store: StateStore | None = None,
        require_approval: RequireApproval | None = None,
        variables: Mapping[str, Variable] | None = None,
        options: ChatOptions | None = None,
        max_iterations: int = 10,
        output_retries: int = 1,
        context_window: int | None = None,
        reserve_tokens: int | None = None,
        tool_choice: ToolChoice = "auto",
        on_event: Callable[[AgentEvent[Any]], None] | None = None,
    ) -> None: ...

    def __init__(
        self,
        client: ChatCompletionClient,
        *,
        instructions: str | None = None,
        tools: Sequence[Tool | Workbench] = (),
        memory: VectorMemory | MemoryMiddleware | None = None,
        output_type: type[Any] | None = None,
        name: str = "agent",
        description: str = "",
        store: StateStore | None = None,
        require_approval: RequireApproval | None = None,
        variables: Mapping[str, Variable] | None = None,
        options: ChatOptions | None = None,
        max_iterations: int = 10,
        output_retries: int = 1,
        context_window: int | None = None,
        reserve_tokens: int | None = None,
        tool_choice: ToolChoice = "auto",
        on_event: Callable[[AgentEvent[Any]], None] | None = None,
    ) -> None:
        if not isinstance(client, ChatCompletionClient):
            raise ConfigurationError(
                f"client must be a ChatCompletionClient or a ChatPipeline, got {type(client).__name__}"
            )
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigurationError(
                f"name must be 1 to 64 letters, digits, '_' or '-' starting with a letter, got {name!r}"
            )
        if instructions is not None and not isinstance(instructions, str):
            raise ConfigurationError(f"instructions must be a str or None, got {type(instructions).__name__}")
        if not isinstance(description, str):
            raise ConfigurationError(f"description must be a str, got {type(description).__name__}")
        if store is not None and not isinstance(store, StateStore):
            raise ConfigurationError(f"store must be a StateStore, got {type(store).__name__}")
        if options is not None and not isinstance(options, ChatOptions):
            raise ConfigurationError(f"options must be ChatOptions or None, got {type(options).__name__}")
        for argument, value, low in (("output_retries", output_retries, 0), ("max_iterations", max_iterations, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigurationError(f"{argument} must be an int >= {low}, got {value!r}")
        for argument, limit in (("context_window", context_window), ("reserve_tokens", reserve_tokens)):
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
                raise ConfigurationError(f"{argument} must be a positive int or None, got {limit!r}")
        try:
            self._output_model = check_output_type(output_type)
            self._variables = check_variables(variables)
            self._approval = ApprovalPolicy(require_approval)
        except TypeError as exc:
            raise ConfigurationError(str(exc)) from None
        check_tool_name(name)

        middleware: list[ChatMiddleware] = []
        if memory is not None:
            if isinstance(memory, VectorMemory):
                memory = MemoryMiddleware(memory)
            elif not isinstance(memory, MemoryMiddleware):
                raise ConfigurationError(
                    f"memory must be a VectorMemory or a MemoryMiddleware, got {type(memory).__name__}"
                )
            middleware.append(memory)
        self._loop = ToolLoop(tools, max_iterations=max_iterations, on_event=loop_event, hold=loop_hold)
        middleware.append(self._loop)
        if isinstance(client, ChatPipeline):
            if any(isinstance(m, ToolLoop) for m in client.middleware):
                raise ConfigurationError(
                    "the pipeline given to ChatAgent has a tool loop: build it without use_tool_loop and give the "
                    "tools to the agent, which runs them (saving each result in the session)"
                )
            self._pipeline = ChatPipeline(client.client, [*middleware, *client.middleware])
        else:
            self._pipeline = ChatPipeline(client, middleware)

        self._name = name
        self._description = description
        self._instructions = instructions
        self._tools = list(tools)
        self._store: StateStore = store if store is not None else InMemoryStateStore()
        self._options = options
        self._max_iterations = max_iterations
        self._output_retries = output_retries
        self._context_window = context_window
        self._reserve_tokens = reserve_tokens
        if not (isinstance(tool_choice, str) and tool_choice) and not isinstance(tool_choice, Tool):
            # A tool's name is checked by the tool loop when the call is made (a workbench's tools are listed then).
            raise ConfigurationError(
                f"tool_choice must be auto, required, none or the name of one of the agent's tools, got {tool_choice!r}"
            )
        if on_event is not None and not callable(on_event):
            raise ConfigurationError(f"on_event must be a callable taking an event, got {type(on_event).__name__}")
        self._tool_choice = tool_choice
        self._parts = AgentParts(
            name=name,
            session_type=self.session_type,
            store=self._store,
            pipeline=self._pipeline,
            options=options,
            output_model=self._output_model,
            output_retries=output_retries,
            max_iterations=max_iterations,
            approval=self._approval,
            render_instructions=self._render_instructions,
            trim=self._trim,
            tool_choice=tool_choice,
            on_event=on_event,
        )

    # --- what it is ------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return self._description

    @property
    def instructions(self) -> str | None:
        return self._instructions

    @property
    def output_type(self) -> type[BaseModel] | None:
        """The pydantic model of a typed answer, or None for text."""
        return self._output_model

    @property
    def tools(self) -> list[Tool | Workbench]:
        return list(self._tools)

    @property
    def store(self) -> StateStore:
        return self._store

    @property
    def pipeline(self) -> ChatPipeline:
        """The pipeline the agent calls (its tool loop outermost)."""
        return self._pipeline

    @property
    def tool_choice(self) -> ToolChoice:
        """The tool choice of each turn's first model call (later calls of the turn are `auto`)."""
        return self._tool_choice

    @property
    def options(self) -> ChatOptions | None:
        return self._options

    @property
    def max_iterations(self) -> int:
        return self._max_iterations

    @property
    def output_retries(self) -> int:
        return self._output_retries

    @property
    def session_type(self) -> str:
        """The `AgentId.type` of the agent's session records: `<name>.sessions`."""
        return f"{self._name}.sessions"

    def __repr__(self) -> str:
        output = self._output_model.__name__ if self._output_model else "str"
        return f"ChatAgent(name={self._name!r}, tools={len(self._tools)}, output_type={output}, store={self._store!r})"

    # --- running ---------------------------------------------------------------------------------------

    @classmethod
    def from_spec(
        cls,
        source: str | os.PathLike[str] | Mapping[str, Any],
        *,
        environ: Mapping[str, str] | None = None,
        store: StateStore | None = None,
    ) -> ChatAgent[Any]:
        """The agent an agent spec file (YAML or JSON) declares; see `check_agent_spec` for the format. Errors
        name the file and the field; secrets come from the environment only (`environ`, default `os.environ`)."""
        # Any: the output type is known only when the file is read, which the constructor's overloads cannot express.
        return agent_from_spec(cast("Any", cls), source, environ=environ, store=store)

    def session(self, session_id: str) -> AgentSession[OutputT]:
        """The session `session_id` (created by its first run), in this agent's store."""
        if not isinstance(session_id, str) or not session_id or not session_id.isprintable():
            raise ValueError(f"session_id must be a non-empty printable str, got {session_id!r}")
        return AgentSession[OutputT](self._parts, session_id)

    async def run(
        self,
        input: AgentInput,
        *,
        variables: Mapping[str, Variable] | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> RunResult[OutputT]:
        """One run in a new session. The session is deleted when the run completes; a run that stops for approval
        keeps it, and `result.session_id` reaches it (`agent.session(result.session_id)`)."""
        session = self.session(uuid.uuid4().hex)
        result = await session.run(input, variables=variables, cancellation_token=cancellation_token)
        if result.status == "completed":
            await session.delete()
        return result

    async def run_stream(
        self,
        input: AgentInput,
        *,
        variables: Mapping[str, Variable] | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[AgentEvent[OutputT]]:
        """`run`, yielding events as they happen; the last is `RunFinished`."""
        session = self.session(uuid.uuid4().hex)
        async for event in session.run_stream(input, variables=variables, cancellation_token=cancellation_token):
            if isinstance(event, RunFinished) and event.result.status == "completed":
                await session.delete()
            yield event

    # --- hosting -----------------------------------------------------------------------------------------

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> AgentTool:
        """This agent as a tool of another agent: the tool's argument is the request text, its result the
        answer (the JSON of a typed answer). Each call is a new session."""
        return AgentTool(self, name=name, description=description)

    async def register(
        self, runtime: AgentRuntime, agent_type: str | AgentType | None = None, *, topics: Sequence[str] = ()
    ) -> AgentType:
        """Host this agent on `runtime` (local or gRPC) as `agent_type` (default: the agent's name): one session
        per `AgentId` key. It answers `AgentRequest` with `AgentReply` and a `str` with the answer text, as RPCs,
        and runs a turn for each message published on a topic type in `topics`. See `ChatAgentHost`."""
        return await register_agent(self, runtime, agent_type, topics)

    async def close(self) -> None:
        """Close the pipeline (its middlewares, the tool loop's workbenches and the client)."""
        await self._pipeline.close()

    async def __aenter__(self) -> ChatAgent[OutputT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- for sessions ------------------------------------------------------------------------------------

    def render_instructions(self, variables: Mapping[str, Variable] | None = None) -> str | None:
        """The instructions with their placeholders filled from the agent's variables and `variables` (as a run
        fills them); None when the agent has none."""
        return self._render_instructions(variables)

    def _render_instructions(self, variables: Mapping[str, Variable] | None) -> str | None:
        if self._instructions is None:
            return None
        values = dict(self._variables)
        values.update(check_variables(variables))
        return render_instructions(self._instructions, values)

    def _trim(self, record: SessionRecord) -> None:
        """Apply the history rule (see `_history`) to a record whose turn just opened."""
        turn = record.turn
        if turn is None or turn.start == 0:
            return
        window = self._context_window or self._pipeline.capabilities.context_window
        reserve = self._reserve_tokens or min(DEFAULT_RESERVE_TOKENS, window // 4)
        fixed: list[LLMMessage] = [SystemMessage(content=turn.instructions)] if turn.instructions else []
        plain_tools = [t for t in self._tools if isinstance(t, Tool)]
        base = self._pipeline.count_tokens(fixed, tools=plain_tools) if (fixed or plain_tools) else 0
        drop = turns_to_drop(
            record.messages,
            keep_from=turn.start,
            budget=window - reserve - base,
            count=lambda part: self._pipeline.count_tokens(list(part)),
        )
        if drop:
            del record.messages[:drop]
            turn.start -= drop


def load_agent(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    store: StateStore | None = None,
) -> ChatAgent[Any]:
    """`ChatAgent.from_spec(source, environ=..., store=...)`: the agent an agent spec file declares."""
    return ChatAgent.from_spec(source, environ=environ, store=store)
