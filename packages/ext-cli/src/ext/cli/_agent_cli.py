"""`ext chat --agent FILE` and `ext eval --agent FILE`: an agent spec file (ext-agent) on the command line.

`ext chat --agent` runs the agent in one session (`--session ID` names it; with the spec's `store:` it continues
across commands): text streams to stdout, tool calls and results and the usage line to stderr. A call the spec
holds for approval is asked about at the terminal (y/N; a denial's reason goes to the model); without a terminal
the command stops with exit code 3, naming the held calls and the session.

`ext eval --agent` scores the agent's model configuration: its pipeline, with its instructions as the first
system message. The case's tools stand in for the agent's own, since eval scores calls and runs none."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ext.core import ComponentError, ConfigurationError, SystemMessage
from ext.pipeline import ChatCall, ChatItem, ChatMiddleware, ChatPipeline, CreateNext, StreamNext, ToolLoop

from ._errors import CliError
from ._output import Output

if TYPE_CHECKING:
    from ext.agent import AgentSession, ChatAgent, RunResult
    from ext.core import CreateResult
    from ext.eval import EvalTarget

_INSTALL_HINT = "install ext-agent (from a clone: pip install -e 'packages/ext-cli[agent]')"
AWAITING_APPROVAL = 3


def load_agent_spec(path: str) -> ChatAgent[Any]:
    try:
        from ext.agent import ChatAgent
    except ImportError:
        raise CliError("--agent needs ext-agent, which is not installed", hint=_INSTALL_HINT) from None
    try:
        return ChatAgent.from_spec(path)
    except (ConfigurationError, ComponentError) as exc:
        message = str(exc)
        raise CliError(message if message.startswith(f"{path}:") else f"{path}: {message}") from None


async def run_agent_chat(
    path: str,
    question: str | None,
    out: Output,
    *,
    session_id: str | None = None,
    read_line: Callable[[], Awaitable[str | None]] | None = None,
) -> int:
    """One question, or an interactive conversation when `question` is None."""
    from ._chat import _read_line

    with out.status(f"Loading agent {path} …"):
        agent = await asyncio.to_thread(load_agent_spec, path)
    reader = read_line or _read_line
    interactive = read_line is not None or sys.stdin.isatty()
    async with agent:
        session = agent.session(session_id or f"cli-{uuid.uuid4().hex[:12]}")
        if question is not None:
            return await _turn(session, session.run_stream(question), out, reader if interactive else None)
        out.info(f"Agent {agent.name}, session {session.id}: type a message, or 'exit' (Ctrl-D) to leave.")
        while True:
            line = await reader()
            if line is None or line.strip() in {"exit", "quit"}:
                return 0
            if line.strip():
                await _turn(session, session.run_stream(line), out, reader)


async def _turn(
    session: AgentSession[Any],
    events: AsyncIterator[Any],
    out: Output,
    reader: Callable[[], Awaitable[str | None]] | None,
) -> int:
    from ext.agent import ApprovalRequested, OutputRetry, RunFinished, TextDelta, ToolFinished, ToolStarted

    while True:
        result: RunResult[Any] | None = None
        printed = False
        async for event in events:
            if isinstance(event, TextDelta):
                out.answer(event.text)
                printed = printed or bool(event.text)
            elif isinstance(event, ToolStarted):
                out.info(f"→ {event.call.name}({event.call.arguments})", style="cyan")
            elif isinstance(event, ToolFinished):
                mark, style = ("✗", "red") if event.result.is_error else ("←", "green")
                out.info(f"{mark} {event.result.name}: {_short(event.result.content)}", style=style)
            elif isinstance(event, OutputRetry):
                out.info(f"… the answer did not fit its type; asking again ({_short(event.errors)})")
            elif isinstance(event, ApprovalRequested):
                out.info(f"? {event.call.name}({event.call.arguments}) waits for approval", style="yellow")
            elif isinstance(event, RunFinished):
                result = event.result
        if result is None:
            raise CliError("the agent's stream ended without a result")
        if result.status == "completed":
            if not printed:
                value = result.output
                out.answer(value.model_dump_json() if isinstance(value, BaseModel) else str(value))
            out.end_answer()
            cost = f"; cost {result.cost:.6f}" if result.cost is not None else ""
            usage = result.usage
            out.info(f"[{usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens{cost}]")
            return 0
        out.end_answer()
        if reader is None:
            held = ", ".join(f"{p.name} ({p.call_id})" for p in result.pending)
            out.info(f"waiting for approval of {held} in session {result.session_id}", style="yellow")
            return AWAITING_APPROVAL
        for pending in result.pending:
            out.info(f"approve {pending.name}({pending.arguments})? [y/N]", style="yellow")
            answer = (await reader() or "").strip().lower()
            if answer in {"y", "yes"}:
                await session.approve(pending.call_id)
            else:
                await session.deny(pending.call_id, "the user declined this call")
        events = session.resume_stream()


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Instructions(ChatMiddleware):
    """Puts the agent's instructions first, as its runs do."""

    def __init__(self, instructions: str) -> None:
        self._message = SystemMessage(content=instructions)

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        return await next(call.replace(messages=[self._message, *call.messages]))

    async def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        async for item in next(call.replace(messages=[self._message, *call.messages])):
            yield item


def agent_eval_target(path: str) -> EvalTarget:
    """`ext eval --agent FILE`'s configuration: the agent's pipeline with its instructions first."""
    from ext.eval import EvalTarget

    agent = load_agent_spec(path)
    instructions = agent.render_instructions()
    # The agent's pipeline without its tool loop: eval scores the calls the model makes, it runs none.
    pipeline = agent.pipeline
    middleware = [m for m in pipeline.middleware if not isinstance(m, ToolLoop)]
    if instructions:
        middleware.insert(0, _Instructions(instructions))
    return EvalTarget(agent.name, ChatPipeline(pipeline.client, middleware), owned=True)
