"""Which AutoGen worker holds which subscription id, so that a worker's subscriptions end with its channel (as on
AutoGen's host) without taking along one that another worker, or an ext worker, still holds.

The registry keeps equal subscriptions (kind, topic type or prefix, agent type) as one entry held by each id they
were added under, and drops the entry with its last id (`SubscriptionTable`). AutoGen workers add such duplicates as
a matter of course: each worker hosting a type adds the `<type>:` prefix subscription for it, under its own id. So
each worker's ids are its own to remove; what is left here is the ids that two clients added alike."""

from __future__ import annotations

__all__ = ["SubscriptionHolders"]


class SubscriptionHolders:
    """The subscription ids added through one gateway's AutoGen listener, with the clients (client ids) that added
    each. An id goes from the table when the last client holding it lets go of it."""

    def __init__(self) -> None:
        self._holders: dict[str, set[str]] = {}

    def added(self, client: str, own_id: str) -> None:
        """`client` added its subscription `own_id` (the registry holds the subscription under that id)."""
        self._holders.setdefault(own_id, set()).add(client)

    def release(self, client: str, own_id: str) -> str | None:
        """`client` removes the subscription `own_id`: the id to remove from the table now, or None to keep it
        (other clients added it under the same id)."""
        holders = self._holders.get(own_id)
        if holders is None:
            # Not added through this listener: removed as asked (AutoGen's host, and ext's runtime, remove any
            # subscription by id).
            return own_id
        if client not in holders:
            holders.clear()  # another client's id, named: removed for all its holders, as asked
        holders.discard(client)
        if holders:
            return None
        del self._holders[own_id]
        return own_id

    def client_gone(self, client: str) -> list[str]:
        """`client`'s channel ended: the ids to remove from the table (those it was the last to hold)."""
        gone: list[str] = []
        for own_id, holders in list(self._holders.items()):
            if client in holders:
                holders.discard(client)
                if not holders:
                    del self._holders[own_id]
                    gone.append(own_id)
        return gone
