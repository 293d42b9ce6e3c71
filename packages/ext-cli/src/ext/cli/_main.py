"""The `ext` command."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from .__about__ import __version__
from ._a2a import a2a_group
from ._context import State, run_command
from ._errors import CliError
from ._eval import eval_command
from ._mcp_auth import add_commands as add_mcp_auth_commands


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ext")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.option("-q", "--quiet", is_flag=True, help="Only the answer: no progress, tool calls or usage on stderr.")
@click.pass_context
def cli(ctx: click.Context, debug: bool, quiet: bool) -> None:
    """ext: chat with any installed model, with tools; inspect MCP servers; run the agent gateway."""
    ctx.obj = State(debug, quiet)
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, stream=sys.stderr)


# --- chat -------------------------------------------------------------------------------------------


@cli.command()
@click.argument("question", required=False)
@click.option("-m", "--model", "model", help="PROVIDER:MODEL, e.g. openai:gpt-4o-mini (default: the embedded model).")
@click.option(
    "--endpoint",
    metavar="URL",
    help="The provider's endpoint (default: its environment variable, e.g. AZURE_AI_ENDPOINT; ext models PROVIDER).",
)
@click.option("-s", "--system", help="System prompt.")
@click.option("-o", "--option", "options", multiple=True, metavar="KEY=VALUE", help="A ChatOptions field.")
@click.option("--json", "json_mode", is_flag=True, help="Ask for a JSON answer.")
@click.option("--schema", help="Structured output: 'name, age int', a JSON Schema file, or module:PydanticModel.")
@click.option("--mcp", "mcp_servers", multiple=True, metavar="CMD|URL", help="An MCP server's tools.")
@click.option("--http-tool", "http_tools", multiple=True, metavar="FILE", help="An HttpTool config (JSON).")
@click.option("--tool", "function_tools", multiple=True, metavar="MODULE:FUNCTION", help="A Python function.")
@click.option("--max-iterations", default=8, show_default=True, help="Most model turns in the tool loop.")
@click.option(
    "--tool-choice",
    default="auto",
    show_default=True,
    metavar="auto|required|none|TOOL",
    help="Whether the model must call a tool on its first turn (small models often need 'required').",
)
@click.option(
    "--memory",
    "memory_db",
    metavar="DB",
    help="Answer with the memories of this `ext memory` database ('default': the one ext memory uses by default).",
)
@click.option("--collection", default="memory", show_default=True, help="The memory's collection (with --memory).")
@click.option("--embedder", metavar="PROVIDER:MODEL", help="The memory's embedder (default: wordllama, embedded).")
@click.option(
    "--agent", "agent_spec", metavar="FILE", help="Chat with the agent an agent spec file declares (ext-agent)."
)
@click.option("--session", "session_id", metavar="ID", help="The agent's session (with --agent; default: a new one).")
@click.pass_context
def chat(
    ctx: click.Context,
    question: str | None,
    model: str | None,
    endpoint: str | None,
    system: str | None,
    options: Sequence[str],
    json_mode: bool,
    schema: str | None,
    mcp_servers: Sequence[str],
    http_tools: Sequence[str],
    function_tools: Sequence[str],
    max_iterations: int,
    tool_choice: str,
    memory_db: str | None,
    collection: str,
    embedder: str | None,
    agent_spec: str | None,
    session_id: str | None,
) -> None:
    """Ask QUESTION and stream the answer; with no QUESTION, chat interactively."""
    from ._chat import ChatSettings, parse_options, run_chat
    from ._defaults import DEFAULT_MODEL_SETTINGS, default_model_spec
    from ._memory import MemorySettings
    from ._schema import schema_model
    from ._tools import function_tool, http_tool, mcp_workbench

    state: State = ctx.obj

    async def go() -> int:
        if agent_spec is not None:
            from ._agent_cli import run_agent_chat

            given = [
                flag
                for flag, value in _hand_built_flags(
                    model,
                    endpoint,
                    system,
                    options,
                    json_mode,
                    schema,
                    mcp_servers,
                    http_tools,
                    function_tools,
                    memory_db,
                )
                if value
            ]
            if given:
                raise CliError(f"{given[0]} goes without --agent", hint="the agent spec file declares the agent")
            return await run_agent_chat(agent_spec, question, state.out, session_id=session_id)
        if session_id is not None:
            raise CliError("--session names a session of --agent", hint="add --agent FILE")
        if json_mode and schema:
            raise CliError("--json and --schema go separately", hint="--schema already asks for JSON")
        if memory_db is None and (embedder is not None or collection != "memory"):
            raise CliError("--collection and --embedder choose the memory of --memory", hint="add --memory DB")
        settings = ChatSettings(
            model=model or default_model_spec(),
            client_settings=DEFAULT_MODEL_SETTINGS if model is None else {},
            endpoint=endpoint,
            system=system,
            options=parse_options(options),
            json_output=schema_model(schema) if schema else (True if json_mode else None),
            tools=[*(http_tool(p) for p in http_tools), *(function_tool(s) for s in function_tools)],
            workbenches=[mcp_workbench(s) for s in mcp_servers],
            max_iterations=max_iterations,
            tool_choice=tool_choice,
            memory=None
            if memory_db is None
            else MemorySettings(
                db=None if memory_db == "default" else memory_db, collection=collection, embedder=embedder
            ),
        )
        return await run_chat(settings, question, state.out)

    ctx.exit(run_command(ctx, go))


def _hand_built_flags(*values: object) -> list[tuple[str, object]]:
    """The flags that build a chat by hand, paired with their values (refused beside --agent)."""
    flags = ("-m", "--endpoint", "-s", "-o", "--json", "--schema", "--mcp", "--http-tool", "--tool", "--memory")
    return list(zip(flags, values, strict=True))


# --- models -----------------------------------------------------------------------------------------


@cli.command()
@click.argument("provider", required=False)
@click.pass_context
def models(ctx: click.Context, provider: str | None) -> None:
    """List installed providers; with PROVIDER, its options and defaults."""
    from ._providers import client_class, declaration, describe, installed_providers

    state: State = ctx.obj
    out = state.out

    async def go() -> int:
        if provider is not None:
            cls = client_class(provider)
            info = declaration(provider)
            name = info.name if info is not None else provider
            out.answer(f"{name}: {cls.__module__}.{cls.__qualname__}\n")
            if info is not None:
                out.answer(f"  example: ext chat -m {info.name}:{info.example_model} ...\n  auth: {info.auth}\n")
                if info.endpoint_env:
                    out.answer(f"  endpoint: --endpoint URL, or {info.endpoint_env}\n")
                out.answer(f"  install: {info.install_hint}\n")
            for option, default, description in describe(cls):
                out.answer(f"  {option} = {default}    {description}\n")
            return 0
        for info in installed_providers().values():
            out.answer(
                f"{info.name}: installed ({info.distribution}; -m {info.name}:{info.example_model}; {info.auth})\n"
            )
        out.info(
            "Other providers: each comes with its distribution (the README's table lists them). They are not on "
            "the package index yet: from the root of a clone, pip install -e packages/<distribution>."
        )
        return 0

    ctx.exit(run_command(ctx, go))


# --- mcp --------------------------------------------------------------------------------------------


@cli.group()
def mcp() -> None:
    """Inspect an MCP server: SERVER is a command line ('npx -y @modelcontextprotocol/server-memory') or a URL."""


@mcp.command("tools")
@click.argument("server")
@click.pass_context
def mcp_tools(ctx: click.Context, server: str) -> None:
    """List the server's tools and their arguments."""
    from ._mcp import list_tools

    state: State = ctx.obj

    async def go() -> int:
        await list_tools(server, state.out)
        return 0

    ctx.exit(run_command(ctx, go))


