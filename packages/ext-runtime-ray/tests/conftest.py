"""One Ray instance for the whole test session (starting one takes seconds): 2 CPUs, no dashboard, no usage
reporting, bound to 127.0.0.1, shut down at the end. Each test's runtimes use a Ray namespace of their own."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # ray_support: agents the actors' workers import by name
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

import ray  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def ray_instance() -> Iterator[str]:
    """The session's Ray; yields its GCS address (for the tests' other driver processes)."""
    if ray.is_initialized():
        ray.shutdown()
    # Ray's workers inherit the environment the driver had when it started Ray: they find ray_support on this path.
    # Only while Ray starts, so the rest of the session's subprocesses are not affected.
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), before]))
    try:
        context = ray.init(
            num_cpus=2,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            namespace="ext-tests",
            logging_level=logging.WARNING,
            log_to_driver=True,
        )
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before
    try:
        yield str(context.address_info["gcs_address"])  # type: ignore[attr-defined]
    finally:
        ray.shutdown()
