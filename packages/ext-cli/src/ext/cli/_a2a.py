"""`ext a2a serve`: an agent spec or a pipeline file served as an A2A agent (ext-hosting-a2a, uvicorn).

Needs `pip install 'ext-cli[a2a]'`. Tasks are kept in `--store`: a directory (a `FileStateStore`, shared by the
processes of one machine) or a `redis://` URL (a `RedisStateStore`, shared by a cluster); in memory otherwise."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import click

from ._context import State, run_command
from ._errors import CliError

INSTALL_HINT = "pip install 'ext-cli[a2a]'"


@click.group("a2a")
def a2a_group() -> None:
    """Agent2Agent (A2A): serve ext agents to A2A clients."""


@a2a_group.command("serve")
@click.option("--agent", "agent_file", type=click.Path(dir_okay=False, exists=True), help="An agent spec file.")
@click.option("--pipeline", "pipeline_file", type=click.Path(dir_okay=False, exists=True), help="A chat pipeline file.")
@click.option("--name", help="The agent's name on its card (default: the spec's name, or the pipeline file's stem).")
@click.option("--description", help="The agent's description on its card.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=9999, show_default=True, help="Port to listen on.")
@click.option("--url", help="The URL clients reach, written in the card (default: http://HOST:PORT).")
@click.option("--store", help="Where tasks and sessions are kept: a directory or a redis:// URL (default: memory).")
@click.pass_context
def a2a_serve(
    ctx: click.Context,
    agent_file: str | None,
    pipeline_file: str | None,
    name: str | None,
    description: str | None,
    host: str,
    port: int,
    url: str | None,
    store: str | None,
) -> None:
    """Serve an agent spec (--agent) or a pipeline (--pipeline) as an A2A agent until interrupted."""
    state: State = ctx.obj
    if (agent_file is None) == (pipeline_file is None):
        raise click.UsageError("give exactly one of --agent FILE and --pipeline FILE")

    async def go() -> int:
        await serve(
            agent_file=agent_file,
            pipeline_file=pipeline_file,
            name=name,
            description=description,
            host=host,
            port=port,
            url=url,
            store_spec=store,
            info=lambda text: state.out.info(text),
        )
        return 0

    ctx.exit(run_command(ctx, go))


def _imports() -> tuple[Any, Any, Any, Any]:
    try:
        import uvicorn

        from ext.agent import ChatAgent
        from ext.hosting.a2a import a2a_app
        from ext.pipeline import load_pipeline
    except ImportError as exc:
        raise CliError(f"`ext a2a serve` needs {exc.name}", hint=INSTALL_HINT) from None
    return uvicorn, ChatAgent, a2a_app, load_pipeline


def _store(spec: str | None) -> Any:
    if spec is None:
        return None
    if spec.startswith(("redis://", "rediss://")):
        try:
            from ext.redis import RedisStateStore
        except ImportError:
            raise CliError("--store redis://... needs ext-redis", hint="pip install ext-redis") from None
        return RedisStateStore(spec)
    from ext.runtime.local import FileStateStore

    return FileStateStore(spec)


async def serve(
    *,
    agent_file: str | None,
    pipeline_file: str | None,
    name: str | None,
    description: str | None,
    host: str,
    port: int,
    url: str | None,
    store_spec: str | None,
    info: Any,
) -> None:
    uvicorn, chat_agent, a2a_app, load_pipeline = _imports()
    store = _store(store_spec)
    if agent_file is not None:
        agent = chat_agent.from_spec(agent_file, store=store)
    else:
        assert pipeline_file is not None
        agent = chat_agent(
            load_pipeline(pipeline_file),
            name=name or Path(pipeline_file).stem.replace(" ", "_"),
            description=description or "",
            store=store,
        )
    # Bound before the line below is printed: a client that reads it can connect at once.
    sock = socket.create_server((host, port))
    public = url or f"http://{host}:{sock.getsockname()[1]}"
    app = a2a_app(agent, url=public, name=name, description=description, store=store)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    try:
        async with agent:
            info(f"serving {agent.name!r} over A2A at {public} (card: {public}/.well-known/agent-card.json)")
            await server.serve(sockets=[sock])
    finally:
        sock.close()