@mcp.command("call")
@click.argument("server")
@click.argument("tool")
@click.argument("arguments", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--json", "raw_json", help="The arguments as one JSON object.")
@click.pass_context
def mcp_call(ctx: click.Context, server: str, tool: str, arguments: Sequence[str], raw_json: str | None) -> None:
    """Call TOOL with arguments and print its result."""
    from ._mcp import call_tool, parse_arguments

    state: State = ctx.obj
    ctx.exit(run_command(ctx, lambda: call_tool(server, tool, parse_arguments(arguments, raw_json), state.out)))


@mcp.command("resources")
@click.argument("server")
@click.option("--read", metavar="URI", help="Print this resource instead of listing.")
@click.pass_context
def mcp_resources(ctx: click.Context, server: str, read: str | None) -> None:
    """List the server's resources (or read one)."""
    from ._mcp import list_resources

    state: State = ctx.obj

    async def go() -> int:
        await list_resources(server, read, state.out)
        return 0

    ctx.exit(run_command(ctx, go))


@mcp.command("prompts")
@click.argument("server")
@click.option("--get", metavar="NAME", help="Render this prompt instead of listing.")
@click.argument("arguments", nargs=-1, metavar="[KEY=VALUE]...")
@click.pass_context
def mcp_prompts(ctx: click.Context, server: str, get: str | None, arguments: Sequence[str]) -> None:
    """List the server's prompts (or render one with --get NAME key=value ...)."""
    from ._mcp import list_prompts, parse_arguments

    state: State = ctx.obj

    async def go() -> int:
        await list_prompts(server, get, parse_arguments(arguments, None), state.out)
        return 0

    ctx.exit(run_command(ctx, go))


# `ext mcp login` / `ext mcp logout` (OAuth), declared in their own module.
add_mcp_auth_commands(mcp)


@mcp.command("serve")
@click.option("--tool", "tools", multiple=True, metavar="MODULE:FUNCTION", help="Serve this function as a tool.")
@click.option("--http-tool", "http_tools", multiple=True, metavar="FILE", help="Serve an HttpTool (JSON file).")
@click.option("--mcp", "mcp_servers", multiple=True, metavar="SERVER", help="Serve the tools of this MCP server.")
@click.option("--pipeline", metavar="FILE", help="Serve this pipeline file as one tool (question in, answer out).")
@click.option("--pipeline-tool", default="ask", show_default=True, help="The pipeline tool's name.")
@click.option("--agent", metavar="FILE", help="Serve the agent of this spec as one tool (needs ext-agent).")
@click.option("--http", "use_http", is_flag=True, help="Streamable HTTP instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--redis", "redis_url", metavar="URL", help="Keep sessions and resumable streams in Redis (--http).")
@click.option("--token-env", metavar="VAR", help="Require this variable's value as bearer token (--http).")
@click.option("--idle-timeout", default=1800.0, show_default=True, type=float, help="Seconds an idle session lives.")
@click.option("--allowed-host", "allowed_hosts", multiple=True, help="A Host value to accept besides loopback names.")
@click.pass_context
def mcp_serve(ctx: click.Context, /, use_http: bool, redis_url: str | None, **options: Any) -> None:
    """Serve tools, a pipeline or an agent over MCP (stdio by default; --http for streamable HTTP)."""
    from ._mcp_serve import ServeSettings, serve

    state: State = ctx.obj
    settings = ServeSettings(transport="http" if use_http else "stdio", redis_url=redis_url, **options)
    ctx.exit(run_command(ctx, lambda: serve(settings, state.out)))


# --- gateway ----------------------------------------------------------------------------------------


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def gateway(ctx: click.Context, args: Sequence[str]) -> None:
    """Run the gRPC agent gateway (the ext-grpc-gateway command; --help lists its options)."""
    try:
        from ext.runtime.grpc import gateway_main
    except ImportError:
        state: State = ctx.obj
        state.out.err.print("[bold red]error:[/] ext-runtime-grpc is not installed")
        state.out.err.print(
            "[yellow]hint:[/] install it (from a clone: pip install -e 'packages/ext-cli[grpc]', "
            "or pip install -e packages/ext-runtime-grpc)"
        )
        ctx.exit(1)
    ctx.exit(gateway_main(list(args), prog="ext gateway"))


# --- memory ----------------------------------------------------------------------------------------


def _memory_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--db, --collection and --embedder: where a memory lives and what embeds it (the same for every subcommand,
    so a query embeds with what the documents were added with)."""
    command = click.option(
        "--embedder",
        metavar="PROVIDER:MODEL",
        help="wordllama (the default: embedded, offline), smollm2 (embedded, slow) or an installed provider's.",
    )(command)
    command = click.option("--collection", default="memory", show_default=True, help="The collection in the file.")(
        command
    )
    return click.option("--db", metavar="PATH", help="The SQLite file (default: memory.db in ext's data directory).")(
        command
    )


@cli.group()
def memory() -> None:
    """A vector memory of your documents: add files, search them, answer from them (ext chat --memory)."""


@memory.command("add")
@click.argument("files", nargs=-1, required=True, metavar="PATHS...")
@_memory_options
@click.option("--include", multiple=True, metavar="GLOB", help="In folders, read only files matching (repeatable).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="In folders, leave out files and folders matching.")
# The defaults are ext-memory's (DEFAULT_CHUNK_SIZE, ...; a test holds them equal), written out so that --help
# does not import the library.
@click.option("--chunk-size", default=100, show_default=True, help="Words per chunk at most.")
@click.option("--overlap", default=20, show_default=True, help="Words a chunk shares with the one before.")
@click.option("--max-chars", default=1000, show_default=True, help="Characters per chunk at most.")
@click.pass_context
def memory_add(
    ctx: click.Context,
    files: Sequence[str],
    db: str | None,
    collection: str,
    embedder: str | None,
    include: Sequence[str],
    exclude: Sequence[str],
    chunk_size: int,
    overlap: int,
    max_chars: int,
) -> None:
    """Chunk, embed and store PATHS: files, and folders (recursively). Text, Markdown, HTML and PDF are read; any
    other file is skipped saying why. A file is stored under its absolute path: adding it again (by any path)
    replaces it, or does nothing when it has not changed."""
    from ._memory import MemorySettings, add_files

    state: State = ctx.obj
    settings = MemorySettings(
        db, collection, embedder, chunk_size=chunk_size, chunk_overlap=overlap, max_chunk_chars=max_chars
    )
    ctx.exit(run_command(ctx, lambda: add_files(settings, files, state.out, include=include, exclude=exclude)))


@memory.command("query")
@click.argument("text")
@_memory_options
@click.option("-k", "top_k", default=5, show_default=True, help="How many memories.")
@click.option("--min-score", type=float, help="Leave out memories scoring lower (cosine similarity, -1 to 1).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
@click.pass_context
def memory_query(
    ctx: click.Context,
    text: str,
    db: str | None,
    collection: str,
    embedder: str | None,
    top_k: int,
    min_score: float | None,
    as_json: bool,
) -> None:
    """The memories closest to TEXT: source#chunk [start:end] score text."""
    from ._memory import MemorySettings, query_memory

    state: State = ctx.obj
    settings = MemorySettings(db, collection, embedder)
    ctx.exit(
        run_command(
            ctx, lambda: query_memory(settings, text, state.out, top_k=top_k, min_score=min_score, as_json=as_json)
        )
    )


@memory.command("clear")
@click.argument("sources", nargs=-1, metavar="[FILES]...")
@_memory_options
@click.pass_context
def memory_clear(
    ctx: click.Context, sources: Sequence[str], db: str | None, collection: str, embedder: str | None
) -> None:
    """Forget FILES (by any path to them), or everything in the collection."""
    from ._memory import MemorySettings, clear_memory

    state: State = ctx.obj
    settings = MemorySettings(db, collection, embedder)
    ctx.exit(run_command(ctx, lambda: clear_memory(settings, state.out, sources)))


@memory.command("list")
@_memory_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
@click.pass_context
def memory_list(ctx: click.Context, db: str | None, collection: str, embedder: str | None, as_json: bool) -> None:
    """The sources in the memory, with their number of chunks."""
    from ._memory import MemorySettings, list_sources

    state: State = ctx.obj
    settings = MemorySettings(db, collection, embedder)
    ctx.exit(run_command(ctx, lambda: list_sources(settings, state.out, as_json=as_json)))


@memory.command("remove")
@click.argument("sources", nargs=-1, required=True, metavar="SOURCES...")
@_memory_options
@click.pass_context
def memory_remove(
    ctx: click.Context, sources: Sequence[str], db: str | None, collection: str, embedder: str | None
) -> None:
    """Forget SOURCES (files by any path to them; a folder: every source under it)."""
    from ._memory import MemorySettings, remove_sources

    state: State = ctx.obj
    settings = MemorySettings(db, collection, embedder)
    ctx.exit(run_command(ctx, lambda: remove_sources(settings, state.out, sources)))


# --- config -----------------------------------------------------------------------------------------


@cli.group()
def config() -> None:
    """Client and pipeline configuration files."""


@config.command("check")
@click.argument("file", type=click.Path(dir_okay=False))
@click.pass_context
def config_check(ctx: click.Context, file: str) -> None:
    """Validate FILE (JSON or YAML) without building a client or calling anything."""
    from ._config import check_config_file

    state: State = ctx.obj

    async def go() -> int:
        for line in await check_config_file(file):
            state.out.answer(line + "\n")
        return 0

    ctx.exit(run_command(ctx, go))


cli.add_command(eval_command)
cli.add_command(a2a_group)


def main(argv: Sequence[str] | None = None) -> Any:
    """Console entry point."""
    return cli.main(args=list(argv) if argv is not None else None, prog_name="ext")
