"""ext-hosting-a2a: ext agents served as A2A agents (a `ChatAgent`, a pipeline through one, an agent on ext's
runtime, or any `Responder`), on the `a2a-sdk` 1.x server, with tasks kept in an ext `StateStore`."""

from .__about__ import __version__
from ._app import a2a_app, agent_card
from ._executor import ResponderExecutor
from ._responders import ChatAgentResponder, FunctionResponder, InputRequired, Responder, RuntimeResponder
from ._task_store import StateStoreEventStream, StateStoreTaskStore

__all__ = [
    # Serving
    "a2a_app",
    "agent_card",
    # What answers
    "ChatAgentResponder",
    "FunctionResponder",
    "InputRequired",
    "Responder",
    "RuntimeResponder",
    # The SDK's extension points, over ext
    "ResponderExecutor",
    "StateStoreEventStream",
    "StateStoreTaskStore",
    "__version__",
]
