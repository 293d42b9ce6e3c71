"""The model loads and embeds with no network: in a fresh interpreter where an audit hook refuses (and records)
every connection, name lookup and datagram, with HOME pointing at an empty folder, so that a download, or a file
cached under ~/.cache by an earlier run, would show. The one IP socket the run opens is urllib3's import-time probe
for IPv6 support (wordllama imports requests), bound to ::1 and never connected: the test holds it to that."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys

    attempts = []
    binds = []
    NETWORK_CALLS = {"socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                     "socket.sendto", "socket.sendmsg", "urllib.Request", "http.client.connect"}

    def refuse_network(event, args):
        if event == "socket.bind":
            binds.append(str(args[1][0]))
        if event in NETWORK_CALLS:
            attempts.append(event)
            raise OSError(f"network blocked by the test: {event}")

    sys.addaudithook(refuse_network)

    from ext.models.wordllama import WordLlamaEmbeddingClient

    async def main():
        async with WordLlamaEmbeddingClient() as client:
            result = await client.embed(["offline text", "another one"])
        return len(result.vectors), len(result.vectors[0])

    count, size = asyncio.run(main())
    print(json.dumps({"count": count, "size": size, "attempts": attempts, "binds": binds}))
    """
)


def test_loads_and_embeds_with_the_network_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["attempts"] == [] and (report["count"], report["size"]) == (2, 256)
    assert set(report["binds"]) <= {"::1"}  # urllib3's IPv6 probe at most
    assert list(home.iterdir()) == []  # nothing cached or downloaded under the user's home
    # Importing wordllama calls logging.basicConfig(INFO); the client's import keeps that from taking effect.
    assert "INFO" not in done.stderr


def test_the_audit_hook_sees_a_connection() -> None:
    # The check above can fail: the same hook catches a real connection attempt (to a closed loopback port).
    script = SCRIPT.split("from ext.models")[0] + textwrap.dedent(
        """
        import socket
        try:
            socket.create_connection(("127.0.0.1", 9), timeout=1)
        except OSError:
            pass
        print(json.dumps({"attempts": attempts}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["attempts"] != []
