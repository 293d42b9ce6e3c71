"""A worker's connection to the gateway: the channel (plaintext or TLS, with its token), the stream and its
coalescing writer, and the supervisor that reconnects with backoff and fails over across gateway replicas.

`GatewayConnection` knows nothing of agents: the worker runtime (`_worker.py`) subclasses it and supplies the
three hooks, `_read` (consume the stream), `_announce` (register the hosted agent types on a new connection)
and `_connection_lost` (settle what was in flight on the stream that ended)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
from pydantic import SecretStr

from ext.core import RuntimeClosedError, UndeliverableError, check_seconds

from ._outbox import Outbox
from ._secrets import resolve_token
from ._wire import (
    DEFAULT_MAX_MESSAGE_BYTES,
    EOF,
    OPEN_CHANNEL,
    AuthenticationError,
    Malformed,
    authorization_metadata,
    parse_message,
    resume_metadata,
)
from .protos import agent_worker_pb2 as pb

__all__ = ["DEFAULT_TOKEN_ENV", "STREAM_ERRORS", "GatewayConnection"]

logger = logging.getLogger(__name__)

DEFAULT_TOKEN_ENV = "EXT_GRPC_TOKEN"

# What a write on a stream that has gone away raises.
STREAM_ERRORS = (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError)


class GatewayConnection(ABC):
    """The stream to a gateway, kept open: see the module docstring. Arguments as `GrpcAgentRuntime`'s."""

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
        token = resolve_token(token, token_file, token_env)
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
        self._call: Any = None
        self._outbox: Outbox | None = None
        self._worker_id = ""
        # Proves to a gateway that a reconnection comes from the process that held the previous worker id.
        self._instance = secrets.token_hex(16)
        self._source = "ext-worker/unconnected"
        self._gateway_id = ""
        self._connected = False
        self._supervisor: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._stream_done: asyncio.Future[None] | None = None
        self._started = False
        self._closed = False

    # --- hooks of the runtime ----------------------------------------------------------------------------

    @abstractmethod
    async def _read(self, call: Any, done: asyncio.Future[None]) -> None:
        """Consume the stream `call`; set `done` when it ends (or hand both to a successor reader task)."""

    @abstractmethod
    async def _announce(self) -> None:
        """On a new connection, before it counts as connected: register what this worker hosts."""

    @abstractmethod
    def _connection_lost(self) -> None:
        """The stream ended: fail or cancel what was waiting on it."""

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
        metadata = authorization_metadata(self._token) + resume_metadata(self._instance, self._worker_id)
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
        if first is EOF or first.__class__ is Malformed or first.WhichOneof("body") != "hello":
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
            await self._announce()
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
            self._connection_lost()
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
        except STREAM_ERRORS as exc:
            raise UndeliverableError(f"sending to the gateway failed: {exc}") from None

    async def _post(self, message: pb.Message) -> None:
        """One-way traffic: queued behind the write in flight, so bursts go out as batches."""
        outbox = self._current_outbox()
        try:
            outbox.post(message)
            await outbox.wait_drained()
        except STREAM_ERRORS as exc:
            raise UndeliverableError(f"sending to the gateway failed: {exc}") from None

    async def _close_connection(self) -> None:
        """For `stop`: end the supervisor, the stream and (when this worker made it) the channel."""
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._supervisor
        await self._close_call()
        if self._owns_channel and self._channel is not None:
            await self._channel.close(None)
            self._channel = None
