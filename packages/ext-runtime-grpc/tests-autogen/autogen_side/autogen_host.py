"""AutoGen's own host (`GrpcWorkerAgentRuntimeHost`, autogen-ext 0.7.5): the reference the tests compare ext's
gateway with. Runs with the `autogen` hatch environment's python.

Usage: python autogen_host.py PORT   (prints {"event": "ready"} once listening on 127.0.0.1:PORT, serves until
killed or stdin closes)
"""

from __future__ import annotations

import asyncio
import json
import sys

import grpc
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntimeHost


async def main(port: int) -> None:
    host = GrpcWorkerAgentRuntimeHost(address=f"127.0.0.1:{port}")
    host.start()
    # start() only schedules the server: ready means a channel to it connects (a readiness probe, not a guess).
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        await asyncio.wait_for(channel.channel_ready(), 10)
    sys.stdout.write(json.dumps({"event": "ready"}) + "\n")
    sys.stdout.flush()
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await host.stop(grace=0)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
