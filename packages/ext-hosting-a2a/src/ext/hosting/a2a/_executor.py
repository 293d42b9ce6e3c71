"""`ResponderExecutor`: the SDK's `AgentExecutor` over a `Responder`.

Each message runs one turn: the task is created (first message) and set `working`; each piece of text is an
artifact update of the artifact `answer` (the first creates it, the rest `append`), so a streaming client sees
the answer grow; the turn ends `completed`, `input-required` (the responder asked), or `failed` with the
error's message. A cancel (from this process or, through the shared task store, another) cancels the turn's
`CancellationToken` and the running task."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Part, TaskState
from ext.core import CancellationToken

from ._responders import InputRequired, Responder

logger = logging.getLogger(__name__)

ANSWER_ARTIFACT = "answer"


class ResponderExecutor(AgentExecutor):
    """Runs a `Responder` per message. With `cancelled` (a check of the shared task store), a turn also stops
    when another process cancels its task: the check runs every `poll_interval` seconds while the turn runs."""

    def __init__(
        self,
        responder: Responder,
        *,
        cancelled: Callable[[str], Awaitable[bool]] | None = None,
        poll_interval: float = 0.1,
    ) -> None:
        self._responder = responder
        self._cancelled = cancelled
        self._poll = poll_interval

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id, context.context_id
        if task_id is None or context_id is None or context.message is None:
            raise ValueError("a request without a message, task id or context id")
        updater = TaskUpdater(event_queue, task_id, context_id)
        current = context.current_task
        resuming = current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        if current is None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        await updater.start_work()
        token = CancellationToken()
        turn = asyncio.ensure_future(self._turn(context, updater, resuming, token))
        watch = asyncio.ensure_future(self._watch(task_id)) if self._cancelled is not None else None
        try:
            if watch is None:
                await turn
                return
            await asyncio.wait({turn, watch}, return_when=asyncio.FIRST_COMPLETED)
            if turn.done():
                turn.result()
                return
            # Cancelled by another process: stop the turn and record the cancel from here too.
            token.cancel()
            turn.cancel()
            await asyncio.gather(turn, return_exceptions=True)
            await updater.cancel()
        finally:
            token.cancel()
            for task in (turn, watch):
                if task is not None and not task.done():
                    task.cancel()

    async def _turn(
        self, context: RequestContext, updater: TaskUpdater, resuming: bool, token: CancellationToken
    ) -> None:
        first = True
        try:
            async for piece in self._responder.respond(
                context.get_user_input(),
                session_id=updater.context_id,
                resuming=resuming,
                cancellation_token=token,
            ):
                if isinstance(piece, InputRequired):
                    await updater.requires_input(updater.new_agent_message([Part(text=piece.question)]))
                    return
                if piece:
                    await updater.add_artifact(
                        [Part(text=piece)], artifact_id=ANSWER_ARTIFACT, append=not first, last_chunk=False
                    )
                    first = False
        except Exception as exc:
            logger.warning("task %s failed: %s", updater.task_id, exc)
            await updater.failed(updater.new_agent_message([Part(text=f"{type(exc).__name__}: {exc}"[:500])]))
            return
        await updater.complete()

    async def _watch(self, task_id: str) -> None:
        assert self._cancelled is not None
        while not await self._cancelled(task_id):  # noqa: ASYNC110 - polling a store other processes write
            await asyncio.sleep(self._poll)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.task_id is None or context.context_id is None:
            return
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()
