"""`ResponderExecutor`: the SDK's `AgentExecutor` over a `Responder`.

Each message runs one turn: the task is created (first message) and set `working`; each piece of text is an
artifact update of the artifact `answer` (the first creates it, the rest `append`), so a streaming client sees
the answer grow; the turn ends `completed`, `input-required` (the responder asked), or `failed` with the
error's message. A cancel (from this process or, through the shared task store, another) cancels the turn's
`CancellationToken` and the running task."""

from __future__ import annotations

import logging

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
    def __init__(self, responder: Responder) -> None:
        self._responder = responder

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
        first = True
        try:
            async for piece in self._responder.respond(
                context.get_user_input(), session_id=context_id, resuming=resuming, cancellation_token=token
            ):
                if isinstance(piece, InputRequired):
                    await updater.requires_input(updater.new_agent_message([Part(text=piece.question)]))
                    return
                if piece:
                    await updater.add_artifact(
                        [Part(text=piece)], artifact_id=ANSWER_ARTIFACT, append=not first, last_chunk=False
                    )
                    first = False
        except BaseException as exc:
            token.cancel()
            if isinstance(exc, Exception):
                logger.warning("task %s failed: %s", task_id, exc)
                await updater.failed(updater.new_agent_message([Part(text=f"{type(exc).__name__}: {exc}"[:500])]))
                return
            raise
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.task_id is None or context.context_id is None:
            return
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()
