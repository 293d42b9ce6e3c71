"""`ext config check FILE`: a pipeline file, or an agent spec file (ext-agent), validated without building anything."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ext.core import ComponentError, ConfigurationError
from ext.pipeline import PipelineCheck, check_pipeline, read_config_file

from ._errors import CliError

if TYPE_CHECKING:
    from ext.agent import AgentSpecCheck


async def check_config_file(path: str) -> list[str]:
    """Check the pipeline `path` describes as `ext.pipeline.load_pipeline` reads it (`check_pipeline`), or the
    agent it declares as `ChatAgent.from_spec` reads it (`check_agent_spec`: a file with `model:` rather than
    `client:`): every name, shape, secret, environment variable and setting, with no client built (no model file
    opened), no server started, no connection made and no request sent. Errors name the file and the field."""
    try:
        document = await asyncio.to_thread(read_config_file, path)
        if "client" not in document and "model" in document:
            return _agent_summary(path, await asyncio.to_thread(_check_agent, path))
        found = await asyncio.to_thread(check_pipeline, path)
    except (ConfigurationError, ComponentError) as exc:
        message = str(exc)
        raise CliError(message if message.startswith(f"{path}:") else f"{path}: {message}") from None
    return _summary(path, found)


def _check_agent(path: str) -> AgentSpecCheck:
    try:
        from ext.agent import check_agent_spec
    except ImportError:
        raise CliError(
            f"{path} is an agent spec, and checking one needs ext-agent, which is not installed",
            hint="pip install -e 'packages/ext-cli[agent]' (from a clone)",
        ) from None
    return check_agent_spec(path)


def _summary(path: str, found: PipelineCheck) -> list[str]:
    model = f" (model {found.model})" if found.model else ""
    lines = [f"{path}: valid", f"  client: {found.client} from provider {found.provider}{model}"]
    lines.extend(f"  middleware: {kind}" for kind in found.middleware)
    return lines


def _agent_summary(path: str, found: AgentSpecCheck) -> list[str]:
    lines = [f"{path}: valid agent spec", f"  agent: {found.name}"]
    lines.extend(_summary(path, found.model)[1:])
    lines.extend(f"  tool: {tool}" for tool in found.tools)
    if found.memory:
        lines.append("  memory: yes")
    if found.output is not None:
        lines.append(f"  output: {', '.join(found.output)}")
    if found.require_approval:
        lines.append(f"  approval: {', '.join(found.require_approval)}")
    return lines
