"""`SubscriptionHolders`: an AutoGen worker's subscriptions end with its channel without taking along one that
another worker (AutoGen's, which each add the same `<type>:` prefix subscription for a type they host, or ext's)
still holds, and a worker lets go only of what it added."""

from __future__ import annotations

import pytest

from ext.runtime.grpc._autogen_subscriptions import SubscriptionHolders


def test_a_subscription_two_workers_add_goes_with_the_last_of_them() -> None:
    holders = SubscriptionHolders()
    holders.added("c1", "a", "a", existed=False)  # new in the table: its id is c1's
    holders.added("c2", "b", "a", existed=False)  # equal: the table keeps "a"
    assert holders.client_gone("c1") == []
    assert holders.client_gone("c2") == ["a"]


def test_release_by_the_clients_own_id() -> None:
    holders = SubscriptionHolders()
    holders.added("c1", "a", "a", existed=False)
    holders.added("c2", "b", "a", existed=False)
    assert holders.release("c2", "b") is None  # c1 still holds it
    assert holders.release("c1", "a") == "a"
    assert holders.client_gone("c1") == [] and holders.client_gone("c2") == []


def test_a_subscription_that_was_in_the_table_before_is_never_removed_for_a_client() -> None:
    holders = SubscriptionHolders()
    holders.added("c1", "mine", "ext-added", existed=False)  # an ext worker's equal subscription was there first
    assert holders.release("c1", "mine") is None
    holders.added("c1", "mine", "ext-added", existed=False)
    assert holders.client_gone("c1") == []


def test_a_subscription_under_the_same_id_that_was_there_before_is_not_the_clients() -> None:
    """A client that adds a copy of an ext worker's subscription, id included (`GetSubscriptions` shows both), does
    not become its holder: the registry's answer is the same as for a new one, so the listener says it existed."""
    holders = SubscriptionHolders()
    holders.added("c1", "ext-id", "ext-id", existed=True)
    assert holders.release("c1", "ext-id") is None
    holders.added("c1", "ext-id", "ext-id", existed=True)
    assert holders.client_gone("c1") == []


def test_a_client_lets_go_only_of_what_it_added() -> None:
    holders = SubscriptionHolders()
    with pytest.raises(LookupError, match="'c1' added no subscription 'unknown'"):
        holders.release("c1", "unknown")
    holders.added("c1", "a", "a", existed=False)
    holders.added("c2", "b", "a", existed=False)
    # Another client naming c1's subscription by its table id: refused, and both holders keep it.
    with pytest.raises(LookupError):
        holders.release("c3", "a")
    assert holders.client_gone("c2") == []
    assert holders.client_gone("c1") == ["a"]
