"""One Ray instance for the whole test session (starting one takes seconds): 2 CPUs, no dashboard, no usage
reporting, bound to 127.0.0.1, shut down at the end. Each test's runtimes use a Ray namespace of their own."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # ray_support: agents the actors' workers import by name
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

import ray  # noqa: E402


def _start_ray(attempts: int = 3) -> Any:
    """`ray.init` for the session. Its raylet now and then misses Ray's fixed 30 s start-up wait on a busy 2-core
    machine ("The current node timed out during startup"; seen once in a full CI run, the Ray tests then all erred at
    setup): that one failure is tried again on a fresh start, any other error is raised as it is."""
    for attempt in range(1, attempts + 1):
        try:
            return ray.init(
                num_cpus=2,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                namespace="ext-tests",
                logging_level=logging.WARNING,
                log_to_driver=True,
            )
        except Exception as exc:
            if "timed out during startup" not in str(exc) or attempt == attempts:
                raise
            ray.shutdown()
    raise AssertionError("unreachable")


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
        context = _start_ray()
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before
    try:
        yield str(context.address_info["gcs_address"])
    finally:
        ray.shutdown()
