"""Pairing a model's parallel calls with the expected calls: a maximum bipartite matching.

Which call may stand for which expected call is a relation (`fits(i, j)`: call `j` is right for expected call `i`);
the calls are right when some pairing covers every expected call once. Trying every order of the calls is
factorial (nine calls took seconds); augmenting paths (Kuhn's algorithm) find a maximum matching in
O(expected * relation size), each pair judged once. The search is iterative, so many calls cannot exhaust the
interpreter's recursion limit.
"""

from __future__ import annotations

from collections.abc import Callable


def max_matching(left: int, right: int, fits: Callable[[int, int], bool]) -> list[int | None]:
    """For each of `left` items, the one of `right` items it is paired with (None: unpaired), in a pairing as large
    as any. `fits(i, j)` is called once per pair."""
    adjacency = [[j for j in range(right) if fits(i, j)] for i in range(left)]
    pair_of_left: list[int | None] = [None] * left
    pair_of_right: list[int | None] = [None] * right
    for root in range(left):
        # Search an alternating path from `root` to a free right item: edges out of a left item are any that fit,
        # edges out of a right item are its current pairing.
        reached_from: dict[int, int] = {}
        stack = [root]
        free: int | None = None
        while stack and free is None:
            i = stack.pop()
            for j in adjacency[i]:
                if j in reached_from:
                    continue
                reached_from[j] = i
                paired = pair_of_right[j]
                if paired is None:
                    free = j
                    break
                stack.append(paired)
        # Flip the path: every left item on it takes the right item it reached, back to `root`.
        j_next = free
        while j_next is not None:
            i = reached_from[j_next]
            previous = pair_of_left[i]
            pair_of_left[i] = j_next
            pair_of_right[j_next] = i
            j_next = previous
    return pair_of_left
