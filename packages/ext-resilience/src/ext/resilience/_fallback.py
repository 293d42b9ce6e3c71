"""Fallback: when the pipeline's client fails, the next client of an ordered list answers instead.

`FallbackMiddleware(clients)` sits in a `ChatPipeline`: the pipeline's own client (reached through `next`, so
the middlewares placed after this one apply to it) is tried first, then each of `clients` in order (any
`ChatCompletionClient`; a `ChatPipeline` brings its own middlewares). What switches:

- an error of a kind in `on` (`ext.core.ErrorKind`, classified by `ext.core.classify_error`; SDK errors are
  classified here, where the decision is taken, and passed on unchanged everywhere else);
- a context-window error goes to `context_window_client` (a larger-context model) when one is given;
- a result that a rule of `when` refuses (`"length"`: `finish_reason == "length"`; `"empty"`: no text and no
  tool call; or any callable on the `CreateResult`).

Any other error (a bug, a bad request, a cancellation) is raised at once, unchanged. When every client failed,
`AllClientsFailedError` lists each attempt (client, error) in order; when some answered but a rule refused each
answer, the last answer is returned (a refused answer is better than none).

Retries: exactly one layer owns them. The middleware turns off the own retries of every client it holds that is
a `BaseChatCompletionClient`, as a pipeline with a `RetryMiddleware` does for its client (the pipeline does so for
its own client because this middleware declares `retries`). Retrying the first client is the job of a
`RetryMiddleware` placed after this one; an alternate that should retry is given as a pipeline with its own
`RetryMiddleware`. A 429 whose `Retry-After` exceeds `max_retry_after` fails over at once: the bound is put in
the call's context (`RETRY_MAX_WAIT`) for that `RetryMiddleware`, which then gives up instead of sleeping.

Streams follow `stream` (see `StreamRule` in `_fallback_stream.py`). A switch is announced in the stream as an
`ext.core.FallbackEvent`, and on every call in `call.context["fallback_events"]` (telemetry turns them into span
events).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ext.core import (
    BaseChatCompletionClient,
    ChatCompletionClient,
    ConfigurationError,
    CreateResult,
    ErrorKind,
    FallbackEvent,
    classify_error,
)
from ext.pipeline import RETRY_MAX_WAIT, ChatCall, ChatItem, ChatMiddleware, CreateNext, StreamNext

from ._cooldown import Cooldowns
from ._errors import AllClientsFailedError, Attempt
from ._fallback_stream import STREAM_RULES, StreamRule, fallback_stream

logger = logging.getLogger(__name__)


DEFAULT_TRIGGERS = frozenset(
    {
        ErrorKind.RATE_LIMITED,
        ErrorKind.OVERLOADED,
        ErrorKind.SERVER_ERROR,
        ErrorKind.TIMEOUT,
        ErrorKind.CONNECTION,
        ErrorKind.AUTH,
        ErrorKind.NOT_FOUND,
    }
)
"""The error kinds that switch by default: every failure another client may not have (not a bad request)."""

ResultRule = Callable[[CreateResult], bool]
"""Returns True for a result to refuse (switch to the next client)."""


def finish_reason_length(result: CreateResult) -> bool:
    """The answer was cut at the token limit."""
    return result.finish_reason == "length"


def empty_answer(result: CreateResult) -> bool:
    """No text and no tool call."""
    content = result.content
    return not content.strip() if isinstance(content, str) else not content


RESULT_RULES: dict[str, ResultRule] = {"length": finish_reason_length, "empty": empty_answer}
"""The rules a pipeline file names in `when`."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A client the fallback may call: its name (for attempts, events and cooldowns) and the client, None for the
    pipeline's own client (reached through `next`)."""

    name: str
    client: ChatCompletionClient | None


def client_name(client: Any) -> str:
    """`provider/model` of a client."""
    provider = getattr(client, "provider_name", None) or type(client).__name__
    model = getattr(client, "model", "") or ""
    return f"{provider}/{model}" if model else str(provider)


