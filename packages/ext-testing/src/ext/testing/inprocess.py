"""Scripting an in-process model (one that runs inside the test process, with no server) through its real code path.

A loopback server scripts a hosted model at the socket; an in-process model has no socket, so the script is
applied at the model runtime's own extension point, and the model really generates the scripted reply:

- :class:`ScriptedModel` is the peer a conformance test talks to, with the same scripting surface as
  :class:`~ext.testing.servers.LoopbackServer` (``enqueue``, ``default``, ``requests``, ``decode``,
  ``wait_for_requests``, ``start``/``stop``). It records every call the client made to the runtime as an
  :class:`InProcessRequest` and hands out the next :class:`~ext.testing.script.Reply` or ``Fault("hang")``.
- The provider adapts it to its runtime's extension point (for llama.cpp: a chat handler, see
  :func:`llama_cpp_chat_handler`) and forces the model's output with a grammar (:func:`reply_grammar`), so a
  tiny random-weight model (:mod:`ext.testing.gguf`) produces exactly the scripted text, token by token, through
  the runtime's sampler, tokenizer and chat template.

What an in-process model cannot do is described by :attr:`ScriptedModel.fault_kinds` (it has no HTTP status, no
dropped connection: only a generation that does not end, ``hang``) and :attr:`ScriptedModel.scripted_usage`
(token counts are the model's real counts, not the script's). ``ChatClientConformance`` reads both.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ext.core import AsyncStartStop
from ext.testing._waiting import CountWaiters
from ext.testing.script import Fault, NeutralRequest, Reply, split_words

__all__ = [
    "HANG_RUNS",
    "InProcessRequest",
    "ScriptedModel",
    "gbnf_literal",
    "llama_cpp_chat_handler",
    "reply_grammar",
]

ScriptItem = Reply | Fault | Callable[["InProcessRequest"], "Reply | Fault"]


@dataclass
class InProcessRequest:
    """One call the client made to the in-process runtime.

    ``body`` holds the call's arguments as the runtime received them (for llama.cpp: the keyword arguments of
    the chat handler, minus the model object). ``disconnected`` is set when the generation for this call
    ended, whether it finished or the client stopped reading (a cancel): the in-process counterpart of a
    loopback request's closed connection; ``completed`` says whether it ran to its end.
    """

    body: dict[str, Any]
    index: int = 0
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    completed: bool = False


class ScriptedModel(AsyncStartStop):
    """The scripted peer of an in-process model client. See the module docstring.

    ``decode`` turns a recorded call into a :class:`NeutralRequest` (what the provider put "on the wire").
    Thread-safe: the runtime calls :meth:`take` and :meth:`ended` from its worker thread.
    """

    fault_kinds: ClassVar[frozenset[str]] = frozenset({"hang"})
    """The ``Fault`` kinds this peer can produce: a generation that does not end. No HTTP statuses."""
    scripted_usage: ClassVar[bool] = False
    """Usage comes from the model's real token counts, not from ``Reply.prompt_tokens`` / ``completion_tokens``."""

    def __init__(self, decode: Callable[[Mapping[str, Any]], NeutralRequest], *, default: ScriptItem | None = None):
        self._decode = decode
        self.default: ScriptItem | None = default
        self.requests: list[InProcessRequest] = []
        self.errors: list[Exception] = []
        self._script: deque[ScriptItem] = deque()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters = CountWaiters()
        self._ids = itertools.count()

    # -- lifecycle (the same shape as a loopback server's) ----------------------------------------------------

    async def start(self) -> None:
        """Bind to the running event loop (events are set on it from the runtime's thread)."""
        self._loop = asyncio.get_running_loop()

    async def stop(self) -> None:
        """Nothing to release; kept for the loopback-server shape."""

    # -- scripting ----------------------------------------------------------------------------------------------

    def enqueue(self, *items: ScriptItem) -> None:
        """Append script items (FIFO). A ``Fault`` other than ``hang`` is refused: see :attr:`fault_kinds`."""
        for item in items:
            if isinstance(item, Fault) and item.kind not in self.fault_kinds:
                raise ValueError(f"an in-process model cannot produce Fault({item.kind!r}); it can: {self.fault_kinds}")
        with self._lock:
            self._script.extend(items)

    def decode(self, request: InProcessRequest) -> NeutralRequest:
        """The recorded call in provider-neutral form."""
        return self._decode(request.body)

    async def wait_for_requests(self, n: int, timeout: float = 5) -> list[InProcessRequest]:
        """Wait until at least ``n`` calls were recorded. Raises ``TimeoutError`` after ``timeout`` seconds."""
        await self._waiters.wait(n, lambda: len(self.requests), timeout, "call(s)")
        return list(self.requests)

    # -- the runtime's side (any thread) ------------------------------------------------------------------------

    def take(self, body: Mapping[str, Any]) -> tuple[InProcessRequest, Reply | Fault]:
        """Record a call and return the script item that answers it. Raises ``AssertionError`` (kept in
        :attr:`errors`) when the script is exhausted and there is no default."""
        request = InProcessRequest(body=dict(body), index=next(self._ids))
        with self._lock:
            self.requests.append(request)
            item: ScriptItem | None = self._script.popleft() if self._script else self.default
            count = len(self.requests)
        for future in self._waiters.reached(count):
            self._call_in_loop(lambda f=future: f.done() or f.set_result(None))  # type: ignore[misc]
        if item is None:
            error = AssertionError("ScriptedModel: script exhausted (enqueue a Reply, or set .default)")
            self.errors.append(error)
            raise error
        if callable(item) and not isinstance(item, (Reply, Fault)):
            item = item(request)
        return request, item

    def ended(self, request: InProcessRequest, *, completed: bool) -> None:
        """The generation for ``request`` ended (``completed``: it ran to its end, else the client stopped it)."""
        request.completed = completed
        self._call_in_loop(request.disconnected.set)

    def _call_in_loop(self, callback: Callable[[], object]) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(callback)
        except RuntimeError:  # the loop closed meanwhile
            pass


