"""`python -m ext.runtime.grpc.testing load-worker ...`: a load worker process (see `LoadWorkerProcess`)."""

from __future__ import annotations

import sys

from ._load import worker_main


def _main(argv: list[str]) -> int:
    if not argv or argv[0] != "load-worker":
        print("usage: python -m ext.runtime.grpc.testing load-worker --name N --address H:P [...]", file=sys.stderr)
        return 2
    return worker_main(argv[1:])


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
