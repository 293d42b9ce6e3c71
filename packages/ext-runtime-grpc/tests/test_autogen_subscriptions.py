"""`SubscriptionHolders`: an AutoGen worker's subscriptions end with its channel without taking along one that
another worker (AutoGen's, which each add the same `<type>:` prefix subscription for a type they host, or ext's)
still holds. The registry holds equal subscriptions under each id they were added with, so each client's own ids are
its own to remove."""

from __future__ import annotations

from ext.runtime.grpc._autogen_subscriptions import SubscriptionHolders


def test_each_client_removes_its_own_ids_when_its_channel_ends() -> None:
    holders = SubscriptionHolders()
    holders.added("c1", "a")
    holders.added("c2", "b")  # equal to "a" in the registry, under c2's own id
    assert holders.client_gone("c1") == ["a"]
    assert holders.client_gone("c2") == ["b"]


def test_an_id_two_clients_added_goes_with_the_last_of_them() -> None:
    holders = SubscriptionHolders()
    holders.added("c1", "same")
    holders.added("c2", "same")
    assert holders.release("c2", "same") is None  # c1 still holds it
    assert holders.client_gone("c1") == ["same"]
    assert holders.client_gone("c2") == []


def test_other_ids_are_removed_as_asked() -> None:
    holders = SubscriptionHolders()
    assert holders.release("c1", "unknown") == "unknown"  # the registry refuses it if nobody has it
    holders.added("c1", "a")
    holders.added("c2", "a")
    # A client naming ids it did not add removes them for all (as AutoGen's host would).
    assert holders.release("c3", "a") == "a"
    assert holders.client_gone("c1") == [] and holders.client_gone("c2") == []
