"""Which AutoGen worker holds which subscription of the gateway's table, so that a worker's subscriptions end with
its channel (as on AutoGen's host) without taking along one that another worker, or an ext worker, still holds.

The registry keeps one subscription per mapping (kind, topic type or prefix, agent type): a worker adding one equal
to a subscription already there gets that one, under the id the table holds, not its own. AutoGen workers add such
duplicates as a matter of course: each worker hosting a type adds the `<type>:` prefix subscription for it."""

from __future__ import annotations

__all__ = ["SubscriptionHolders"]


class SubscriptionHolders:
    """The subscriptions added through one gateway's AutoGen listener, with the clients (client ids) holding each.
    Only subscriptions first added through this listener are removed from the table, when their last holder lets
    go of them; one that was already in the table (an ext worker's, or another replica's) is left alone. A client
    lets go only of what it added itself."""

    def __init__(self) -> None:
        # table id -> clients holding it, for subscriptions this listener added to the table
        self._holders: dict[str, set[str]] = {}
        # (client, the client's own id) -> table id
        self._ids: dict[tuple[str, str], str] = {}

    def added(self, client: str, own_id: str, table_id: str, *, existed: bool) -> None:
        """`client` added its subscription `own_id`, which the table holds as `table_id` (the same id when it was
        new there). `existed`: the table held a subscription `own_id` before (then it is not new, whatever the
        ids say)."""
        self._ids[(client, own_id)] = table_id
        holders = self._holders.get(table_id)
        if holders is not None:
            holders.add(client)
        elif table_id == own_id and not existed:
            self._holders[table_id] = {client}

    def release(self, client: str, own_id: str) -> str | None:
        """`client` removes the subscription it added as `own_id`: the table id to remove from the table now, or None
        to keep the subscription (other clients hold it, or it was in the table before). `LookupError` when `client`
        added no subscription `own_id` (another worker's stays)."""
        table_id = self._ids.pop((client, own_id), None)
        if table_id is None:
            raise LookupError(f"client {client!r} added no subscription {own_id!r}")
        holders = self._holders.get(table_id)
        if holders is None:
            return None  # in the table before this client added its equal one
        holders.discard(client)
        if holders:
            return None
        del self._holders[table_id]
        return table_id

    def client_gone(self, client: str) -> list[str]:
        """`client`'s channel ended: the table ids to remove (those it was the last to hold)."""
        gone: list[str] = []
        for key in [k for k in self._ids if k[0] == client]:
            table_id = self._ids.pop(key)
            holders = self._holders.get(table_id)
            if holders is None:
                continue
            holders.discard(client)
            if not holders:
                del self._holders[table_id]
                gone.append(table_id)
        return gone
