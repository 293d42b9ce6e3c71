"""ext-runtime-ray: the agent runtime on Ray. Each agent is a Ray actor, found or created by name anywhere in the
cluster; the `AgentRuntime` contract is the same as on `ext.runtime.local` and `ext.runtime.grpc`."""

from .__about__ import __version__
from ._runtime import ACTOR_OPTIONS, RayAgentRuntime
from ._wire import AgentActorDiedError

__all__ = [
    "ACTOR_OPTIONS",
    "AgentActorDiedError",
    "RayAgentRuntime",
    "__version__",
]
