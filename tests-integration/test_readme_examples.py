"""Every python example in the READMEs runs as written.

Each ```python block of the repo README and of every distribution's README runs in a fresh interpreter (cwd: a
temporary directory). Examples that talk to a provider run against ext-testing's loopback servers through the
SDKs' own environment variables (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, AZURE_AI_ENDPOINT, ...), the gRPC
runtime's against a gateway process the test starts (EXT_GRPC_GATEWAY_ADDRESS), one that reads DATABASE_URL
against a PostgreSQL with pgvector the test starts (ext.testing.postgres; the password in PGPASSWORD), one that
reads CHROMA_URL against a Chroma server the test starts (ext.testing.chroma), one that reads REDIS_URL against a
redis-server the test starts (ext.testing.redis). A block
that cannot run as written is marked right above it with an HTML comment that says why: `not runnable: ...` (only
compiled: a template, a placeholder host, or a peer the reader starts first) or `xfail: ...` (it should run as
written but does not yet: it runs, and the test fails once it passes, so the mark is removed then):

    <!-- readme-test: not runnable: needs a running gateway on port 50051 -->

Every `ext ...` line of the root README's bash blocks runs too, as written, on the embedded model (see the
section at the end): a new example is tested as soon as it is written.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ext.runtime.grpc.testing import start_gateway_process
from ext.testing.chroma import ChromaServer, start_chroma_server
from ext.testing.postgres import PASSWORD, PostgresServer, start_postgres_server
from ext.testing.redis import RedisServer, start_redis_server
from ext.testing.script import Reply
from ext.testing.servers import (
    AnthropicServer,
    AzureAIServer,
    BedrockServer,
    OllamaServer,
    OpenAIServer,
    RecordedRequest,
)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tools" / "checks") not in sys.path:
    sys.path.append(str(ROOT / "tools" / "checks"))  # appended: a bare name there never shadows an installed module
from _workspace import SEPARATE_ENVIRONMENTS, load_toml, requirement_name  # noqa: E402

# A distribution that has its own environment (not this one's) runs its README's examples there, in its own tests
# (packages/ext-semantic-kernel/tests/test_readme.py): its imports are not installed here.
READMES = [
    ROOT / "README.md",
    *sorted(p for p in ROOT.glob("packages/*/README.md") if p.parent.name not in SEPARATE_ENVIRONMENTS),
]
_BLOCK = re.compile(r"(?:<!-- readme-test: (?P<mark>[^>]*?) -->\s*\n)?```python\n(?P<code>.*?)```", re.S)


def _examples() -> list[tuple[str, str, str | None]]:
    found = []
    for readme in READMES:
        text = readme.read_text(encoding="utf-8")
        for index, match in enumerate(_BLOCK.finditer(text)):
            found.append((f"{readme.relative_to(ROOT)}#{index}", match["code"], match["mark"]))
    return found


EXAMPLES = _examples()


def _answer(request: RecordedRequest) -> Reply:
    """What the loopback model answers a README example: JSON when the request asks for it (an instance of the
    schema it sends, when it sends one), else a sentence."""
    body = request.json if isinstance(request.json, dict) else {}
    response_format = body.get("response_format")
    if response_format:
        schema = (response_format.get("json_schema") or {}).get("schema") if isinstance(response_format, dict) else None
        if isinstance(schema, dict) and schema.get("properties"):
            return Reply(text=json.dumps(_instance(schema, schema)))
        return Reply(text='{"name": "Oslo", "population": 709000}')
    return Reply(text="The capital of France is Paris.")


def _instance(schema: dict[str, Any], root: dict[str, Any], depth: int = 0) -> Any:
    """A small value that validates against `schema` (the subset structured-output schemas use)."""
    if "$ref" in schema and depth < 8:
        target: Any = root
        for part in str(schema["$ref"]).removeprefix("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return _instance(target, root, depth + 1)
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return _instance(schema["anyOf"][0], root, depth + 1)
    kind = schema.get("type")
    if kind == "object":
        return {name: _instance(sub, root, depth + 1) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return []
    return {"string": "Oslo", "integer": 5, "number": 5.0, "boolean": True}.get(str(kind))


def test_examples_are_found() -> None:
    assert len(EXAMPLES) >= 10, [name for name, _, _ in EXAMPLES]


@pytest.mark.parametrize(("name", "code", "mark"), EXAMPLES, ids=[name for name, _, _ in EXAMPLES])
async def test_readme_example_runs(name: str, code: str, mark: str | None, tmp_path: Path) -> None:
    if mark is not None:
        kind, _, why = mark.partition(": ")
        assert kind in ("not runnable", "xfail") and len(why) > 10, (
            f"{name}: a block marked for the README test must say why it cannot run: {mark!r}"
        )
    # Every block is at least valid Python (fragments may use top-level await, as in an async REPL).
    compile(code, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if mark is not None and mark.startswith("not runnable"):
        return
    # The ext-runtime-grpc example runs against a real gateway process.
    gateway = start_gateway_process(env={"EXT_GRPC_GATEWAY_TOKEN": "change-me"}) if "GrpcAgentRuntime" in code else None
    # The ext-vectors-pgvector example runs against a real PostgreSQL with pgvector.
    postgres: PostgresServer | None = None
    # The ext-vectors-chroma example runs against a real Chroma server.
    chroma: ChromaServer | None = None
    # The ext-redis examples run against a real redis-server.
    redis: RedisServer | None = None
    try:
        postgres = start_postgres_server() if "DATABASE_URL" in code else None
        peers = {"DATABASE_URL": postgres.url_without_password, "PGPASSWORD": PASSWORD} if postgres else {}
        chroma = start_chroma_server() if "CHROMA_URL" in code else None
        if chroma is not None:
            peers["CHROMA_URL"] = chroma.url
        redis = start_redis_server() if "REDIS_URL" in code else None
        if redis is not None:
            peers["REDIS_URL"] = redis.url
        returncode, output = await _run(code, tmp_path, gateway.address if gateway is not None else None, peers)
    finally:
        if gateway is not None:
            gateway.kill()
        if postgres is not None:
            postgres.stop()
        if chroma is not None:
            chroma.stop()
        if redis is not None:
            redis.stop()
    if mark is not None:
        assert returncode != 0, f"{name} runs now: remove its readme-test xfail mark"
        pytest.xfail(mark)
    assert returncode == 0, f"{name} failed:\n{output.decode(errors='replace')[-3000:]}"


async def _run(
    code: str, tmp_path: Path, gateway_address: str | None, peers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """Run `code` in a fresh interpreter with the loopback servers in its environment: exit code and output."""
    async with (
        OpenAIServer(default=_answer) as openai_server,
        AnthropicServer(default=_answer) as anthropic_server,
        BedrockServer(default=_answer) as bedrock_server,
        AzureAIServer(api_key="azure-ai-readme-example", default=_answer) as azure_ai_server,
        OllamaServer(default=_answer) as ollama_server,
    ):
        prefixes = ("OPENAI_", "ANTHROPIC_", "AZURE_", "AWS_", "OLLAMA_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
        env.update(
            OPENAI_BASE_URL=openai_server.base_url + "/v1",
            OPENAI_API_KEY="sk-readme-example",
            AZURE_OPENAI_ENDPOINT=openai_server.base_url,
            AZURE_OPENAI_API_KEY="azure-readme-example",
            ANTHROPIC_BASE_URL=anthropic_server.base_url,
            ANTHROPIC_API_KEY="sk-ant-readme-example",
            AWS_ENDPOINT_URL_BEDROCK_RUNTIME=bedrock_server.base_url,
            AWS_ACCESS_KEY_ID=bedrock_server.access_key,
            AWS_SECRET_ACCESS_KEY="loopback-secret-key",  # BedrockServer's default
            AWS_CONFIG_FILE=str(tmp_path / "no-aws-config"),
            AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-aws-credentials"),
            AZURE_AI_ENDPOINT=azure_ai_server.base_url + "/models",
            AZURE_AI_API_KEY="azure-ai-readme-example",
            OLLAMA_HOST=ollama_server.base_url,
            WEATHER_API_TOKEN="readme-example-token",  # the ext-tools-http example's headers_env reference
        )
        if gateway_address is not None:
            env["EXT_GRPC_GATEWAY_ADDRESS"] = gateway_address
        env.update(peers or {})
        script = tmp_path / "example.py"
        script.write_text(code, encoding="utf-8")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            output, _ = await asyncio.wait_for(process.communicate(), 60)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert process.returncode is not None
        return process.returncode, output


# --- the `ext` command examples of the root README --------------------------------------------------------------
# Each `ext ...` line of a ```bash block runs as written (the `hatch run ENV:` prefix names the environment, which
# here is the test's own), on the embedded model (SmolLM2-135M through llama.cpp, in process). A chat must give
# an answer on stdout with no tool-call JSON in it, and one with tools must carry the tool's result.

_BASH = re.compile(r"```bash\n(?P<code>.*?)```", re.S)
_EXT = re.compile(r"^(?:hatch run (?P<env>[\w-]+):)?(?P<command>ext\s.*)$")
_TOOL_RESULT = re.compile(r"^← (?P<tool>[\w-]+): (?P<result>.*)$", re.M)


def _ext_lines() -> list[tuple[str | None, str]]:
    """Each `ext` line of the root README's bash blocks: the hatch environment it names (None: none) and the
    command."""
    found = []
    for block in _BASH.finditer((ROOT / "README.md").read_text(encoding="utf-8")):
        for line in block["code"].splitlines():
            match = _EXT.match(line.strip())
            if match:
                found.append((match["env"], match["command"]))
    return found


EXT_LINES = _ext_lines()
EXT_EXAMPLES = [command for _, command in EXT_LINES]
# The fact of tools/demo/demo_notes.txt that `ext chat --memory` must answer with: the model cannot know it otherwise.
_MEMORY_FACT = "Pimble"


@pytest.fixture(scope="module")
def data_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data directory for the module's `ext` lines: `ext memory add` fills the memory a later line reads."""
    return tmp_path_factory.mktemp("ext-data")


