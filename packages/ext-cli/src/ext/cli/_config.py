"""`ext config check FILE`: a client or pipeline configuration, validated without building anything."""

from __future__ import annotations

import asyncio

from ext.core import ComponentError, ConfigurationError
from ext.pipeline import PipelineCheck, check_pipeline

from ._errors import CliError


async def check_config_file(path: str) -> list[str]:
    """Check the pipeline `path` describes as `ext.pipeline.load_pipeline` reads it (`check_pipeline`): every
    name, shape, secret, environment variable and setting, with no client built (no model file opened), no
    connection made and no request sent. Errors name the file and the field."""
    try:
        found = await asyncio.to_thread(check_pipeline, path)
    except (ConfigurationError, ComponentError) as exc:
        message = str(exc)
        raise CliError(message if message.startswith(f"{path}:") else f"{path}: {message}") from None
    return _summary(path, found)


def _summary(path: str, found: PipelineCheck) -> list[str]:
    model = f" (model {found.model})" if found.model else ""
    lines = [f"{path}: valid", f"  client: {found.client} from provider {found.provider}{model}"]
    lines.extend(f"  middleware: {kind}" for kind in found.middleware)
    return lines
