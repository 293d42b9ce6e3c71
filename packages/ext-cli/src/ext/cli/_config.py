"""`ext config check FILE`: a client or pipeline configuration, validated without calling any model."""

from __future__ import annotations

import asyncio

from ext.core import ChatPipeline, ComponentError, ConfigurationError, load_pipeline

from ._errors import CliError


async def check_config_file(path: str) -> list[str]:
    """Build the pipeline `path` describes (a client and its middleware, as `ext.core.load_pipeline` reads it) and
    close it again: every name, value and environment variable is checked, and no request is sent."""
    try:
        pipeline = await asyncio.to_thread(load_pipeline, path)
    except (ConfigurationError, ComponentError) as exc:
        raise CliError(f"{path}: {exc}") from None
    try:
        return _summary(path, pipeline)
    finally:
        await pipeline.close()


def _summary(path: str, pipeline: ChatPipeline) -> list[str]:
    client = pipeline.client
    lines = [f"{path}: valid", f"  client: {type(client).__name__} (model {pipeline.model})"]
    for middleware in pipeline.middleware:
        lines.append(f"  middleware: {type(middleware).__name__}")
    return lines
