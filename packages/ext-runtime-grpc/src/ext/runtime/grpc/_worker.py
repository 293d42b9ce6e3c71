"""`GrpcAgentRuntime`: a worker that hosts agents and reaches the rest of the cluster through a gateway."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import itertools
import logging
import math
import os
import random
import types
from collections.abc import Callable, Coroutine, Generator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc
from pydantic import SecretStr

from ext.core import (
    DEFAULT_RPC_TIMEOUT,
    Agent,
    AgentFactory,
    AgentId,
    AgentNotFoundError,
    AgentType,
    CancellationToken,
    RoutedAgent,
    RuntimeClosedError,
    UndeliverableError,
    agent_type_name,
    check_agent_id,
    check_factory,
    check_seconds,
    check_sender,
    check_timeout,
)
from ext.runtime.local import Delivery, LocalAgentRuntime

from ._deadlines import Deadlines, Expired
from ._errors import AuthenticationError, error_of, raise_error
from ._gateway import DEFAULT_MAX_MESSAGE_BYTES, OPEN_CHANNEL, Malformed, parse_message
from ._outbox import Outbox
from ._secrets import check_token, read_token_file
from ._serializer import ProtobufMessageSerializer, SerializationError
from .protos import agent_worker_pb2 as pb

logger = logging.getLogger(__name__)

_EOF: object = grpc.aio.EOF  # type: ignore[attr-defined]  # missing from grpc-stubs

DEFAULT_TOKEN_ENV = "EXT_GRPC_TOKEN"

# What a write on a stream that has gone away raises.
_STREAM_ERRORS = (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError)


class GrpcAgentRuntime:
    """A worker runtime: hosts the agent types registered on it and reaches every other agent in the cluster
    through one bidirectional stream to a gateway.

    Args:
        address: `host:port` of the gateway; a list of them (gateway replicas: the worker connects to the
            first that answers and, when its gateway goes away, fails over to the next); or a
            `grpc.aio.Channel` you built (its TLS and options are then yours; it is not closed by `stop`).
        token: the gateway's token (sent as `authorization: Bearer ...`); default: `token_file`, else the
            `token_env` variable, else the file named by the `<token_env>_FILE` variable.
        token_file: a file holding the token (a Kubernetes secret volume, a compose secret); its trailing
            newline is dropped. Read here, at construction: an unreadable or empty file raises `ValueError`.
        token_env: environment variable read when `token` and `token_file` are None (default `EXT_GRPC_TOKEN`;
            `EXT_GRPC_TOKEN_FILE` may name a token file instead).
        root_certificates: PEM CA bundle: connect with TLS trusting it. `tls=True` with no bundle uses the
            system roots.
        tls_server_name: override the name checked against the gateway's certificate.
        max_message_bytes: messages larger than this are refused before sending (default 4 MiB; keep it at or
            below the gateway's).
        connect_timeout: seconds for connecting and for control requests (default 10).
        reconnect_backoff, reconnect_max_backoff: first and largest pause between reconnection attempts
            (defaults 0.1 and 5 s, doubling with jitter).
        serializer: the `ProtobufMessageSerializer` (default: a new one). Register pydantic and dataclass
            message types with `register_message_type` on every worker that sends or receives them.
        stop_timeout: seconds `stop()` lets hosted handlers finish (default 5).
        on_undelivered: called with the recipient and the reason when the gateway reports that a one-way
            message this worker sent could not be delivered (it is also logged at WARNING).
            One-way messages are not acknowledged: this is the only word of a loss the gateway saw.
    """

    def __init__(
        self,
        address: str | Sequence[str] | grpc.aio.Channel,
        *,
        token: str | SecretStr | None = None,
        token_env: str | None = DEFAULT_TOKEN_ENV,
        token_file: str | Path | None = None,
        tls: bool = False,
        root_certificates: bytes | None = None,
        tls_server_name: str | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        connect_timeout: float = 10.0,
        reconnect_backoff: float = 0.1,
        reconnect_max_backoff: float = 5.0,
        serializer: ProtobufMessageSerializer | None = None,
        stop_timeout: float = 5.0,
        on_undelivered: Callable[[AgentId, str], None] | None = None,
    ) -> None:
        self._addresses: list[str] = []
        if isinstance(address, grpc.aio.Channel):
            self._channel: grpc.aio.Channel | None = address
            self._owns_channel = False
        elif isinstance(address, (str, list, tuple)) and len(address) > 0:
            self._addresses = [address] if isinstance(address, str) else list(address)
            for one in self._addresses:
                if not isinstance(one, str):
                    raise TypeError(f"address must be 'host:port' strings, got {type(one).__name__} in the list")
                host, sep, port = one.rpartition(":")
                if not sep or not host or not port.isdigit():
                    raise ValueError(f"address must look like 'host:port', got {one!r}")
            self._channel = None
            self._owns_channel = True
        else:
            raise TypeError(
                "address must be 'host:port', a non-empty list of them, or a grpc.aio.Channel, "
                f"got {type(address).__name__}"
            )
        # Which of `_addresses` the channel goes to (the worker fails over to the next when its gateway goes away).
        self._address_index = 0
        if token is not None and token_file is not None:
            raise ValueError("give token or token_file, not both")
        if token_file is not None:
            token = read_token_file(token_file)
        elif token is None and token_env:
            env_value = os.environ.get(token_env)
            file_value = os.environ.get(f"{token_env}_FILE")
            if env_value and file_value:
                raise ValueError(f"both {token_env} and {token_env}_FILE are set: set one")
            if env_value:
                token = SecretStr(env_value)
            elif file_value:
                token = read_token_file(file_value, f"{token_env}_FILE")
        elif isinstance(token, str):
            token = SecretStr(token)
        if token is not None:
            check_token(token)
        if root_certificates is not None and not isinstance(root_certificates, bytes):
            raise TypeError("root_certificates must be PEM bytes")
        if isinstance(max_message_bytes, bool) or not isinstance(max_message_bytes, int) or max_message_bytes < 1024:
            raise ValueError(f"max_message_bytes must be an integer of at least 1024, got {max_message_bytes!r}")
        self._connect_timeout = check_seconds(connect_timeout, "connect_timeout")
        self._backoff = check_seconds(reconnect_backoff, "reconnect_backoff")
        self._max_backoff = check_seconds(reconnect_max_backoff, "reconnect_max_backoff")
        self._token = token
        self._tls = tls or root_certificates is not None
        self._root_certificates = root_certificates
        self._tls_server_name = tls_server_name
        self._max_message_bytes = max_message_bytes
        self.serializer = serializer if serializer is not None else ProtobufMessageSerializer()
        self._local = LocalAgentRuntime(stop_timeout=stop_timeout)
        if on_undelivered is not None and not callable(on_undelivered):
            raise TypeError(f"on_undelivered must be a callable or None, got {type(on_undelivered).__name__}")
        self._on_undelivered = on_undelivered
        self._types: set[str] = set()
        self._call: Any = None
        self._outbox: Outbox | None = None
        self._pending: dict[str, asyncio.Future[Any]] = {}
        # RPC deadlines: (when, request id, future), earliest first, with one loop timer for the earliest. An
        # answered RPC's entry is dropped when it comes up (or in a sweep), so no timer is cancelled per RPC.
        self._deadlines = Deadlines()
        self._hosted: dict[str, Delivery] = {}
        self._ids = itertools.count(1)
        self._worker_id = ""
        self._source = "ext-worker/unconnected"
        self._gateway_id = ""
        self._agent_ids: dict[tuple[str, str], AgentId] = {}
        self._connected = False
        self._supervisor: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._stream_done: asyncio.Future[None] | None = None
        self._started = False
        self._closed = False

    @property
    def _address(self) -> str | None:
        return self._addresses[self._address_index] if self._addresses else None

    @property
    def address(self) -> str | None:
        """The gateway address this worker connects to now (`None` for a channel you gave)."""
        return self._address

    def __repr__(self) -> str:
        target = self._address or "<channel>"
        return f"GrpcAgentRuntime(address={target!r}, worker_id={self._worker_id!r}, connected={self.connected})"

    @property
    def worker_id(self) -> str:
        """This worker's cluster-unique id, assigned by the gateway on each connection."""
        return self._worker_id

    @property
    def connected(self) -> bool:
        return self._connected

    def register_message_type(self, message_type: type[Any], type_name: str | None = None) -> str:
        """Register a pydantic or dataclass message class with the serializer (see `ProtobufMessageSerializer`)."""
        return self.serializer.register(message_type, type_name)

    # --- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the gateway and register the agent types registered so far. Raises
        `AuthenticationError` for a rejected token, `UndeliverableError` when the gateway cannot be reached
        within `connect_timeout`."""
        if self._closed:
            raise RuntimeClosedError("the runtime was stopped")
        if self._started:
            return
        await self._connect_any(0)
        self._started = True
        self._supervisor = asyncio.get_running_loop().create_task(self._supervise())

    async def stop(self) -> None:
        """Stop hosted agents (letting in-flight handlers finish up to `stop_timeout`), close them, and close
        the stream. Pending RPCs fail with `RuntimeClosedError`. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._local.stop()
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._supervisor
        self._fail_pending(RuntimeClosedError("the runtime was stopped"))
        self._deadlines.clear()
        await self._close_call()
        if self._owns_channel and self._channel is not None:
            await self._channel.close(None)
            self._channel = None

    async def __aenter__(self) -> GrpcAgentRuntime:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # --- connection ------------------------------------------------------------------------------------

    def _make_channel(self) -> grpc.aio.Channel:
        assert self._address is not None
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", self._max_message_bytes),
            ("grpc.max_send_message_length", self._max_message_bytes),
        ]
        if self._tls:
            if self._tls_server_name:
                options.append(("grpc.ssl_target_name_override", self._tls_server_name))
            credentials = grpc.ssl_channel_credentials(root_certificates=self._root_certificates)
            return grpc.aio.secure_channel(self._address, credentials, options=options)
        return grpc.aio.insecure_channel(self._address, options=options)

    async def _connect_any(self, first: int) -> None:
        """Connect to the first gateway that answers, trying the addresses in turn from index `first`."""
        count = max(1, len(self._addresses))
        errors: list[str] = []
        for step in range(count):
            try:
                await self._connect((first + step) % count)
                return
            except UndeliverableError as exc:
                errors.append(str(exc))
        if count == 1:
            raise UndeliverableError(errors[0])
        raise UndeliverableError(f"none of the {count} gateways answered: " + "; ".join(errors))

    async def _connect(self, index: int = 0) -> None:
        if self._addresses and index != self._address_index:
            # Another replica: a channel of its own (the old one goes; its stream already ended).
            old, self._channel = self._channel, None
            self._address_index = index
            if old is not None:
                await old.close(None)
        if self._channel is None:
            self._channel = self._make_channel()
        # The generated stub, with `parse_message` as the deserializer: a bad frame is reported, not fatal.
        open_channel = self._channel.stream_stream(
            OPEN_CHANNEL, request_serializer=pb.Message.SerializeToString, response_deserializer=parse_message
        )
        metadata = (("authorization", f"Bearer {self._token.get_secret_value()}"),) if self._token else ()
        call = open_channel(metadata=metadata)  # type: ignore[call-arg]  # grpc-stubs: no request_iterator=None
        try:
            first: Any = await asyncio.wait_for(call.read(), self._connect_timeout)
        except asyncio.TimeoutError:
            call.cancel()
            raise UndeliverableError(
                f"no answer from the gateway at {self._address or '<channel>'} within {self._connect_timeout:g} s"
            ) from None
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise AuthenticationError(f"the gateway rejected this worker: {exc.details()}") from None
            raise UndeliverableError(
                f"cannot connect to the gateway at {self._address or '<channel>'}: {exc.code().name} {exc.details()}"
            ) from None
        if first is _EOF or first.__class__ is Malformed or first.WhichOneof("body") != "hello":
            call.cancel()
            raise UndeliverableError("the gateway did not greet this worker (is it an ext gateway?)")
        self._call = call
        self._outbox = Outbox(call.write, self._max_message_bytes)
        self._worker_id = first.hello.worker_id
        self._source = f"ext-worker/{self._worker_id}"
        self._gateway_id = first.hello.gateway_id
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        reader = loop.create_task(self._read(call, done))
        self._reader = reader
        self._stream_done = done
        self._connected = True
        try:
            for agent_type in sorted(self._types):
                await self._register_remote(agent_type)
        except BaseException:
            self._connected = False
            reader.cancel()
            call.cancel()
            raise
        logger.info("worker %s connected to gateway %s", self._worker_id, self._gateway_id)

    async def _supervise(self) -> None:
        """Reconnect with backoff whenever the stream ends, and register every agent type again."""
        while not self._closed:
            if self._stream_done is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.shield(self._stream_done)
            if self._stopping():
                return
            self._connected = False
            logger.warning("worker %s lost its gateway; reconnecting", self._worker_id)
            self._fail_pending(UndeliverableError("the connection to the gateway was lost before the answer came"))
            for task in list(self._hosted.values()):
                self._local.cancel_delivery(task)
            self._hosted.clear()
            await self._close_call()
            delay = self._backoff
            while not self._closed:
                await asyncio.sleep(delay * random.uniform(0.8, 1.2))
                try:
                    # Another replica first: the one just lost is likely gone (a single address: that one again).
                    await self._connect_any(self._address_index + 1)
                    break
                except AuthenticationError:
                    logger.error("the gateway rejected this worker's token on reconnect; retrying")
                except Exception as exc:
                    logger.info("reconnecting to the gateway failed (%s); retrying", exc)
                delay = min(delay * 2, self._max_backoff)

    def _stopping(self) -> bool:
        # A method, not the attribute: `stop()` flips it while the supervisor is suspended.
        return self._closed

    async def _close_call(self) -> None:
        self._outbox = None
        call, self._call = self._call, None
        if call is not None:
            call.cancel()

    def _fail_pending(self, error: Exception) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)

    def _current_outbox(self) -> Outbox:
        outbox = self._outbox
        if outbox is None or not self._connected:
            if self._closed:
                raise RuntimeClosedError("the runtime was stopped")
            raise UndeliverableError("not connected to the gateway (reconnecting)")
        return outbox

    async def _write(self, message: pb.Message, coalesce: bool = False) -> None:
        """Write now when the stream is idle; with `coalesce` (other traffic in flight), queue it so that
        concurrent requests and replies share stream writes."""
        if coalesce:
            await self._post(message)
            return
        outbox = self._current_outbox()
        try:
            await outbox.send(message)
        except _STREAM_ERRORS as exc:
            raise UndeliverableError(f"sending to the gateway failed: {exc}") from None

    async def _post(self, message: pb.Message) -> None:
        """One-way traffic: queued behind the write in flight, so bursts go out as batches."""
        outbox = self._current_outbox()
        try:
            outbox.post(message)
            await outbox.wait_drained()
        except _STREAM_ERRORS as exc:
            raise UndeliverableError(f"sending to the gateway failed: {exc}") from None

    async def _read(self, call: Any, done: asyncio.Future[None]) -> None:
        handed_off = False
        try:
            while True:
                message = await call.read()
                if message is _EOF:
                    return
                if message.__class__ is Malformed:
                    logger.warning("worker %s dropped an undecodable message: %s", self._worker_id, message.reason)
                    continue
                body = message.WhichOneof("body")
                if body == "response":
                    # An RPC's answer: the caller's hot path, inline.
                    response = message.response
                    future = self._pending.pop(response.request_id, None)
                    if future is not None and not future.done():
                        future.set_result(response)
                    continue
                if body == "delivery":
                    run_here = await self._on_delivery(message.delivery, True)
                elif body == "batch":
                    items = message.batch.messages
                    last = len(items) - 1
                    for index, item in enumerate(items):
                        run_here = await self._handle(item, index == last)  # only the last item may return one
                else:
                    run_here = await self._handle(message)
                if run_here is None:
                    continue
                # Become the idle agent's consumer: its handler starts now instead of after a task switch, and
                # usually sends its answer before it first waits. Only then does a fresh reader take over the
                # stream, so starting that task is not on the answer's way out.
                try:
                    waiting_on = run_here.send(None)
                except StopIteration:
                    continue  # handled and answered without waiting: keep reading
                except BaseException:
                    self._reader = asyncio.get_running_loop().create_task(self._read(call, done))
                    handed_off = True
                    raise
                self._reader = asyncio.get_running_loop().create_task(self._read(call, done))
                handed_off = True
                await _resume(run_here, waiting_on)
                return
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                logger.info("the gateway stream ended: %s %s", exc.code().name, exc.details())
        finally:
            if not handed_off and not done.done():
                done.set_result(None)

    async def _handle(self, message: pb.Message, may_run_here: bool = False) -> Coroutine[Any, Any, None] | None:
        """Take one message; may return a coroutine that runs a hosted agent's mailbox in the reader's task."""
        body = message.WhichOneof("body")
        if body == "response":
            future = self._pending.pop(message.response.request_id, None)
            if future is not None and not future.done():
                future.set_result(message.response)
        elif body == "delivery":
            return await self._on_delivery(message.delivery, may_run_here)
        elif body == "cancel":
            handle = self._hosted.pop(message.cancel.request_id, None)
            if handle is not None:
                self._local.cancel_delivery(handle)
        elif body == "register_response":
            self._resolve(message.register_response.request_id, message.register_response)
        elif body == "list_agents_response":
            self._resolve(message.list_agents_response.request_id, message.list_agents_response)
        elif body == "notice":
            notice = message.notice
            logger.warning(
                "a one-way message for %s/%s was not delivered: %s",
                notice.recipient.type,
                notice.recipient.key,
                notice.error.message,
            )
            if self._on_undelivered is not None:
                try:
                    recipient = self._agent_id(notice.recipient.type, notice.recipient.key)
                except ValueError:
                    recipient = None  # a broadcast's notice names a type only
                try:
                    if recipient is not None:
                        self._on_undelivered(recipient, notice.error.message)
                except Exception:
                    logger.exception("the on_undelivered callback failed")
        return None

    def _resolve(self, request_id: str, value: Any) -> None:
        future = self._pending.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result(value)

    # --- hosting ---------------------------------------------------------------------------------------

    async def _on_delivery(self, delivery: pb.Delivery, may_run_here: bool = False) -> Coroutine[Any, Any, None] | None:
        """Hand a delivery to the hosted agent; may return a coroutine that runs its mailbox in the reader's task."""
        try:
            kind = delivery.kind
            agent_ids = self._agent_ids
            sender: AgentId | None = None
            if delivery.HasField("sender"):
                wire = delivery.sender
                key = (wire.type, wire.key)
                sender = agent_ids.get(key) or self._agent_id(*key)
            try:
                message = self.serializer.from_cloud_event(delivery.event)
            except SerializationError as exc:
                if kind == pb.DELIVERY_KIND_RPC:
                    error = pb.Error(kind=pb.ERROR_KIND_BAD_MESSAGE, error_type="SerializationError", message=str(exc))
                    await self._send_response(pb.Response(request_id=delivery.request_id, error=error))
                else:
                    logger.error("dropped a message this worker cannot decode: %s", exc)
                return None
            if kind == pb.DELIVERY_KIND_BROADCAST:
                with contextlib.suppress(RuntimeClosedError):
                    self._local.broadcast_now(message, delivery.broadcast_type, sender=sender)
                return None
            wire = delivery.recipient
            key = (wire.type, wire.key)
            recipient = agent_ids.get(key) or self._agent_id(*key)
            if kind == pb.DELIVERY_KIND_RPC:
                request_id = delivery.request_id
                reply = functools.partial(self._reply, request_id, recipient)
                run_here: Coroutine[Any, Any, None] | None = None
                try:
                    if may_run_here:
                        handle, run_here = self._local.deliver_here(
                            message, recipient, sender=sender, rpc=True, message_id=request_id, reply=reply
                        )
                    else:
                        handle = self._local.deliver(
                            message, recipient, sender=sender, rpc=True, message_id=request_id, reply=reply
                        )
                except (AgentNotFoundError, RuntimeClosedError) as exc:
                    await self._reply(request_id, recipient, None, exc)
                    return None
                self._hosted[request_id] = handle
                return run_here
            try:
                self._local.deliver(message, recipient, sender=sender)
            except (AgentNotFoundError, RuntimeClosedError) as exc:
                logger.error("dropped a one-way message for %s: %s", recipient, exc)
            return None
        except Exception as exc:
            # A bad delivery must not take the stream (and every other agent's traffic) down, and an RPC
            # caller hears about it now rather than at its deadline.
            logger.exception("worker %s failed to take a delivery", self._worker_id)
            if delivery.kind == pb.DELIVERY_KIND_RPC:
                error = pb.Error(kind=pb.ERROR_KIND_UNDELIVERABLE, error_type=type(exc).__name__, message=str(exc))
                await self._send_response(pb.Response(request_id=delivery.request_id, error=error))
            return None

    def _agent_id(self, agent_type: str, key: str) -> AgentId:
        """AgentIds from the wire, validated once per distinct id (validation is a regex match)."""
        cache_key = (agent_type, key)
        agent_id = self._agent_ids.get(cache_key)
        if agent_id is None:
            if len(self._agent_ids) > 10_000:
                self._agent_ids.clear()
            agent_id = self._agent_ids[cache_key] = AgentId(agent_type, key)
        return agent_id

    async def _reply(self, request_id: str, recipient: AgentId, result: Any, error: BaseException | None) -> None:
        """Answer an RPC this worker hosted (the handler's result or error)."""
        hosted = self._hosted
        hosted.pop(request_id, None)
        if error is None:
            envelope = pb.Message()
            response = envelope.response
            response.request_id = request_id
            try:
                self.serializer.fill_cloud_event(response.event, result, str(recipient))
            except (SerializationError, ValueError) as exc:
                error = exc
            else:
                # `_write`, inlined on this hot path: with other RPCs in flight here, the answer joins a batch.
                try:
                    outbox = self._outbox
                    if outbox is None or not self._connected:
                        outbox = self._current_outbox()  # raises
                    if hosted:
                        outbox.post(envelope)
                        await outbox.wait_drained()
                    else:
                        await outbox.send(envelope)
                except (UndeliverableError, RuntimeClosedError) as exc:
                    logger.info("could not answer request %s: %s", request_id, exc)
                except _STREAM_ERRORS as exc:
                    logger.info("could not answer request %s: sending to the gateway failed: %s", request_id, exc)
                return
        if not isinstance(error, asyncio.CancelledError):
            logger.debug("handler of %s failed on an RPC: %r", recipient, error)
        await self._send_response(pb.Response(request_id=request_id, error=error_of(error, recipient)))

    async def _send_response(self, response: pb.Response) -> None:
        try:
            await self._write(pb.Message(response=response))
        except (UndeliverableError, RuntimeClosedError) as exc:
            logger.info("could not answer request %s: %s", response.request_id, exc)

    # --- AgentRuntime ----------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosedError("the runtime was stopped")
        if not self._started:
            raise RuntimeError("the runtime is not started: call start() or use 'async with'")

    def _next_id(self) -> str:
        return str(next(self._ids))

    async def _control(self, message: pb.Message, request_id: str) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self._write(message)
            return await asyncio.wait_for(future, self._connect_timeout)
        except asyncio.TimeoutError:
            raise UndeliverableError(f"the gateway did not answer within {self._connect_timeout:g} s") from None
        finally:
            self._pending.pop(request_id, None)

    async def _register_remote(self, agent_type: str) -> None:
        request_id = self._next_id()
        message = pb.Message(register=pb.RegisterAgentType(request_id=request_id, type=agent_type))
        reply = await self._control(message, request_id)
        if reply.error:
            raise ValueError(f"the gateway refused agent_type {agent_type!r}: {reply.error}")

    async def register_agent_factory(self, agent_type: str | AgentType, factory: AgentFactory) -> AgentType:
        """Host `agent_type` on this worker (and announce it to the gateway when connected). Pydantic and
        dataclass types that a `RoutedAgent` factory class handles are registered with the serializer."""
        name = agent_type_name(agent_type)
        factory = check_factory(factory)
        if self._closed:
            raise RuntimeClosedError("the runtime was stopped")
        if name in self._types:
            raise ValueError(f"agent_type {name!r} is already registered")
        if isinstance(factory, type) and issubclass(factory, RoutedAgent):
            for message_type in factory.handled_message_types():
                with contextlib.suppress(TypeError, ValueError):
                    if not self.serializer.is_registered(message_type):
                        self.serializer.register(message_type)

        async def build(agent_id: AgentId, _local: Any) -> Agent:
            agent = factory(agent_id, self)
            if inspect.isawaitable(agent):
                agent = await agent
            return agent

        await self._local.register_agent_factory(name, build)
        self._types.add(name)
        if self._connected:
            try:
                await self._register_remote(name)
            except BaseException:
                self._types.discard(name)
                raise
        return AgentType(name)

    def _delivery(
        self,
        kind: int,
        message: Any,
        sender: AgentId | None,
        recipient: AgentId | None = None,
        request_id: str = "",
        broadcast_type: str = "",
    ) -> pb.Message:
        envelope = pb.Message()
        delivery = envelope.delivery
        delivery.kind = kind  # type: ignore[assignment]
        if sender is None:
            self.serializer.fill_cloud_event(delivery.event, message, self._source)
        else:
            self.serializer.fill_cloud_event(delivery.event, message, str(sender))
            wire = delivery.sender
            wire.type = sender.type
            wire.key = sender.key
        if request_id:
            delivery.request_id = request_id
        if recipient is not None:
            wire = delivery.recipient
            wire.type = recipient.type
            wire.key = recipient.key
        if broadcast_type:
            delivery.broadcast_type = broadcast_type
        size = envelope.ByteSize()
        if size > self._max_message_bytes:
            raise ValueError(f"message is {size} bytes on the wire, above max_message_bytes={self._max_message_bytes}")
        return envelope

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> None:
        """Send one way through the gateway. Returns once the gateway has the message; a recipient whose type
        no worker hosts, or a handler error, is logged (on this worker and on the hosting one)."""
        recipient = check_agent_id(recipient)
        check_sender(sender)
        self._check_open()
        if cancellation_token is not None and cancellation_token.is_cancelled():
            raise asyncio.CancelledError("cancelled by CancellationToken before sending")
        envelope = self._delivery(pb.DELIVERY_KIND_ONE_WAY, message, sender, recipient)
        await self._post(envelope)

    async def send_and_await_response(
        self,
        message: Any,
        recipient: AgentId,
        timeout: float | None = DEFAULT_RPC_TIMEOUT,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> Any:
        """RPC through the gateway: returns the handler's return value. Raises `TimeoutError` (and cancels the
        remote handler) after `timeout`, `AgentNotFoundError` at once for a type no worker hosts,
        `UndeliverableError` when the hosting worker dies, `MessageHandlerError` for the handler's exception."""
        # The checks of check_agent_id / check_timeout / _check_open, with their common case first.
        if recipient.__class__ is not AgentId:
            recipient = check_agent_id(recipient)
        check_sender(sender)
        if type(timeout) is not float or not 0.0 < timeout < math.inf:
            timeout = check_timeout(timeout)
        if self._closed or not self._started:
            self._check_open()
        request_id = str(next(self._ids))
        envelope = self._delivery(pb.DELIVERY_KIND_RPC, message, sender, recipient, request_id)
        outbox = self._outbox
        if outbox is None or not self._connected:
            outbox = self._current_outbox()  # raises
        pending = self._pending
        # The request goes out first (`_write`, inlined); what only this worker needs, the answer's future and
        # the deadline, is set up while it travels, before this task first waits.
        sending: Coroutine[Any, Any, None] | None = None
        waiting_on: Any = None
        try:
            if pending:
                outbox.post(envelope)  # other RPCs in flight: the request joins a batch
            else:
                sending = outbox.send(envelope)
                try:
                    waiting_on = sending.send(None)  # the write starts here
                except StopIteration:
                    sending = None
        except _STREAM_ERRORS as exc:
            raise UndeliverableError(f"sending to the gateway failed: {exc}") from None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[pb.Response] = loop.create_future()
        pending[request_id] = future
        remove = cancellation_token.add_callback(future.cancel) if cancellation_token is not None else None
        if timeout is not None:
            self._deadlines.add(loop, loop.time() + timeout, request_id, future, len(pending))
        try:
            try:
                if sending is not None:
                    await _resume(sending, waiting_on)
                else:
                    await outbox.wait_drained()
            except _STREAM_ERRORS as exc:
                raise UndeliverableError(f"sending to the gateway failed: {exc}") from None
            response = await future
        except Expired:
            await self._cancel_remote(request_id)
            raise TimeoutError(
                f"no response from {recipient} within {timeout:g} s (message {type(message).__qualname__})"
            ) from None
        except asyncio.CancelledError:
            await self._cancel_remote(request_id)
            raise
        finally:
            self._pending.pop(request_id, None)
            if remove is not None:
                remove()
        if response.HasField("error"):
            raise_error(response.error)
        return self.serializer.from_cloud_event(response.event)

    async def _cancel_remote(self, request_id: str) -> None:
        with contextlib.suppress(UndeliverableError, RuntimeClosedError):
            await self._write(pb.Message(cancel=pb.Cancel(request_id=request_id)))

    async def broadcast(self, message: Any, agent_type: str | AgentType, *, sender: AgentId | None = None) -> None:
        """Send one way to every active agent of `agent_type` on every worker (except `sender`)."""
        name = agent_type_name(agent_type)
        check_sender(sender)
        self._check_open()
        envelope = self._delivery(pb.DELIVERY_KIND_BROADCAST, message, sender, broadcast_type=name)
        await self._post(envelope)

    async def list_agents(self, agent_type: str | AgentType | None = None) -> list[AgentId]:
        """Every active agent in the cluster (of one type, or all), from the gateway's registry. Raises
        `UndeliverableError` when the gateway cannot reach its registry."""
        name = "" if agent_type is None else agent_type_name(agent_type)
        self._check_open()
        request_id = self._next_id()
        reply = await self._control(pb.Message(list_agents=pb.ListAgents(request_id=request_id, type=name)), request_id)
        if reply.error:
            raise UndeliverableError(f"the gateway could not list the agents: {reply.error}")
        return [AgentId(a.type, a.key) for a in reply.agents]

    async def local_agents(self) -> list[AgentId]:
        """The agents hosted by this worker."""
        return await self._local.list_agents()


@types.coroutine
def _resume(coro: Coroutine[Any, Any, None], waiting_on: Any) -> Generator[Any, Any, None]:
    """`await coro` for a coroutine whose first step was already taken (and yielded `waiting_on`): what it
    waits on goes to this task, and what this task is sent or thrown (a wake-up, a cancellation) goes to it."""
    while True:
        try:
            sent = yield waiting_on
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                waiting_on = coro.throw(exc)
            except StopIteration:
                return
        else:
            try:
                waiting_on = coro.send(sent)
            except StopIteration:
                return
