"""`python -m ext.runtime.grpc gateway [options]`."""

from __future__ import annotations

import sys

from ._cli import main


def _entry(argv: list[str]) -> int:
    if not argv or argv[0] != "gateway":
        print(
            "usage: python -m ext.runtime.grpc gateway [--host H] [--port N] [...]  (gateway --help for more)",
            file=sys.stderr,
        )
        return 2
    return main(argv[1:], prog="python -m ext.runtime.grpc gateway")


if __name__ == "__main__":
    raise SystemExit(_entry(sys.argv[1:]))
