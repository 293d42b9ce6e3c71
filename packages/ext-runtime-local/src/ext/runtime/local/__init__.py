"""ext-runtime-local: the in-process agent runtime (the embedded default)."""

from .__about__ import __version__
from ._mailbox import Delivery
from ._runtime import LocalAgentRuntime

__all__ = ["Delivery", "LocalAgentRuntime", "__version__"]
