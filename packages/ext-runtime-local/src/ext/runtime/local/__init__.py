"""ext-runtime-local: the in-process agent runtime (the embedded default), and the file state store that keeps agents'
states on one machine."""

from .__about__ import __version__
from ._mailbox import Delivery
from ._runtime import LocalAgentRuntime
from ._state_file import FileStateStore

__all__ = [
    # application code
    "FileStateStore",
    "LocalAgentRuntime",
    # runtime authors (a hosting runtime delivers into a local one)
    "Delivery",
    "__version__",
]