class FallbackMiddleware(ChatMiddleware):
    """Tries the pipeline's client, then each of `clients` in order; see the module docstring.

    Arguments:
        clients: the alternates, in order (at least one unless `context_window_client` is given).
        on: the error kinds that switch (`ErrorKind` or their values); default `DEFAULT_TRIGGERS`.
        when: result rules that switch: `"length"`, `"empty"` or callables returning True to refuse a result.
        context_window_client: where a context-window error goes (tried once, before the rest of the list).
        max_retry_after: seconds; a 429 asking to wait longer fails over at once (default 10).
        stream: `before_first_chunk` (default), `buffer` or `continue`.
        cooldown: a `Cooldowns` (policy and backend): cooled clients are skipped, each outcome is counted.
        names: names of the pipeline's client and then of each alternate (default `provider/model`); cooldowns
            are keyed by them, so give stable, distinct names when several processes share a backend.
        close_clients: close the alternates when the pipeline closes (default True).
    """

    retries = True

    def __init__(
        self,
        clients: Sequence[ChatCompletionClient] = (),
        *,
        on: Iterable[ErrorKind | str] | None = None,
        when: Iterable[str | ResultRule] = (),
        context_window_client: ChatCompletionClient | None = None,
        max_retry_after: float = 10.0,
        stream: StreamRule = "before_first_chunk",
        cooldown: Cooldowns | None = None,
        names: Sequence[str] | None = None,
        close_clients: bool = True,
    ) -> None:
        clients = list(clients)
        for index, client in enumerate(clients):
            if not isinstance(client, ChatCompletionClient):
                raise ConfigurationError(
                    f"clients[{index}] must be a ChatCompletionClient, got {type(client).__name__}"
                )
        if context_window_client is not None and not isinstance(context_window_client, ChatCompletionClient):
            raise ConfigurationError(
                f"context_window_client must be a ChatCompletionClient, got {type(context_window_client).__name__}"
            )
        if not clients and context_window_client is None:
            raise ConfigurationError("clients must name at least one client to fall back to")
        self._on = _kinds(on)
        self._when = _rules(when)
        if isinstance(max_retry_after, bool) or not isinstance(max_retry_after, (int, float)) or max_retry_after < 0:
            raise ConfigurationError(f"max_retry_after must be seconds >= 0, got {max_retry_after!r}")
        if stream not in STREAM_RULES:
            raise ConfigurationError(f"stream must be one of {', '.join(STREAM_RULES)}, got {stream!r}")
        if cooldown is not None and not isinstance(cooldown, Cooldowns):
            raise ConfigurationError(f"cooldown must be a Cooldowns, got {type(cooldown).__name__}")
        held = [*clients, *([context_window_client] if context_window_client is not None else [])]
        if names is None:
            given: list[str | None] = [None] * (len(clients) + 1)
        else:
            given = list(names)
            if len(given) != len(clients) + 1 or not all(isinstance(n, str) and n for n in given):
                raise ConfigurationError(
                    f"names must give {len(clients) + 1} non-empty names (the pipeline's client, then each of "
                    f"clients), got {names!r}"
                )
        for client in held:
            if isinstance(client, BaseChatCompletionClient):
                client.disable_retries()  # this middleware is their retry owner (see the module docstring)
        self._clients = clients
        self._given_names = given
        self._alternates = _named(clients, given[1:])
        self._context_window = (
            Candidate(client_name(context_window_client) + " (context window)", context_window_client)
            if context_window_client is not None
            else None
        )
        self._max_retry_after = float(max_retry_after)
        self._stream_rule: StreamRule = stream
        self._cooldown = cooldown
        self._close_clients = close_clients

    @property
    def clients(self) -> tuple[ChatCompletionClient, ...]:
        """The alternates, in order."""
        return tuple(self._clients)

    @property
    def stream_rule(self) -> StreamRule:
        return self._stream_rule

    @property
    def cooldown(self) -> Cooldowns | None:
        return self._cooldown

    def __repr__(self) -> str:
        names = ", ".join(c.name for c in self._alternates)
        return f"FallbackMiddleware([{names}], stream={self._stream_rule!r})"

    # --- deciding ----------------------------------------------------------------------------------

    def candidates(self, call: ChatCall) -> list[Candidate]:
        """The pipeline's client, then the alternates."""
        first = self._given_names[0] or client_name(call.client)
        return [Candidate(first, None), *self._alternates]

    def classify(self, error: Exception) -> tuple[ErrorKind | None, bool]:
        """The kind of `error` (None: not a provider failure) and whether it switches to another client."""
        found = classify_error(error)
        if found is None:
            return None, False
        return found.kind, self._switches(found.kind, found.retry_after)

    def _switches(self, kind: ErrorKind, retry_after: float | None) -> bool:
        if kind is ErrorKind.CONTEXT_WINDOW and self._context_window is not None:
            return True
        if kind is ErrorKind.RATE_LIMITED and retry_after is not None and retry_after > self._max_retry_after:
            return True  # waiting that long is worse than another client
        return kind in self._on

    def refusal(self, result: CreateResult) -> str | None:
        """Why a result rule refuses `result`, else None."""
        for rule in self._when:
            if rule(result):
                return f"result refused by {getattr(rule, '__name__', 'a rule')} (finish_reason={result.finish_reason})"
        return None

    def next_after(self, order: list[Candidate], index: int, kind: ErrorKind | None) -> None:
        """After a context-window error, the larger-context client is tried next (once)."""
        larger = self._context_window
        if kind is ErrorKind.CONTEXT_WINDOW and larger is not None and larger not in order:
            order.insert(index + 1, larger)

    async def cooling(self, candidate: Candidate) -> float:
        return await self._cooldown.remaining(candidate.name) if self._cooldown is not None else 0.0

    async def count(self, candidate: Candidate, kind: ErrorKind | None) -> None:
        """Tell the cooldowns how a call of `candidate` went (`kind` None: it did not fail)."""
        cooldown = self._cooldown
        if cooldown is None:
            return
        if kind is None:
            await cooldown.succeeded(candidate.name)
            return
        started = await cooldown.failed(candidate.name, kind)
        if started:
            logger.warning("%s cools down for %.0f s after %s", candidate.name, started, kind.value)

    def announce(self, call: ChatCall, event: FallbackEvent) -> None:
        call.context.setdefault("fallback_events", []).append(event)
        logger.info("fallback: %s -> %s (%s)", event.from_client, event.to_client, event.reason)

    # --- create ------------------------------------------------------------------------------------

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        call.context[RETRY_MAX_WAIT] = self._max_retry_after
        order = self.candidates(call)
        attempts: list[Attempt] = []
        refused: CreateResult | None = None
        last_error: BaseException | None = None
        pending: Attempt | None = None  # the failure to announce when the next client is called
        index = -1
        while index + 1 < len(order):
            index += 1
            candidate = order[index]
            left = await self.cooling(candidate)
            if left > 0:
                attempts.append(Attempt(candidate.name, None, None, f"cooling down, {left:.1f} s left", skipped=True))
                continue
            if pending is not None:
                self.switch_event(call, pending, candidate, 0)
            try:
                result = await (next(call) if candidate.client is None else call.create_on(candidate.client))
            except Exception as exc:
                kind, switches = self.classify(exc)
                if kind is not None:
                    await self.count(candidate, kind)
                if not switches:
                    raise
                pending = Attempt(candidate.name, exc, kind)
                attempts.append(pending)
                last_error = exc
                self.next_after(order, index, kind)
                continue
            await self.count(candidate, None)
            reason = self.refusal(result)
            if reason is None:
                return result
            pending = Attempt(candidate.name, None, None, reason)
            attempts.append(pending)
            refused = result
        if refused is not None:
            return refused
        raise AllClientsFailedError(attempts) from last_error

    def switch_event(self, call: ChatCall, attempt: Attempt, to: Candidate, text_sent: int) -> FallbackEvent:
        """Announce a switch from the client of `attempt` to `to` (in the call's context) and return the event."""
        event = FallbackEvent(
            from_client=attempt.client,
            to_client=to.name,
            error_kind=attempt.kind.value if attempt.kind is not None else None,
            reason=attempt.summary(),
            text_sent=text_sent,
        )
        self.announce(call, event)
        return event

    # --- streams -----------------------------------------------------------------------------------

    def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        call.context[RETRY_MAX_WAIT] = self._max_retry_after
        return fallback_stream(self, call, next, self._stream_rule)

    def open_stream(self, candidate: Candidate, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        if candidate.client is None:
            return next(call)
        return call.stream_on(candidate.client)

    async def close(self) -> None:
        if not self._close_clients:
            return
        held = [*self._clients, *([self._context_window.client] if self._context_window is not None else [])]
        for client in held:
            if client is not None:
                await client.close()


def _named(clients: list[ChatCompletionClient], given: list[str | None]) -> list[Candidate]:
    named: list[Candidate] = []
    for index, (client, name) in enumerate(zip(clients, given, strict=True)):
        chosen = name or client_name(client)
        if any(c.name == chosen for c in named):
            chosen = f"{chosen}#{index + 1}"  # two alternates of one model keep apart in attempts and cooldowns
        named.append(Candidate(chosen, client))
    return named


def _kinds(on: Iterable[ErrorKind | str] | None) -> frozenset[ErrorKind]:
    if on is None:
        return DEFAULT_TRIGGERS
    if isinstance(on, str):
        raise ConfigurationError("on must be a list of error kinds, not one string")
    kinds = set()
    for item in on:
        try:
            kinds.add(ErrorKind(item))
        except ValueError:
            expected = ", ".join(k.value for k in ErrorKind)
            raise ConfigurationError(f"on: unknown error kind {item!r}; expected some of {expected}") from None
    return frozenset(kinds)


def _rules(when: Iterable[str | ResultRule]) -> tuple[ResultRule, ...]:
    if isinstance(when, str):
        raise ConfigurationError("when must be a list of result rules, not one string")
    rules: list[ResultRule] = []
    for item in when:
        if isinstance(item, str):
            rule = RESULT_RULES.get(item)
            if rule is None:
                raise ConfigurationError(f"when: unknown result rule {item!r}; expected {', '.join(RESULT_RULES)}")
            rules.append(rule)
        elif callable(item):
            rules.append(item)
        else:
            raise ConfigurationError(f"when: a rule must be a name or a callable, got {type(item).__name__}")
    return tuple(rules)
