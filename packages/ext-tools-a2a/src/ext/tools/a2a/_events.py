"""The A2A events a call receives, folded into one `A2AReply`, in plain functions.

An agent answers a message either with a `Message` (done at once) or with a `Task` whose status and artifacts
then change through `TaskStatusUpdateEvent` and `TaskArtifactUpdateEvent` (streamed), or through later reads of
the task (polled). `Follow` keeps what is known so far: the task id, its state, and the text of each artifact
(an update with `append` extends it, otherwise replaces it). The reply text is the artifacts' text in order,
else the text of the last agent message or status message."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from a2a.types.a2a_pb2 import Artifact, Message, Part, StreamResponse, Task, TaskState, TaskStatus

TERMINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
# A task in one of these waits for its caller: the call ends and the reply says so.
INTERRUPTED_STATES = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})


def state_name(state: int) -> str:
    """`TASK_STATE_INPUT_REQUIRED` -> `input-required`, the protocol's own spelling."""
    name: str = TaskState.Name(state)
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


def parts_text(parts: Iterable[Part], sep: str = "\n") -> str:
    """The text parts joined by `sep`; non-text parts are left out. An artifact's parts are joined with no
    separator: a streamed artifact arrives as chunks, each appended as a part."""
    return sep.join(part.text for part in parts if part.HasField("text"))


@dataclass(frozen=True)
class A2AReply:
    """What a remote agent answered: `text`, the final `state` (`completed`, `input-required`...; `message` when
    it answered with a plain message), and the `task_id` and `context_id` to continue the conversation with."""

    text: str
    state: str
    task_id: str = ""
    context_id: str = ""


@dataclass
class Follow:
    """The state of one call, updated event by event."""

    task_id: str = ""
    context_id: str = ""
    state: int = TaskState.TASK_STATE_UNSPECIFIED
    status_text: str = ""
    message_text: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.message_text is not None or self.state in TERMINAL_STATES or self.state in INTERRUPTED_STATES

    def apply(self, event: StreamResponse) -> str:
        """Fold one event in; returns the text it added (for a stream of deltas)."""
        kind = event.WhichOneof("payload")
        if kind == "message":
            return self._message(event.message)
        if kind == "task":
            self.task(event.task)
            return ""
        if kind == "status_update":
            update = event.status_update
            self.task_id = update.task_id or self.task_id
            self.context_id = update.context_id or self.context_id
            self._status(update.status)
            return ""
        if kind == "artifact_update":
            chunk = event.artifact_update
            self.task_id = chunk.task_id or self.task_id
            return self._artifact(chunk.artifact, append=chunk.append)
        return ""

    def task(self, task: Task) -> None:
        """Take a whole task (the first event, or a poll): its artifacts replace what was streamed."""
        self.task_id = task.id
        self.context_id = task.context_id or self.context_id
        self._status(task.status)
        if task.artifacts:
            self.artifacts = {a.artifact_id: parts_text(a.parts, "") for a in task.artifacts}

    def _message(self, message: Message) -> str:
        self.context_id = message.context_id or self.context_id
        self.message_text = parts_text(message.parts)
        return self.message_text

    def _status(self, status: TaskStatus) -> None:
        self.state = status.state
        if status.HasField("message"):
            self.status_text = parts_text(status.message.parts)

    def _artifact(self, artifact: Artifact, *, append: bool) -> str:
        text = parts_text(artifact.parts, "")
        previous = self.artifacts.get(artifact.artifact_id, "") if append else ""
        self.artifacts[artifact.artifact_id] = previous + text
        return text

    def reply(self) -> A2AReply:
        if self.message_text is not None and not self.task_id:
            return A2AReply(self.message_text, "message", "", self.context_id)
        text = "\n".join(self.artifacts.values()) if self.artifacts else (self.message_text or self.status_text)
        return A2AReply(text, state_name(self.state), self.task_id, self.context_id)