def test_ext_examples_are_found() -> None:
    assert any(" --mcp " in e for e in EXT_EXAMPLES) and any(e.startswith("ext models") for e in EXT_EXAMPLES)


# What an `ext` line uses, by subcommand or option, named as ext-cli's extras (its pyproject) name it: the hatch
# environment the line names must install the distributions of that extra (`ext eval` in `demo` once said
# "ext-eval is not installed").
_EXTRA_OF_SUBCOMMAND = {"eval": "eval", "mcp": "mcp", "memory": "memory", "gateway": "grpc"}
_EXTRA_OF_OPTION = {"--mcp": "mcp", "--http-tool": "http", "--memory": "memory"}


def _extras_used(argv: list[str]) -> set[str]:
    used = {_EXTRA_OF_OPTION[a] for a in argv if a in _EXTRA_OF_OPTION}
    if len(argv) > 1 and argv[1] in _EXTRA_OF_SUBCOMMAND:
        used.add(_EXTRA_OF_SUBCOMMAND[argv[1]])
    return used


def _environment_gaps(
    lines: list[tuple[str | None, str]], environments: dict[str, Any], extras: dict[str, list[str]]
) -> list[str]:
    """For each `hatch run ENV:ext ...` line, what ENV's workspace members lack of the ext-cli extras it uses."""
    import shlex

    gaps = []
    for env, command in lines:
        if env is None:
            continue
        if env not in environments:
            gaps.append(f"{command}: hatch.toml has no environment {env!r}")
            continue
        members = {Path(m).name for m in environments[env].get("workspace", {}).get("members", [])}
        for extra in sorted(_extras_used(shlex.split(command, comments=True))):
            missing = sorted(str(requirement_name(r)) for r in extras[extra] if requirement_name(r) not in members)
            if missing:
                gaps.append(f"hatch run {env}:{command}: {env!r} lacks {missing} (ext-cli[{extra}])")
    return gaps


