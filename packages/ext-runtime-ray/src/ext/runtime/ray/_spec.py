"""`TypeSpec`: what a registered agent type's actors need, built by the runtime that registered it, kept by the
registry and given to each of the type's actors when it is created (and again when Ray restarts it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ext.core import RuntimeObserver, SavePolicy, StateStore

from ._link import Link, ServedObserver, ServedStateStore

__all__ = ["TypeSpec"]


@dataclass(frozen=True)
class TypeSpec:
    factory: bytes
    """The factory, pickled by `dump_factory`."""
    owner: str
    """The id of the runtime that registered the type: its `stop()` deactivates the type's agents."""
    link: Link
    """How the type's actors reach objects in the owner's process."""
    namespace: str
    registry_name: str
    save_policy: SavePolicy | None
    idle_timeout: float | None
    stop_timeout: float
    store: StateStore | None = None
    """A store each actor opens for itself (pickled), or None."""
    served_store: int | None = None
    """The owner's served `InMemoryStateStore`, or None."""
    served_observer: int | None = None
    actor_options: dict[str, Any] = field(default_factory=dict)
    runtime_class: Any = None
    """The class of the runtime an actor gives its agent (`RayAgentRuntime`, pickled by reference)."""

    def state_store(self) -> StateStore | None:
        if self.served_store is not None:
            return ServedStateStore(self.link, self.served_store)
        return self.store

    def observer(self) -> RuntimeObserver | None:
        return None if self.served_observer is None else ServedObserver(self.link, self.served_observer)
