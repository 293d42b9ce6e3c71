"""`python -m ext.runtime.grpc gateway ...` and the `ext-grpc-gateway` console script."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from ._cluster import LocalCluster
from ._gateway import Gateway
from ._redis_registry import RedisRegistry
from ._registry import InMemoryRegistry, Registry
from ._secrets import read_token_file
from ._wire import DEFAULT_MAX_MESSAGE_BYTES

DEFAULT_GATEWAY_TOKEN_ENV = "EXT_GRPC_GATEWAY_TOKEN"


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Run the ext agent gateway (gRPC).")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=50051, help="port; 0 picks a free one (default 50051)")
    parser.add_argument(
        "--token-env",
        default=DEFAULT_GATEWAY_TOKEN_ENV,
        help=f"environment variable holding the token workers must send (default {DEFAULT_GATEWAY_TOKEN_ENV}; "
        "unset or empty: no authentication)",
    )
    parser.add_argument(
        "--token-file",
        help="file holding the token workers must send (a Kubernetes secret volume, a compose secret; its trailing "
        "newline is dropped); instead of --token-env",
    )
    parser.add_argument("--tls-cert", help="PEM certificate chain file (with --tls-key: serve TLS)")
    parser.add_argument("--tls-key", help="PEM private key file")
    parser.add_argument(
        "--max-message-bytes", type=int, default=DEFAULT_MAX_MESSAGE_BYTES, help="largest message (default 4 MiB)"
    )
    parser.add_argument("--redis-url", help="share the registry with other gateways through this Redis")
    parser.add_argument("--redis-prefix", default="ext", help="key prefix in Redis (default 'ext')")
    parser.add_argument(
        "--lease-seconds", type=float, default=10.0, help="registrations of a dead gateway expire after this"
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=None,
        help="run N gateway replicas sharing one Redis (--redis-url, required for N > 1) on ports "
        "--port, --port+1, ...; prints one host:port per line",
    )
    parser.add_argument("--shutdown-grace", type=float, default=5.0, help="seconds to drain in-flight RPCs")
    parser.add_argument(
        "--health-port",
        type=int,
        default=None,
        help="serve GET /healthz (liveness) and GET /readyz (readiness) over HTTP on this port (default: off; "
        "with --replicas, replica i uses --health-port + i)",
    )
    parser.add_argument("--health-host", help="interface of the health port (default: --host)")
    parser.add_argument(
        "--autogen-listen",
        metavar="HOST:PORT",
        help="also serve AutoGen 0.7's agents.AgentRpc protocol here, for AutoGen's GrpcWorkerAgentRuntime "
        "workers (port 0 picks a free one; prints 'autogen HOST:PORT' after the port line). Plaintext and "
        "without authentication: loopback or a private network only, or behind a TLS proxy (default: off)",
    )
    parser.add_argument(
        "--autogen-allow-unauthenticated",
        action="store_true",
        help="with a token (--token-file, --token-env), let --autogen-listen use an address that is not a loopback "
        "one: any AutoGen client that reaches it, without the token, can then call, send to and publish to every "
        "agent and list the subscriptions (logged as a WARNING). Without it that is refused at startup",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser


async def _run_cluster(args: argparse.Namespace, token: str | None) -> int:
    cluster = LocalCluster(
        args.replicas,
        redis_url=args.redis_url,
        host=args.host,
        port=args.port,
        token=token,
        lease_seconds=args.lease_seconds,
        redis_prefix=args.redis_prefix,
        shutdown_grace=args.shutdown_grace,
        max_message_bytes=args.max_message_bytes,
        tls_cert_file=args.tls_cert,
        tls_key_file=args.tls_key,
        health_port=args.health_port,
        health_host=args.health_host,
    )
    stop = _stop_on_signals()
    try:
        addresses = await cluster.start()
        sys.stdout.write("".join(f"{address}\n" for address in addresses))
        sys.stdout.flush()
        await stop.wait()
    finally:
        await cluster.stop()
    await _let_grpc_tasks_end()
    return 0


def _stop_on_signals() -> asyncio.Event:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _let_grpc_tasks_end() -> None:
    # grpc finishes each closed call in a task of its own. Let those end before `asyncio.run` cancels whatever
    # is left: cancelled there, grpc logs an ERROR with tracebacks although the shutdown was clean.
    others = asyncio.all_tasks() - {asyncio.current_task()}
    if others:
        await asyncio.wait(others, timeout=5.0)


def _token(args: argparse.Namespace) -> str | None:
    """From --token-file, else the --token-env variable; None: no authentication."""
    from_env = os.environ.get(args.token_env) if args.token_env else None
    if args.token_file is None:
        return from_env or None
    if from_env:
        raise ValueError(f"both --token-file and the {args.token_env} variable are set: give one")
    return read_token_file(args.token_file, "--token-file").get_secret_value()


async def _run(args: argparse.Namespace) -> int:
    token = _token(args)
    if args.replicas is not None:
        return await _run_cluster(args, token or None)
    registry: Registry
    if args.redis_url:
        registry = RedisRegistry(args.redis_url, prefix=args.redis_prefix, lease_seconds=args.lease_seconds)
    else:
        registry = InMemoryRegistry()
    gateway = Gateway(
        host=args.host,
        port=args.port,
        token=token or None,
        tls_cert_file=args.tls_cert,
        tls_key_file=args.tls_key,
        max_message_bytes=args.max_message_bytes,
        registry=registry,
        shutdown_grace=args.shutdown_grace,
        health_port=args.health_port,
        health_host=args.health_host,
        autogen_address=args.autogen_listen,
        autogen_allow_unauthenticated=args.autogen_allow_unauthenticated,
    )
    # Signal handlers go in before the port is announced: whoever reads the port may signal at once.
    stop = _stop_on_signals()
    port = await gateway.start()
    # The one line on stdout: whoever started the gateway (a supervisor, a test) reads the bound port here.
    sys.stdout.write(f"{port}\n")
    if gateway.autogen_address is not None:
        sys.stdout.write(f"autogen {gateway.autogen_address}\n")
    sys.stdout.flush()
    await stop.wait()
    await gateway.stop()
    await _let_grpc_tasks_end()
    return 0


def main(argv: Sequence[str] | None = None, prog: str = "ext-grpc-gateway") -> int:
    """Console entry point: run a gateway until SIGINT or SIGTERM, then shut it down gracefully."""
    args = _parser(prog).parse_args(argv)
    if (args.tls_cert is None) != (args.tls_key is None):
        print("error: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    if args.replicas is not None and args.replicas < 1:
        print(f"error: --replicas must be at least 1, got {args.replicas}", file=sys.stderr)
        return 2
    if args.replicas is not None and args.autogen_listen:
        print(
            "error: --autogen-listen serves one gateway; start each replica on its own to serve AutoGen",
            file=sys.stderr,
        )
        return 2
    if args.replicas is not None and args.replicas > 1 and not args.redis_url:
        print(
            f"error: --replicas {args.replicas} needs --redis-url: the replicas share their registry in Redis",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return asyncio.run(_run(args))
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
