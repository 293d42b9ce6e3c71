"""`SubscriptionHolders`: an AutoGen worker's subscriptions end with its channel without taking along one that
another worker (AutoGen's, which each add the same `<type>:` prefix subscription for a type they host, or ext's)
still holds."""

from __future__ import annotations

from ext.runtime.grpc._autogen_subscriptions import SubscriptionHolders


def test_a_subscription_two_workers_add_goes_with_the_last_of_them() -> None:
    holders = SubscriptionHolders()
    holders.added("c1", "a", "a")  # new in the table: its id is c1's
    holders.added("c2", "b", "a")  # equal: the table keeps "a"
    assert holders.client_gone("c1") == []
    assert holders.client_gone("c2") == ["a"]


def test_release_by_the_clients_own_id() -> None:
    holders = SubscriptionHolders()
    holders.added("c1", "a", "a")
    holders.added("c2", "b", "a")
    assert holders.release("c2", "b") is None  # c1 still holds it
    assert holders.release("c1", "a") == "a"
    assert holders.client_gone("c1") == [] and holders.client_gone("c2") == []


def test_a_subscription_that_was_in_the_table_before_is_never_removed_for_a_client() -> None:
    holders = SubscriptionHolders()
    holders.added("c1", "mine", "ext-added")  # an ext worker's equal subscription was there first
    assert holders.release("c1", "mine") is None
    holders.added("c1", "mine", "ext-added")
    assert holders.client_gone("c1") == []


def test_other_ids_are_removed_as_asked() -> None:
    holders = SubscriptionHolders()
    assert holders.release("c1", "unknown") == "unknown"  # the registry refuses it if nobody has it
    holders.added("c1", "a", "a")
    holders.added("c2", "b", "a")
    # A client naming another's subscription by its table id removes it for all (as AutoGen's host would).
    assert holders.release("c3", "a") == "a"
    assert holders.client_gone("c1") == [] and holders.client_gone("c2") == []
