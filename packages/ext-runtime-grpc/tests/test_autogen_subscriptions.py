"""`SubscriptionHolders`: an AutoGen worker's subscriptions end with its channel without taking along one that
another worker (AutoGen's, which each add the same `<type>:` prefix subscription for a type they host, or ext's)
still holds, and a worker lets go only of what it added. The registry holds equal subscriptions under each id they
were added with, so each client's own ids are its own to remove."""

from __future__ import annotations

import pytest

from ext.runtime.grpc._autogen_subscriptions import SubscriptionHolders


def test_each_client_removes_its_own_ids_when_its_channel_ends() -> None:
    holders = SubscriptionHolders()
    holders.added("c1", "a", existed=False)
    holders.added("c2", "b", existed=False)  # equal to "a" in the registry, under c2's own id
    assert holders.client_gone("c1") == ["a"]
    assert holders.client_gone("c2") == ["b"]


def test_an_id_two_clients_added_goes_with_the_last_of_them() -> None:
    holders = SubscriptionHolders()
    holders.added("c1", "same", existed=False)
    holders.added("c2", "same", existed=True)  # c1 put it there: the registry already held the id
    assert holders.release("c2", "same") is None  # c1 still holds it
    assert holders.client_gone("c1") == ["same"]
    assert holders.client_gone("c2") == []


def test_a_subscription_under_the_same_id_that_was_there_before_is_not_the_clients() -> None:
    """A client that adds a copy of an ext worker's subscription, id included (`GetSubscriptions` shows both), does
    not become its holder: the registry's answer is the same as for a new one, so the listener says it existed."""
    holders = SubscriptionHolders()
    holders.added("c1", "ext-id", existed=True)
    assert holders.release("c1", "ext-id") is None
    holders.added("c1", "ext-id", existed=True)
    assert holders.client_gone("c1") == []


def test_a_client_lets_go_only_of_what_it_added() -> None:
    holders = SubscriptionHolders()
    with pytest.raises(LookupError, match="'c1' added no subscription 'unknown'"):
        holders.release("c1", "unknown")
    holders.added("c1", "a", existed=False)
    holders.added("c2", "a", existed=True)
    # Another client naming c1's subscription by its id: refused, and both holders keep it.
    with pytest.raises(LookupError):
        holders.release("c3", "a")
    assert holders.client_gone("c2") == []
    assert holders.client_gone("c1") == ["a"]
