"""Fetching and checking a remote agent's card before the first call.

The card says where the agent listens (`supported_interfaces`: a URL per protocol binding) and what it can do.
The tool speaks JSON-RPC and HTTP+JSON (the SDK's HTTP transports); a card offering neither, or missing an
expected name or skill, or not streaming when the tool is asked to stream, is refused with
`A2ACardMismatchError` before any message is sent."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from a2a.client import A2ACardResolver, AgentCardResolutionError
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.constants import TransportProtocol

from ._errors import A2ACardMismatchError, A2ARefusedError, A2ATimeoutError, A2AUnreachableError

SPOKEN_BINDINGS: tuple[str, ...] = (TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value)


async def fetch_card(http: httpx.AsyncClient, url: str) -> AgentCard:
    """The card served at `url`'s well-known path, with fetch errors typed."""
    try:
        return await A2ACardResolver(http, url).get_agent_card()
    except AgentCardResolutionError as exc:
        cause = exc.__cause__
        if isinstance(cause, httpx.TimeoutException):
            raise A2ATimeoutError(f"fetching the agent card from {url} timed out") from exc
        if exc.status_code is not None:
            raise A2ARefusedError(
                f"the agent at {url} answered HTTP {exc.status_code} for its card", reason=str(exc)[:200]
            ) from exc
        if isinstance(cause, httpx.TransportError) or cause is None:
            raise A2AUnreachableError(f"could not fetch the agent card from {url}: {exc}") from exc
        raise A2ACardMismatchError(f"the agent card at {url} is not a valid A2A card: {exc}") from exc
    except httpx.TimeoutException as exc:
        raise A2ATimeoutError(f"fetching the agent card from {url} timed out") from exc
    except httpx.TransportError as exc:
        raise A2AUnreachableError(f"could not fetch the agent card from {url}: {exc}") from exc


def check_card(
    card: AgentCard,
    *,
    url: str,
    expected_name: str | None,
    required_skills: Sequence[str],
    streaming: bool,
) -> list[str]:
    """The protocol bindings of `card` the tool can use, in the card's order; `A2ACardMismatchError` naming the
    first expectation it fails."""
    if expected_name is not None and card.name != expected_name:
        raise A2ACardMismatchError(f"the agent at {url} is named {card.name!r}, expected {expected_name!r}")
    skills = {skill.id for skill in card.skills} | {skill.name for skill in card.skills}
    missing = [skill for skill in required_skills if skill not in skills]
    if missing:
        offered = sorted(skill.id for skill in card.skills)
        raise A2ACardMismatchError(f"the agent at {url} has no skill {missing[0]!r} (it offers {offered})")
    bindings = [i.protocol_binding for i in card.supported_interfaces if i.protocol_binding in SPOKEN_BINDINGS]
    if not bindings:
        offered_bindings = sorted({i.protocol_binding for i in card.supported_interfaces})
        raise A2ACardMismatchError(
            f"the agent at {url} offers no transport this tool speaks: it offers {offered_bindings}, "
            f"the tool speaks {list(SPOKEN_BINDINGS)}"
        )
    if streaming and not card.capabilities.streaming:
        raise A2ACardMismatchError(f"the agent at {url} does not stream (its card says capabilities.streaming=false)")
    return list(dict.fromkeys(bindings))