def test_each_ext_line_names_an_environment_that_installs_what_it_uses() -> None:
    extras = load_toml(ROOT / "packages/ext-cli/pyproject.toml")["project"]["optional-dependencies"]
    environments = load_toml(ROOT / "hatch.toml")["envs"]
    assert any(command.startswith("ext eval ") for command in EXT_EXAMPLES), "the README shows no `ext eval` line"
    assert sum(len(_extras_used(command.split())) for env, command in EXT_LINES if env) >= 4
    assert _environment_gaps(EXT_LINES, environments, extras) == []
    # The check can fail: the demo environment as it was, without ext-eval.
    demo = environments["demo"]
    without = [m for m in demo["workspace"]["members"] if m != "packages/ext-eval"]
    before = {**environments, "demo": {**demo, "workspace": {**demo["workspace"], "members": without}}}
    gaps = _environment_gaps([("demo", "ext eval demo")], before, extras)
    assert gaps == ["hatch run demo:ext eval demo: 'demo' lacks ['ext-eval'] (ext-cli[eval])"]


def _eval_rows(out: str) -> dict[str, list[str]]:
    """The rows of `ext eval`'s summary table on stdout (rich's box drawing, piped): category -> its other cells."""
    rows: dict[str, list[str]] = {}
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("│").split("│")]
        if line.lstrip().startswith("│") and len(cells) == 8:
            rows[cells[0]] = cells[1:]
    return rows


