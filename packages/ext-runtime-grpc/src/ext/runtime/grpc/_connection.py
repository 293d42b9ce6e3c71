"""A worker's connection to the gateway: its settings (`ConnectionOptions`), the channel (plaintext or TLS, with its
token), the stream and its coalescing writer, and the supervisor that reconnects with backoff and fails over across
gateway replicas.

`GatewayConnection` knows nothing of agents: the worker runtime (`_worker.py`) passes in three hooks, `read`
(consume a new stream), `announce` (register the hosted agent types on a new connection, before it counts as
connected) and `lost` (settle what was in flight on the stream that ended)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import secrets
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import KW_ONLY, dataclass
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

__all__ = ["DEFAULT_TOKEN_ENV", "STREAM_ERRORS", "ConnectionOptions", "GatewayConnection"]

logger = logging.getLogger(__name__)

DEFAULT_TOKEN_ENV = "EXT_GRPC_TOKEN"

# What a write on a stream that has gone away raises.
STREAM_ERRORS = (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError)


@dataclass(frozen=True)
class ConnectionOptions:
    """How a worker reaches its gateway: `GrpcAgentRuntime(ConnectionOptions(...))`, or the same fields as
    `GrpcAgentRuntime`'s keywords. Checked at construction; a bad value raises `ValueError` or `TypeError` naming the
    field. The token itself is looked up (`token_file`, the environment) when the runtime is built."""

    address: str | Sequence[str] | grpc.aio.Channel
    """`host:port` of the gateway; a list of them (gateway replicas: the worker connects to the first that answers
    and, when its gateway goes away, fails over to the next); or a `grpc.aio.Channel` you built (its TLS and
    options are then yours; it is not closed by `stop`). A list is kept as a tuple."""
    _: KW_ONLY
    token: SecretStr | str | None = None
    """The gateway's token (sent as `authorization: Bearer ...`; a `str` is kept as a `SecretStr`); default:
    `token_file`, else the `token_env` variable, else the file named by the `<token_env>_FILE` variable."""
    token_env: str | None = DEFAULT_TOKEN_ENV
    """Environment variable read when `token` and `token_file` are None (`None`: none is read;
    `<token_env>_FILE` may name a token file instead)."""
    token_file: str | Path | None = None
    """A file holding the token (a Kubernetes secret volume, a compose secret); its trailing newline is dropped.
    Read when the runtime is built: an unreadable or empty file raises `ValueError`."""
    tls: bool = False
    """Connect with TLS (the system roots unless `root_certificates`)."""
    root_certificates: bytes | None = dataclasses.field(default=None, repr=False)
    """PEM CA bundle: connect with TLS trusting it."""
    tls_server_name: str | None = None
    """Override the name checked against the gateway's certificate."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Messages larger than this are refused before sending (at least 1024; keep it at or below the gateway's)."""
    connect_timeout: float = 10.0
    """Seconds for connecting and for control requests (registration, listing, subscriptions)."""
    reconnect_backoff: float = 0.1
    """First pause, in seconds, between reconnection attempts (doubling, with ±20 % jitter)."""
    reconnect_max_backoff: float = 5.0
    """Largest pause, in seconds, between reconnection attempts."""

    def __post_init__(self) -> None:
        address = self.address
        if isinstance(address, (list, tuple)) and len(address) > 0:
            for one in address:
                if not isinstance(one, str):
                    raise TypeError(f"address must be 'host:port' strings, got {type(one).__name__} in the list")
                _check_host_port(one)
            object.__setattr__(self, "address", tuple(address))
        elif isinstance(address, str) and address:
            _check_host_port(address)
        elif not isinstance(address, grpc.aio.Channel):
            raise TypeError(
                "address must be 'host:port', a non-empty list of them, or a grpc.aio.Channel, "
                f"got {type(address).__name__}"
            )
        if isinstance(self.token, str):
            object.__setattr__(self, "token", SecretStr(self.token))
        elif self.token is not None and not isinstance(self.token, SecretStr):
            raise TypeError(f"token must be a str, a SecretStr or None, got {type(self.token).__name__}")
        if self.token_env is not None and not isinstance(self.token_env, str):
            raise TypeError(f"token_env must be a str or None, got {type(self.token_env).__name__}")
        if self.token_file is not None and not isinstance(self.token_file, (str, Path)):
            raise TypeError(f"token_file must be a path or None, got {type(self.token_file).__name__}")
        if not isinstance(self.tls, bool):
            raise TypeError(f"tls must be a bool, got {type(self.tls).__name__}")
        if self.root_certificates is not None and not isinstance(self.root_certificates, bytes):
            raise TypeError("root_certificates must be PEM bytes")
        if self.tls_server_name is not None and not isinstance(self.tls_server_name, str):
            raise TypeError(f"tls_server_name must be a str or None, got {type(self.tls_server_name).__name__}")
        size = self.max_message_bytes
        if isinstance(size, bool) or not isinstance(size, int) or size < 1024:
            raise ValueError(f"max_message_bytes must be an integer of at least 1024, got {size!r}")
        for name in ("connect_timeout", "reconnect_backoff", "reconnect_max_backoff"):
            object.__setattr__(self, name, check_seconds(getattr(self, name), name))


def _check_host_port(address: str) -> None:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"address must look like 'host:port', got {address!r}")


class GatewayConnection:
    """The stream to a gateway, kept open: see the module docstring.

    Args:
        options: where and how to connect.
        read: called with each new stream and a future to set when it ends (or to hand, with the stream, to a
            successor reader); returns the coroutine that consumes it, run as a task.
        announce: awaited on each new connection before it counts as connected (a failure ends the attempt).
        lost: called when a stream ended, before reconnecting: fail or cancel what was waiting on it.
    """

    def __init__(
        self,
        options: ConnectionOptions,
        *,
        read: Callable[[Any, asyncio.Future[None]], Coroutine[Any, Any, None]],
        announce: Callable[[], Awaitable[None]],
        lost: Callable[[], None],
    ) -> None:
        self.options = options
        self._read = read
        self._announce = announce
        self._lost = lost
        address = options.address
        self._addresses: list[str] = []
        if isinstance(address, grpc.aio.Channel):
            self._channel: grpc.aio.Channel | None = address
            self._owns_channel = False
        else:
            self._addresses = [address] if isinstance(address, str) else list(address)
            self._channel = None
            self._owns_channel = True
        # Which of `_addresses` the channel goes to (the worker fails over to the next when its gateway goes away).
        self._address_index = 0
        self._token = resolve_token(options.token, options.token_file, options.token_env)
        self._tls = options.tls or options.root_certificates is not None
        self.max_message_bytes = options.max_message_bytes
        self.connect_timeout = options.connect_timeout
        self._call: Any = None
        # The open stream's writer; None while not connected.
        self.outbox: Outbox | None = None
        # This worker's cluster-unique id, assigned by the gateway on each connection.
        self.worker_id = ""
        # Proves to a gateway that a reconnection comes from the process that held the previous worker id.
        self._instance = secrets.token_hex(16)
        # The CloudEvent source of what this worker sends from outside any agent.
        self.source = "ext-worker/unconnected"
        self.gateway_id = ""
        self.connected = False
        # Set when the runtime stops: no reconnection, and sends without a stream raise `RuntimeClosedError`.
        self.closed = False
        self._supervisor: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._stream_done: asyncio.Future[None] | None = None

    @property
    def address(self) -> str | None:
        """The gateway address connected to now (`None` for a channel you gave)."""
        return self._addresses[self._address_index] if self._addresses else None

    # --- connection ------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect to the first gateway that answers, then keep the stream open (reconnecting) until `close`."""
        await self._connect_any(0)
        self._supervisor = asyncio.get_running_loop().create_task(self._supervise())

    def _make_channel(self) -> grpc.aio.Channel:
        address = self.address
        assert address is not None
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_send_message_length", self.max_message_bytes),
        ]
        if self._tls:
            if self.options.tls_server_name:
                options.append(("grpc.ssl_target_name_override", self.options.tls_server_name))
            credentials = grpc.ssl_channel_credentials(root_certificates=self.options.root_certificates)
            return grpc.aio.secure_channel(address, credentials, options=options)
        return grpc.aio.insecure_channel(address, options=options)

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
        metadata = authorization_metadata(self._token) + resume_metadata(self._instance, self.worker_id)
        call = open_channel(metadata=metadata)  # type: ignore[call-arg]  # grpc-stubs: no request_iterator=None
        target = self.address or "<channel>"
        try:
            first: Any = await asyncio.wait_for(call.read(), self.connect_timeout)
        except asyncio.TimeoutError:
            call.cancel()
            raise UndeliverableError(
                f"no answer from the gateway at {target} within {self.connect_timeout:g} s"
            ) from None
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise AuthenticationError(f"the gateway rejected this worker: {exc.details()}") from None
            raise UndeliverableError(
                f"cannot connect to the gateway at {target}: {exc.code().name} {exc.details()}"
            ) from None
        if first is EOF or first.__class__ is Malformed or first.WhichOneof("body") != "hello":
            call.cancel()
            raise UndeliverableError("the gateway did not greet this worker (is it an ext gateway?)")
        self._call = call
        self.outbox = Outbox(call.write, self.max_message_bytes)
        self.worker_id = first.hello.worker_id
        self.source = f"ext-worker/{self.worker_id}"
        self.gateway_id = first.hello.gateway_id
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        reader = loop.create_task(self._read(call, done))
        self._reader = reader
        self._stream_done = done
        self.connected = True
        try:
            await self._announce()
        except BaseException:
            self.connected = False
            reader.cancel()
            call.cancel()
            raise
        logger.info("worker %s connected to gateway %s", self.worker_id, self.gateway_id)

    async def _supervise(self) -> None:
        """Reconnect with backoff whenever the stream ends (`announce` registers every agent type again)."""
        while not self.closed:
            if self._stream_done is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.shield(self._stream_done)
            if self._stopping():
                return
            self.connected = False
            logger.warning("worker %s lost its gateway; reconnecting", self.worker_id)
            self._lost()
            await self._close_call()
            delay = self.options.reconnect_backoff
            while not self.closed:
                await asyncio.sleep(delay * random.uniform(0.8, 1.2))
                try:
                    # Another replica first: the one just lost is likely gone (a single address: that one again).
                    await self._connect_any(self._address_index + 1)
                    break
                except AuthenticationError:
                    logger.error("the gateway rejected this worker's token on reconnect; retrying")
                except Exception as exc:
                    logger.info("reconnecting to the gateway failed (%s); retrying", exc)
                delay = min(delay * 2, self.options.reconnect_max_backoff)

    def _stopping(self) -> bool:
        # A method, not the attribute: `close()` flips it while the supervisor is suspended.
        return self.closed

    async def _close_call(self) -> None:
        self.outbox = None
        call, self._call = self._call, None
        if call is not None:
            call.cancel()

    # --- writing ---------------------------------------------------------------------------------------

    def current_outbox(self) -> Outbox:
        """The open stream's writer; `UndeliverableError` while reconnecting, `RuntimeClosedError` once closed."""
        outbox = self.outbox
        if outbox is None or not self.connected:
            if self.closed:
                raise RuntimeClosedError("the runtime was stopped")
            raise UndeliverableError("not connected to the gateway (reconnecting)")
        return outbox

    async def write(self, message: pb.Message, coalesce: bool = False) -> None:
        """Write now when the stream is idle; with `coalesce` (other traffic in flight), queue it so that
        concurrent requests and replies share stream writes."""
        if coalesce:
            await self.post(message)
            return
        outbox = self.current_outbox()
        try:
            await outbox.send(message)
        except STREAM_ERRORS as exc:
            raise UndeliverableError(f"sending to the gateway failed: {exc}") from None

    async def post(self, message: pb.Message) -> None:
        """One-way traffic: queued behind the write in flight, so bursts go out as batches."""
        outbox = self.current_outbox()
        try:
            outbox.post(message)
            await outbox.wait_drained()
        except STREAM_ERRORS as exc:
            raise UndeliverableError(f"sending to the gateway failed: {exc}") from None

    # --- closing ---------------------------------------------------------------------------------------

    def begin_close(self) -> None:
        """Stop reconnecting; the open stream stays usable (stopping handlers still answer) until `close`."""
        self.closed = True

    async def close(self) -> None:
        """End the supervisor, the stream and (when this connection made it) the channel."""
        self.closed = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._supervisor
        await self._close_call()
        if self._owns_channel and self._channel is not None:
            await self._channel.close(None)
            self._channel = None
