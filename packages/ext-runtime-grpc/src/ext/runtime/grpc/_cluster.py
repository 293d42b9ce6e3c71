"""`LocalCluster`: N gateway replicas sharing one Redis registry (or one gateway with an in-memory registry), in
this process, for development and tests."""

from __future__ import annotations

import uuid
from pathlib import Path

from pydantic import SecretStr

from ext.core import AsyncStartStop

from ._gateway import Gateway
from ._redis_registry import RedisRegistry, check_lease_seconds
from ._registry import InMemoryRegistry, Registry
from ._wire import DEFAULT_MAX_MESSAGE_BYTES


class LocalCluster(AsyncStartStop):
    """Start `replicas` gateways on their own ports (127.0.0.1 by default), sharing one registry in Redis (a
    single replica without `redis_url` keeps its registry in memory).

    Workers take the list of addresses (`GrpcAgentRuntime(cluster.addresses)`) and fail over to another
    replica when theirs goes away.

    Args:
        replicas: how many gateways (at least 1).
        redis_url: the Redis the replicas share (required for more than one replica); `None` with one replica:
            an `InMemoryRegistry` (a single host, nothing to share). Tests that want a throwaway Redis start
            one themselves (ext-testing's `ext.testing.redis.start_redis_server`).
        host: interface every replica listens on.
        port: the first replica's port, the next ones on port+1, port+2, ... (default 0: free ports).
        token: the token workers must send (`str` or `SecretStr`); `None`: no authentication.
        lease_seconds: a replica that dies without cleaning up loses its workers after this (default 2 s:
            short, for development; a graceful `stop_replica` removes them at once).
        redis_prefix: key prefix in Redis (default: unique per cluster, so clusters can share one Redis).
        shutdown_grace: seconds each replica's `stop` lets in-flight RPCs finish.
        max_message_bytes: the largest message each replica accepts or sends.
        tls_cert_file, tls_key_file: PEM files every replica serves TLS with (both or neither).
        health_port: the first replica's HTTP health port (`/healthz`, `/readyz`), the next ones on
            health_port+1, ... (0: free ports); None (default): no health listeners.
        health_host: the interface of the health listeners (default: `host`).
    """

    def __init__(
        self,
        replicas: int = 2,
        *,
        redis_url: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | SecretStr | None = None,
        lease_seconds: float = 2.0,
        redis_prefix: str | None = None,
        shutdown_grace: float = 1.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        tls_cert_file: str | Path | None = None,
        tls_key_file: str | Path | None = None,
        health_port: int | None = None,
        health_host: str | None = None,
    ) -> None:
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
            raise ValueError(f"replicas must be an integer of at least 1, got {replicas!r}")
        if redis_url is not None and (not isinstance(redis_url, str) or not redis_url):
            raise ValueError(f"redis_url must be a redis:// URL or None, got {redis_url!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not (port == 0 or 0 < port <= 65536 - replicas):
            raise ValueError(f"port must be 0 or a port with room for {replicas} consecutive ports, got {port!r}")
        if health_port is not None and (
            isinstance(health_port, bool)
            or not isinstance(health_port, int)
            or not (health_port == 0 or 0 < health_port <= 65536 - replicas)
        ):
            raise ValueError(
                f"health_port must be None, 0 or a port with room for {replicas} consecutive ports, got {health_port!r}"
            )
        self._health_port = health_port
        self._health_host = health_host
        self._replicas = replicas
        self._port = port
        self._tls_cert_file = tls_cert_file
        self._tls_key_file = tls_key_file
        self._redis_url = redis_url
        self._host = host
        self._token = token
        self._lease_seconds = lease_seconds
        self._prefix = redis_prefix if redis_prefix is not None else f"ext-cluster-{uuid.uuid4().hex[:8]}"
        self._shutdown_grace = shutdown_grace
        self._max_message_bytes = max_message_bytes
        self.gateways: list[Gateway] = []
        # Fail before anything starts on a bad argument of the gateways or the registry.
        Gateway(
            host=host,
            token=token,
            shutdown_grace=shutdown_grace,
            max_message_bytes=max_message_bytes,
            tls_cert_file=tls_cert_file,
            tls_key_file=tls_key_file,
            health_host=health_host,
        )
        check_lease_seconds(lease_seconds)
        if redis_url is not None:
            # The URL checked now (scheme, no password in it) and ext-redis found: a cluster without Redis needs
            # neither.
            RedisRegistry(redis_url, prefix=self._prefix, lease_seconds=lease_seconds)
        if redis_url is None and replicas > 1:
            raise ValueError(
                f"redis_url is required for {replicas} replicas (they share their registry in Redis); "
                "without one, use replicas=1 (an in-memory registry)"
            )

    @property
    def addresses(self) -> list[str]:
        """`host:port` of every replica (after `start`), in order; a stopped replica keeps its place."""
        return [gateway.address for gateway in self.gateways]

    @property
    def redis_url(self) -> str | None:
        """The shared Redis (None: a single replica with an in-memory registry)."""
        return self._redis_url

    @property
    def redis_prefix(self) -> str:
        """The key prefix in Redis (a gateway started elsewhere with `--redis-prefix` this joins the cluster)."""
        return self._prefix

    def __repr__(self) -> str:
        return f"LocalCluster(replicas={self._replicas}, addresses={self.addresses!r})"

    async def start(self) -> list[str]:
        """Start the replicas; return their addresses."""
        if self.gateways:
            return self.addresses
        try:
            for index in range(self._replicas):
                gateway = Gateway(
                    host=self._host,
                    port=self._port + index if self._port else 0,
                    token=self._token,
                    max_message_bytes=self._max_message_bytes,
                    shutdown_grace=self._shutdown_grace,
                    registry=self._registry(),
                    tls_cert_file=self._tls_cert_file,
                    tls_key_file=self._tls_key_file,
                    health_port=self._health_port + index if self._health_port else self._health_port,
                    health_host=self._health_host,
                )
                self.gateways.append(gateway)
                await gateway.start()
        except BaseException:
            await self.stop()
            raise
        return self.addresses

    def _registry(self) -> Registry:
        if self._redis_url is None:
            return InMemoryRegistry()
        return RedisRegistry(self._redis_url, prefix=self._prefix, lease_seconds=self._lease_seconds)

    async def stop_replica(self, index: int, grace: float | None = None) -> None:
        """Stop one replica gracefully (its workers fail over; see `Gateway.stop` for `grace`)."""
        await self.gateways[index].stop(grace)

    async def stop(self) -> None:
        """Stop every replica. Idempotent."""
        for gateway in self.gateways:
            await gateway.stop()
