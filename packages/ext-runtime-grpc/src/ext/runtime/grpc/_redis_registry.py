"""`RedisRegistry`: the registry shared by gateway replicas through Redis (leases, registrations, placements,
and the pub/sub channels gateways forward to each other on). It reaches Redis through ext-redis's
`RedisConnection` (the `[redis]` extra): a URL without a password, the password from `REDIS_PASSWORD`, a blocking
pool."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from ext.core import AgentId, Subscription, TopicId

from ._redis_subscriptions import RedisSubscriptions
from ._registry import GatewayGone, Inbox, LinkLost, Registry, RegistryUnavailableError, rendezvous

if TYPE_CHECKING:
    from ext.redis import RedisConnection

__all__ = ["RedisRegistry", "check_lease_seconds"]

logger = logging.getLogger(__name__)

_INSTALL_HINT = (
    "RedisRegistry needs ext-redis: pip install 'ext-runtime-grpc[redis]' "
    "(or, from a clone, pip install -e packages/ext-redis)"
)


def check_lease_seconds(value: object) -> float:
    """`lease_seconds` checked: a positive number (a `ValueError` naming it otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"lease_seconds must be a positive number, got {value!r}")
    return float(value)


def _connection(redis: str | RedisConnection) -> RedisConnection:
    try:
        from ext.redis import RedisConnection
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(_INSTALL_HINT) from exc
    if isinstance(redis, RedisConnection):
        return redis
    # A URL: commands time out after 10 s, connecting after 5 s, the password comes from REDIS_PASSWORD.
    return RedisConnection(redis)


# Keeps an existing placement while its worker is registered and its gateway's lease is alive; otherwise
# stores the caller's choice. KEYS: agents hash, type hash. ARGV: agent key, "worker gateway", lease key prefix.
_PLACE_SCRIPT = """
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local sp = string.find(cur, ' ', 1, true)
  if sp then
    local w = string.sub(cur, 1, sp - 1)
    local g = string.sub(cur, sp + 1)
    if redis.call('HEXISTS', KEYS[2], w) == 1 and redis.call('EXISTS', ARGV[3] .. g) == 1 then
      return cur
    end
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return ARGV[2]
"""


# A reconnected worker takes its previous id's placements of one type, if it proves to be the same process.
# KEYS: instances hash (worker -> instance id), type hash, agents hash, suspects set. ARGV: previous id, new id,
# instance id, this gateway. Returns how many placements moved, or -1 when the instance does not match (nothing
# changes). The previous id's gateway becomes a suspect: the sweep keeps checking its lease (its registrations
# may be gone now), so RPCs still waiting on it fail when it is found dead, as before.
_ADOPT_SCRIPT = """
if ARGV[3] == '' or redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[3] then
  return -1
end
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old and old ~= ARGV[4] then
  redis.call('SADD', KEYS[4], old)
end
redis.call('HDEL', KEYS[2], ARGV[1])
local placed = redis.call('HGETALL', KEYS[3])
local prefix = ARGV[1] .. ' '
local moved = 0
for i = 1, #placed, 2 do
  if string.sub(placed[i + 1], 1, #prefix) == prefix then
    redis.call('HSET', KEYS[3], placed[i], ARGV[2] .. ' ' .. ARGV[4])
    moved = moved + 1
  end
end
return moved
"""