def _check_eval_output(example: str, argv: list[str], out: str) -> None:
    """The table has a row per category of the selected cases and an overall row; no call failed (the model ran)
    and none was malformed (the in-process model's calls are held to their schemas by a grammar: the README says
    the constraint makes every call well-formed)."""
    from ext.eval import load_dataset

    categories = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--category"]
    limit = next((int(argv[i + 1]) for i, a in enumerate(argv[:-1]) if a == "--limit"), None)
    cases = load_dataset(argv[2]).select(categories=categories, limit=limit)
    rows = _eval_rows(out)
    expected = {**Counter(case.category for case in cases), "overall": len(cases)}
    assert {name: int(cells[0]) for name, cells in rows.items()} == expected, f"{example}: the table\n{out}"
    for name, (_, accuracy, malformed, errors, *_rest) in rows.items():
        assert accuracy.endswith("%") and 0 <= float(accuracy[:-1]) <= 100, f"{example}: {name} accuracy {accuracy}"
        assert (malformed, errors) == ("0.0%", "0"), f"{example}: {name}: malformed {malformed}, errors {errors}"


def _checkable(result: str) -> list[str]:
    """The words of a tool's result an answer must repeat: those holding digits (a time, a temperature)."""
    return [w.strip(".,;:!?") for w in result.split() if any(c.isdigit() for c in w)]


@pytest.mark.integration
@pytest.mark.timeout(660)  # the process gets 600 s: `ext eval demo` scores 10 cases on the embedded model
@pytest.mark.parametrize("example", EXT_EXAMPLES)
async def test_readme_ext_example_gives_a_sensible_answer(example: str, data_home: Path) -> None:
    import shlex

    argv = shlex.split(example, comments=True)
    assert argv[0] == "ext"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "AZURE_", "OLLAMA_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `python` in an example
    env["XDG_DATA_HOME"] = str(data_home)  # `ext memory`'s default database, kept out of the user's
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ext.cli", *argv[1:], cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out_bytes, err_bytes = await asyncio.wait_for(process.communicate(), 600)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    out, err = out_bytes.decode(), err_bytes.decode()
    assert process.returncode == 0, f"{example}\n{err[-3000:]}"
    assert out.strip(), f"{example} printed nothing on stdout\n{err[-2000:]}"
    if argv[1] == "eval":
        _check_eval_output(example, argv, out)
    if argv[1] != "chat":
        return
    assert "tool_call" not in out and '{"' not in out, f"{example}: tool-call JSON in the answer: {out!r}"
    tools = any(a in argv for a in ("--mcp", "--tool", "--http-tool"))
    if tools:
        results = _TOOL_RESULT.findall(err)
        assert results, f"{example}: no tool was called\n{err[-2000:]}"
        words = [w for _, result in results for w in _checkable(result)]
        assert words, f"{example}: the tool's result has nothing to check the answer against: {results}"
        assert all(w in out for w in words), f"{example}: the answer {out!r} does not carry the tool's result {results}"
    else:
        assert len(out.split()) >= 3, f"{example}: not a sentence: {out!r}"
    if "--memory" in argv:
        assert _MEMORY_FACT in out, f"{example}: the answer {out!r} does not carry the document's fact"
