"""Which AutoGen worker added which subscription id, so that a worker's subscriptions end with its channel (as on
AutoGen's host) without taking along one that another worker, or an ext worker, still holds, and so that a worker
lets go only of what it added.

The registry keeps equal subscriptions (kind, topic type or prefix, agent type) as one entry held by each id they
were added under, and drops the entry with its last id (`SubscriptionTable`). AutoGen workers add such duplicates as
a matter of course: each worker hosting a type adds the `<type>:` prefix subscription for it, under its own id. So
each worker's ids are its own to remove; what is left here is an id that two clients added alike, and an id that
was in the table before a client added a copy of it (an ext worker's: not the client's to remove)."""

from __future__ import annotations

__all__ = ["SubscriptionHolders"]


class SubscriptionHolders:
    """The subscription ids added through one gateway's AutoGen listener, with the clients (client ids) holding each.
    An id this listener put in the table goes when the last client holding it lets go of it; an id that was in the
    table before is left alone. A client lets go only of what it added itself."""

    def __init__(self) -> None:
        # id -> clients holding it, for ids this listener put in the table
        self._holders: dict[str, set[str]] = {}
        # (client, id) for every subscription a client added
        self._added: set[tuple[str, str]] = set()

    def added(self, client: str, own_id: str, *, existed: bool) -> None:
        """`client` added its subscription `own_id`. `existed`: the table held the id before (then it is not the
        client's to remove, whatever the registry answered)."""
        self._added.add((client, own_id))
        holders = self._holders.get(own_id)
        if holders is not None:
            holders.add(client)
        elif not existed:
            self._holders[own_id] = {client}

    def release(self, client: str, own_id: str) -> str | None:
        """`client` removes the subscription it added as `own_id`: the id to remove from the table now, or None to
        keep it (other clients hold it, or it was in the table before). `LookupError` when `client` added no
        subscription `own_id` (another worker's stays)."""
        if (client, own_id) not in self._added:
            raise LookupError(f"client {client!r} added no subscription {own_id!r}")
        self._added.discard((client, own_id))
        return self._let_go(client, own_id)

    def client_gone(self, client: str) -> list[str]:
        """`client`'s channel ended: the ids to remove from the table (those it was the last to hold)."""
        gone: list[str] = []
        for key in sorted(k for k in self._added if k[0] == client):
            self._added.discard(key)
            own_id = self._let_go(client, key[1])
            if own_id is not None:
                gone.append(own_id)
        return gone

    def _let_go(self, client: str, own_id: str) -> str | None:
        holders = self._holders.get(own_id)
        if holders is None:
            return None  # in the table before this client added its copy
        holders.discard(client)
        if holders:
            return None
        del self._holders[own_id]
        return own_id