class RedisRegistry(Registry):
    """A registry shared by gateway replicas through Redis (needs `ext-runtime-grpc[redis]`).

    Keys (under `prefix`): `gw:<id>` a gateway's lease (expires after `lease_seconds` unless renewed),
    `types` the set of type names, `type:<T>` worker -> gateway, `agents:<T>` key -> "worker gateway",
    `instances` worker -> its process's secret instance id (so a reconnected worker can take its placements),
    `suspects` gateways a worker left by reconnecting elsewhere (checked by the sweep until found dead),
    `subscriptions` the topic subscription table (id -> JSON of kind, topic type or prefix, agent type: see
    `subscription_record`), which belongs to the cluster, not to a gateway: it outlives gateway restarts.
    Channels: `inbox:<gateway id>` for forwarded messages, `events` for cache invalidation. A gateway that dies
    stops renewing its lease; its workers are then ignored at once and swept from the keys by the survivors.

    While Redis cannot be reached, what needs it raises `RegistryUnavailableError`. Each gateway remembers its
    own registrations: when it finds its lease key gone on renewal (Redis restarted empty, or the lease ran out
    and survivors swept it), it writes them again, so the cluster recovers without workers reconnecting.

    `url` is a `redis://` URL without a password (the password comes from `REDIS_PASSWORD`; commands time out
    after 10 s, connecting after 5 s) or an ext-redis `RedisConnection` for other settings.
    """

    def __init__(self, url: str | RedisConnection, *, prefix: str = "ext", lease_seconds: float = 10.0) -> None:
        lease_seconds = check_lease_seconds(lease_seconds)
        self._connection = _connection(url)
        self._prefix = prefix.rstrip(":") + ":"
        self._lease_ms = max(1, int(lease_seconds * 1000))
        self._redis: Any = None
        self._pubsub: Any = None
        self._tasks: list[asyncio.Task[None]] = []
        self._inbox: Inbox | None = None
        self._gateway_gone: GatewayGone | None = None
        self._link_lost: LinkLost | None = None
        self._cache: dict[AgentId, tuple[str, str]] = {}
        self._place: Any = None
        self._adopt: Any = None
        self._subscriptions: RedisSubscriptions | None = None
        # This gateway's registrations (worker -> agent types), written again when Redis lost them.
        self._own: dict[str, set[str]] = {}
        # Set when writing them again failed: the next renewal writes them even though the lease key is there.
        self._must_restore = False
        self._closing = False
        # Health, from the lease renewals (every lease_seconds / 3): when Redis last answered, and the error of
        # the last renewal if it failed.
        self._last_ok = 0.0
        self._last_error = ""
        self._where = self._connection.where

    def _key(self, *parts: str) -> str:
        return self._prefix + ":".join(parts)

    async def start(
        self,
        gateway_id: str,
        inbox: Inbox,
        gateway_gone: GatewayGone | None = None,
        *,
        link_lost: LinkLost | None = None,
    ) -> None:
        await super().start(gateway_id, inbox, gateway_gone, link_lost=link_lost)
        self._inbox = inbox
        self._gateway_gone = gateway_gone
        self._link_lost = link_lost
        # A blocking pool (RedisConnection): a burst of first messages to new agents waits for a free connection
        # rather than failing at the 101st concurrent command.
        self._redis = self._connection.client()
        await self._renew()
        self._last_ok = time.monotonic()
        # A registered script re-loads itself when the server lost it (a restarted Redis).
        self._place = self._redis.register_script(_PLACE_SCRIPT)
        self._adopt = self._redis.register_script(_ADOPT_SCRIPT)
        self._subscriptions = RedisSubscriptions(self._redis, self._key("subscriptions"), self._unavailable)
        self._pubsub = self._redis.pubsub()
        await self._pubsub.subscribe(self._key("inbox", gateway_id), self._key("events"))
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._listen()), loop.create_task(self._keep_lease())]

    async def close(self) -> None:
        # The loops also check this flag: redis-py can swallow a cancellation that lands inside one of its calls
        # (the loop then goes on as after an error, and `close` would wait for it forever).
        self._closing = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        if self._redis is not None:
            with contextlib.suppress(Exception):
                await self._redis.delete(self._key("gw", self.gateway_id))
                await self._redis.publish(self._key("events"), f"gateway {self.gateway_id}")
            if self._pubsub is not None:
                with contextlib.suppress(Exception):
                    await self._pubsub.aclose()
            await self._redis.aclose()
            self._redis = None
            self._subscriptions = None

    def _unavailable(self, exc: BaseException) -> RegistryUnavailableError:
        return RegistryUnavailableError(
            f"the registry (Redis at {self._where}) is unreachable: {type(exc).__name__}: {exc}"
        )

    async def _renew(self) -> bool:
        """Renew the lease; False when the key was gone (a new lease: Redis lost it, or it ran out)."""
        previous = await self._redis.set(self._key("gw", self.gateway_id), "1", px=self._lease_ms, get=True)
        return previous is not None

    async def _keep_lease(self) -> None:
        interval = self._lease_ms / 1000 / 3
        while not self._closing:
            await asyncio.sleep(interval)
            try:
                if (not await self._renew() or self._must_restore) and self._own:
                    await self._restore()
                self._must_restore = False
            except Exception as exc:
                # Logged once per outage (with its traceback), not every interval.
                if not self._last_error:
                    logger.warning("the registry (Redis at %s) did not answer", self._where, exc_info=True)
                self._last_error = f"{type(exc).__name__}: {exc}"
                continue
            if self._last_error:
                logger.warning("the registry (Redis at %s) answers again", self._where)
            self._last_ok = time.monotonic()
            self._last_error = ""
            try:
                await self._sweep()
            except Exception:
                logger.exception("sweeping dead gateways' registrations from Redis failed")

    async def _reassert(self) -> None:
        """Write this gateway's lease and registrations now; when Redis does not answer, the next successful
        renewal writes them (`_must_restore`)."""
        try:
            await self._renew()
            if self._own:
                await self._restore()
        except Exception as exc:
            self._must_restore = True
            logger.warning("gateway %s could not write its registrations again yet: %s", self.gateway_id, exc)
        else:
            self._must_restore = False

    async def _restore(self) -> None:
        """Write this gateway's registrations again (the lease key was gone, so they may be too)."""
        pipe = self._redis.pipeline()
        for worker_id, agent_types in self._own.items():
            for agent_type in agent_types:
                pipe.sadd(self._key("types"), agent_type)
                pipe.hset(self._key("type", agent_type), worker_id, self.gateway_id)
        await pipe.execute()
        count = sum(len(t) for t in self._own.values())
        logger.warning("gateway %s wrote its %d registration(s) to the registry again", self.gateway_id, count)

    def health_problem(self) -> str | None:
        if self._redis is None:
            return f"the registry (Redis at {self._where}) is not connected"
        if self._last_error:
            return f"the registry (Redis at {self._where}) did not answer: {self._last_error}"
        silent = time.monotonic() - self._last_ok
        if silent > self._lease_ms / 1000:
            return f"the registry (Redis at {self._where}) has not answered for {silent:.1f} s"
        return None

    async def _sweep(self) -> None:
        """Drop the registrations of gateways whose lease ran out (their process died without cleaning up)."""
        types = await self._redis.smembers(self._key("types"))
        gateways: set[str] = set()
        entries: dict[str, dict[str, str]] = {}
        for raw_type in types:
            agent_type = raw_type.decode()
            workers = {
                k.decode(): v.decode() for k, v in (await self._redis.hgetall(self._key("type", agent_type))).items()
            }
            entries[agent_type] = workers
            gateways.update(workers.values())
        suspects = {s.decode() for s in await self._redis.smembers(self._key("suspects"))}
        gateways.update(suspects)
        alive = await self._alive(gateways)
        dead = gateways - alive
        if dead & suspects:
            await self._redis.srem(self._key("suspects"), *(dead & suspects))
        for gateway in dead:
            for agent_type, workers in entries.items():
                gone = [w for w, g in workers.items() if g == gateway]
                if gone:
                    await self._redis.hdel(self._key("type", agent_type), *gone)
                    await self._redis.hdel(self._key("instances"), *gone)
                    await self._drop_placements(agent_type, set(gone))
            await self._redis.publish(self._key("events"), f"gateway {gateway}")

    async def _alive(self, gateways: set[str]) -> set[str]:
        if not gateways:
            return set()
        ordered = sorted(gateways)
        flags = await self._redis.mget([self._key("gw", g) for g in ordered])
        return {g for g, flag in zip(ordered, flags, strict=True) if flag is not None}

    async def _drop_placements(self, agent_type: str, workers: set[str]) -> None:
        placed = await self._redis.hgetall(self._key("agents", agent_type))
        stale = [k for k, v in placed.items() if v.decode().split(" ", 1)[0] in workers]
        if stale:
            await self._redis.hdel(self._key("agents", agent_type), *stale)

    async def _listen(self) -> None:
        inbox_channel = self._key("inbox", self.gateway_id).encode()
        broken = False
        while not self._closing:
            try:
                item = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # redis-py reconnects and subscribes again on the next read. What other gateways published to
                # this one meanwhile (answers to our RPCs among them) is lost: the gateway fails those RPCs now.
                # Logged once per outage (with the traceback), then quietly until Redis is back.
                if not broken:
                    broken = True
                    logger.warning("reading from Redis pub/sub failed; retrying", exc_info=exc)
                    await self._tell_link_lost(f"the link to the registry (Redis at {self._where}) broke")
                await asyncio.sleep(0.2)
                continue
            if broken:
                # Subscribed again. Answers published before that went nowhere: fail what may be waiting on one.
                broken = False
                logger.warning("reading from Redis pub/sub works again")
                await self._tell_link_lost(f"the link to the registry (Redis at {self._where}) broke and came back")
            if item is None:
                continue
            channel, data = item["channel"], item["data"]
            if channel == inbox_channel:
                assert self._inbox is not None
                try:
                    await self._inbox(data)
                except Exception:
                    logger.exception("handling a message forwarded by another gateway failed")
            else:
                await self._on_event(data.decode())

    async def _tell_link_lost(self, reason: str) -> None:
        if self._link_lost is not None:
            try:
                await self._link_lost(reason)
            except Exception:
                logger.exception("failing the RPCs waiting on other gateways failed")

    def forget_gateway(self, gateway_id: str) -> None:
        self._cache = {a: t for a, t in self._cache.items() if t[1] != gateway_id}

    async def _on_event(self, event: str) -> None:
        kind, _, ident = event.partition(" ")
        if kind == "worker":
            self._cache = {a: t for a, t in self._cache.items() if t[0] != ident}
        elif kind == "gateway":
            if ident == self.gateway_id:
                # Another replica's sweep found this gateway's lease gone (Redis restarted empty, or renewals
                # were late) and announced it dead, dropping its registrations. It is alive: it keeps its
                # placements, and writes its lease and registrations back now.
                await self._reassert()
                return
            self.forget_gateway(ident)
            if self._gateway_gone is not None:
                await self._gateway_gone(ident)

    # --- Registry ----------------------------------------------------------------------------------------

    async def add(self, worker_id: str, agent_type: str, *, instance: str = "") -> None:
        # The lease is written with the registration, in one transaction: no replica ever sees this gateway's
        # registration without its lease. Otherwise, after Redis restarted empty and before this gateway's next
        # renewal, another replica's sweep would take it for dead, drop its registrations and announce it gone.
        pipe = self._redis.pipeline(transaction=True)
        pipe.set(self._key("gw", self.gateway_id), "1", px=self._lease_ms, get=True)
        pipe.sadd(self._key("types"), agent_type)
        pipe.hset(self._key("type", agent_type), worker_id, self.gateway_id)
        if instance:
            pipe.hset(self._key("instances"), worker_id, instance)
        try:
            previous = (await pipe.execute())[0]
        except Exception as exc:
            raise self._unavailable(exc) from exc
        self._own.setdefault(worker_id, set()).add(agent_type)
        if previous is None:
            # A new lease: Redis lost the old one (restarted empty), and with it this gateway's other
            # registrations. Written back now rather than at the next renewal.
            await self._reassert()

    async def adopt(self, previous: str, worker_id: str, agent_type: str, instance: str) -> None:
        try:
            moved = await self._adopt(
                keys=[
                    self._key("instances"),
                    self._key("type", agent_type),
                    self._key("agents", agent_type),
                    self._key("suspects"),
                ],
                args=[previous, worker_id, instance, self.gateway_id],
            )
            if moved < 0:
                logger.warning("worker %s claimed to be %s without its instance id: ignored", worker_id, previous)
                return
            # Every gateway forgets what it cached about the previous id (this one too, through the event).
            self._cache = {a: t for a, t in self._cache.items() if t[0] != previous}
            await self._redis.publish(self._key("events"), f"worker {previous}")
        except Exception as exc:
            raise self._unavailable(exc) from exc
        if moved:
            logger.info("worker %s (was %s) took its %d %r placement(s)", worker_id, previous, moved, agent_type)

    async def remove_worker(self, worker_id: str) -> None:
        self._own.pop(worker_id, None)  # first: even if Redis is unreachable now, it is not restored later
        self._cache = {a: t for a, t in self._cache.items() if t[0] != worker_id}
        try:
            await self._redis.hdel(self._key("instances"), worker_id)
            types = await self._redis.smembers(self._key("types"))
            for raw_type in types:
                agent_type = raw_type.decode()
                if await self._redis.hdel(self._key("type", agent_type), worker_id):
                    await self._drop_placements(agent_type, {worker_id})
            await self._redis.publish(self._key("events"), f"worker {worker_id}")
        except Exception as exc:
            raise self._unavailable(exc) from exc

    async def workers_for(self, agent_type: str) -> list[tuple[str, str]]:
        try:
            raw = await self._redis.hgetall(self._key("type", agent_type))
            workers = [(k.decode(), v.decode()) for k, v in raw.items()]
            alive = await self._alive({g for _, g in workers})
        except Exception as exc:
            raise self._unavailable(exc) from exc
        return sorted((w, g) for w, g in workers if g in alive)

    def lookup(self, agent_id: AgentId) -> tuple[str, str] | None:
        return self._cache.get(agent_id)

    async def place(self, agent_id: AgentId) -> tuple[str, str] | None:
        cached = self._cache.get(agent_id)
        if cached is not None:
            return cached
        workers = await self.workers_for(agent_id.type)
        if not workers:
            return None
        owners = dict(workers)
        choice = rendezvous(agent_id, list(owners))
        try:
            result = await self._place(
                keys=[self._key("agents", agent_id.type), self._key("type", agent_id.type)],
                args=[agent_id.key, f"{choice} {owners[choice]}", self._key("gw", "")],
            )
        except Exception as exc:
            raise self._unavailable(exc) from exc
        worker, _, gateway = result.decode().partition(" ")
        self._cache[agent_id] = (worker, gateway)
        return worker, gateway

    async def agents(self, agent_type: str | None = None) -> list[AgentId]:
        try:
            return await self._agents(agent_type)
        except RegistryUnavailableError:
            raise
        except Exception as exc:
            raise self._unavailable(exc) from exc

    async def _agents(self, agent_type: str | None) -> list[AgentId]:
        if agent_type is None:
            types = sorted(t.decode() for t in await self._redis.smembers(self._key("types")))
        else:
            types = [agent_type]
        found: list[AgentId] = []
        for name in types:
            placed = await self._redis.hgetall(self._key("agents", name))
            if not placed:
                continue
            values = {k.decode(): v.decode() for k, v in placed.items()}
            live_workers = {w for w, _ in await self.workers_for(name)}
            found.extend(AgentId(name, k) for k, v in values.items() if v.split(" ", 1)[0] in live_workers)
        return sorted(found, key=lambda a: (a.type, a.key))

    async def publish(self, gateway_id: str, payload: bytes) -> None:
        try:
            receivers = await self._redis.publish(self._key("inbox", gateway_id), payload)
        except Exception as exc:
            raise self._unavailable(exc) from exc
        if not receivers:
            raise LookupError(f"gateway {gateway_id!r} is not listening (it stopped or its lease ran out)")

    # --- topic subscriptions (`RedisSubscriptions`) ---------------------------------------------------

    def _table(self) -> RedisSubscriptions:
        if self._subscriptions is None:
            raise RegistryUnavailableError(f"the registry (Redis at {self._where}) is not connected")
        return self._subscriptions

    async def add_subscription(self, subscription: Subscription) -> Subscription:
        return await self._table().add(subscription)

    async def remove_subscription(self, id: str) -> None:
        await self._table().remove(id)

    async def subscriptions(self) -> list[Subscription]:
        return await self._table().all()

    async def recipients(self, topic_id: TopicId) -> list[AgentId]:
        return await self._table().recipients(topic_id)
