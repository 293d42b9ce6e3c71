"""The deployment examples' worker: hosts agent type `echo`, whose agents answer an `Echo` with the same text.

A starting point for your own worker: replace `EchoAgent` with your agents. Configured by environment variables,
which the compose file and the Kubernetes manifests set:

    EXT_GATEWAYS              comma-separated host:port of the gateway replicas; the worker connects to the first
                              that answers and fails over to the others
    EXT_GRPC_TOKEN_FILE       file holding the gateway's token (or EXT_GRPC_TOKEN, the token itself)
    EXT_GRPC_CA_FILE          PEM CA bundle: connect with TLS trusting it (unset: plaintext)
    EXT_GRPC_TLS_SERVER_NAME  the name checked in the gateway's certificate (default: the host of the address)

Runs until SIGTERM or SIGINT, then stops gracefully (its handlers finish, the gateway forgets its agents).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

from pydantic import BaseModel

from ext.core import MessageContext, RoutedAgent, message_handler
from ext.runtime.grpc import GrpcAgentRuntime

logger = logging.getLogger("echo_worker")


class Echo(BaseModel):
    text: str


# The name `Echo` travels under on the wire. Explicit, because the default is module-qualified and this module
# runs as `__main__` here but is imported under its own name by clients that send `Echo`.
ECHO_TYPE = "ext.examples.Echo"


class EchoAgent(RoutedAgent):
    @message_handler
    async def on_echo(self, message: Echo, ctx: MessageContext) -> Echo:
        return Echo(text=message.text)


def runtime_from_environment() -> GrpcAgentRuntime:
    """A `GrpcAgentRuntime` configured from the variables above (raises `ValueError` naming a bad one)."""
    addresses = [a.strip() for a in os.environ.get("EXT_GATEWAYS", "").split(",") if a.strip()]
    if not addresses:
        raise ValueError("EXT_GATEWAYS must list the gateways as host:port,host:port")
    ca_file = os.environ.get("EXT_GRPC_CA_FILE")
    try:
        root_certificates = Path(ca_file).read_bytes() if ca_file else None
    except OSError as exc:
        raise ValueError(f"EXT_GRPC_CA_FILE {ca_file!r} cannot be read: {exc.strerror}") from None
    runtime = GrpcAgentRuntime(
        addresses,
        root_certificates=root_certificates,
        tls_server_name=os.environ.get("EXT_GRPC_TLS_SERVER_NAME") or None,
    )
    runtime.register_message_type(Echo, ECHO_TYPE)
    return runtime


async def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    runtime = runtime_from_environment()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with runtime:
        await runtime.register_agent_factory("echo", EchoAgent)
        logger.info("hosting agent type 'echo' through %s", runtime.address)
        print("ready", flush=True)  # for supervisors and tests that wait for registration
        await stop.wait()
    logger.info("stopped")


if __name__ == "__main__":
    asyncio.run(main())