# --- grammars that force a reply --------------------------------------------------------------------------------


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal (llama.cpp grammar syntax)."""
    out = []
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def reply_grammar(text: str, *, endless: bool = False) -> str:
    """A GBNF grammar that accepts exactly ``text`` (so the model generates it and then ends), or with
    ``endless`` that text followed by an unending run of a filler character (a model that keeps generating
    until it is stopped). The text is split in word pieces so each rule stays short."""
    pieces = [gbnf_literal(piece) for piece in split_words(text)] or ['""']
    body = " ".join(pieces)
    if endless:
        return f'root ::= {body} filler\nfiller ::= "~" filler\n'
    return f"root ::= {body}\n"


# --- the llama.cpp adapter -----------------------------------------------------------------------------------------


_PASSED_ON = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "stop",
    "seed",
    "max_tokens",
    "presence_penalty",
    "frequency_penalty",
    "repeat_penalty",
    "model",
    "logit_bias",
)


def llama_cpp_chat_handler(model: ScriptedModel, render: Callable[[Reply], str]) -> Callable[..., Any]:
    """A llama-cpp-python chat handler (pass it as ``chat_handler=``) that answers from ``model``'s script.

    It records the call (every keyword argument the client gave the handler), renders the scripted ``Reply``
    into the text the provider expects the model to write (``render``: plain text, or tool calls in the
    provider's format), and lets the real ``Llama`` generate exactly that text under a grammar, through the
    model's own chat template (the GGUF's ``tokenizer.chat_template``), sampler and tokenizer. The client's own
    grammar and ``response_format`` are recorded but replaced by the forcing grammar. ``Fault("hang")`` and
    ``Reply(stall_after_chunks=n)`` generate without end (ignoring ``max_tokens``) until the client stops (at most
    :data:`HANG_RUNS` context windows).
    A ``Reply`` with ``finish_reason="length"`` sets ``max_tokens`` to the text's token count.
    Needs ``llama-cpp-python`` (imported when called).
    """
    from llama_cpp import llama_chat_format
    from llama_cpp.llama_grammar import LlamaGrammar

    formatters: dict[int, Any] = {}

    def handler(*, llama: Any, messages: list[dict[str, Any]], stream: bool = False, **kwargs: Any) -> Any:
        body = {"messages": messages, "stream": stream, **kwargs}
        request, item = model.take(body)
        inner = formatters.get(id(llama))
        if inner is None:
            template = llama.metadata.get("tokenizer.chat_template")
            if not template:
                raise ValueError("llama_cpp_chat_handler needs a GGUF with tokenizer.chat_template")
            eos = llama.detokenize([llama.token_eos()], special=True).decode("utf-8", "replace")
            bos = llama.detokenize([llama.token_bos()], special=True).decode("utf-8", "replace")
            inner = llama_chat_format.Jinja2ChatFormatter(
                template=template, eos_token=eos, bos_token=bos, stop_token_ids=[llama.token_eos()]
            ).to_chat_handler()
            formatters[id(llama)] = inner
        args = {name: kwargs[name] for name in _PASSED_ON if name in kwargs}

        def run(grammar: str, **override: Any) -> Any:
            call: Any = inner
            return call(
                llama=llama,
                messages=messages,
                stream=stream,
                grammar=LlamaGrammar.from_string(grammar, verbose=False),
                **{**args, **override},
            )

        endless: str | None = None
        if isinstance(item, Fault):  # hang: a generation that only ends when the client stops it
            endless = ""
        elif item.stall_after_chunks is not None:
            endless = "".join(item.text_chunks[: item.stall_after_chunks])
        if endless is not None or not isinstance(item, Reply):
            endless = endless or ""
            if not stream:
                result = run(reply_grammar(endless, endless=True), max_tokens=-1)
                model.ended(request, completed=True)
                return result
            # Past the context window a run ends; the next one carries on, so it only stops when the client does.
            return _watch(
                _endless(run(reply_grammar(endless, endless=True), max_tokens=-1), lambda: run(_FILLER, max_tokens=-1)),
                model,
                request,
            )
        text = render(item)
        override: dict[str, Any] = {}
        if item.resolved_finish_reason == "length":
            override["max_tokens"] = len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))
        result = run(reply_grammar(text), **override)
        if not stream:
            model.ended(request, completed=True)
            return result
        return _watch(result, model, request)

    return handler


_FILLER = reply_grammar("", endless=True)


HANG_RUNS = 4
"""How many context windows a scripted hang generates at most. A client that stops generation when asked never
gets near it; one that ignores its stop flag then fails its test instead of hanging the whole run."""


def _endless(first: Iterator[Any], again: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    for i in range(HANG_RUNS):
        run = first if i == 0 else again()
        try:
            for chunk in run:
                if chunk["choices"][0].get("finish_reason") is None:
                    yield chunk
        finally:
            close = getattr(run, "close", None)
            if close is not None:
                close()


def _watch(chunks: Iterator[Any], model: ScriptedModel, request: InProcessRequest) -> Iterator[Any]:
    completed = False
    try:
        yield from chunks
        completed = True
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
        model.ended(request, completed=completed)
