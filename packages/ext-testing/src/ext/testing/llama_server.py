"""llama-cpp-python's own OpenAI-compatible server (`python -m llama_cpp.server`) on 127.0.0.1, for tests that need
a real server rather than a scripted loopback one.

`start_llama_server(model_path)` starts the server as a subprocess on an ephemeral port, polls `GET /v1/models`
until it answers (bounded by `ready_timeout`), and returns a `LlamaServer`; `stop()` ends it. What is missing is
named before anything starts: `FileNotFoundError` for the GGUF file, `ModuleNotFoundError` with the install
command for `llama-cpp-python[server]` and its server dependencies. A server that exits or never answers raises
`RuntimeError` with the tail of its log. Used as a session fixture::

    @pytest.fixture(scope="session")
    def llama_server() -> Iterator[LlamaServer]:
        with start_llama_server(default_model_path()) as server:
            yield server

The defaults match the server's documented tool calling: `chat_format="chatml-function-calling"`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from ext.testing.redis import free_port

__all__ = [
    "CHAT_COMPLETIONS_FEATURES",
    "CHAT_COMPLETIONS_NOT_APPLICABLE",
    "INSTALL_HINT",
    "SERVER_MODULES",
    "LlamaServer",
    "start_llama_server",
]

INSTALL_HINT = "pip install 'llama-cpp-python[server]>=0.3.36,<0.4'"
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
"""What `python -m llama_cpp.server` imports: llama-cpp-python and its `[server]` extra."""

_LOG_TAIL = 4000

# What a Chat Completions client (OpenAI's SDK, Azure AI Inference's) gets from this server with
# chatml-function-calling on SmolLM2-135M-Instruct, for `ext.testing.conformance.RealServerConformance`. Each reason
# was seen on llama-cpp-python 0.3.36 (llama_cpp/server/app.py and types.py, llama_chat_format.chatml_function_calling).
CHAT_COMPLETIONS_FEATURES = frozenset({"tool_choice_auto", "tool_choice_named", "tool_choice_none", "json_mode"})
CHAT_COMPLETIONS_NOT_APPLICABLE = {
    "stream_usage": "the server ignores stream_options and sends no usage in a stream",
    "tool_choice_required": "chatml-function-calling handles only auto, none and a named tool: "
    "tool_choice='required' fails an assert and the server answers 500",
    "tool_results_in_prompt": "the chatml-function-calling template renders no 'tool' message, "
    "so the model never sees a tool's result",
    "structured_output": "the server takes response_format type 'text' or 'json_object' only (a json_schema "
    "format answers 500), and SmolLM2-135M does not follow a schema given in the prompt",
}


@dataclass
class LlamaServer:
    """A running `llama_cpp.server` process (see `start_llama_server`)."""

    process: subprocess.Popen[bytes]
    port: int
    model_path: Path
    model_alias: str
    directory: str
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = Path(self.directory) / "server.log"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API root, `http://127.0.0.1:<port>/v1` (clients post to `/chat/completions`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def log_tail(self) -> str:
        """The end of the server's combined stdout and stderr."""
        try:
            return self.log_path.read_text(errors="replace")[-_LOG_TAIL:]
        except OSError:
            return ""

    def stop(self) -> None:
        """End the server (SIGTERM, then SIGKILL after 10 s; idempotent) and remove its directory."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start_llama_server(
    model_path: str | os.PathLike[str],
    *,
    chat_format: str = "chatml-function-calling",
    model_alias: str | None = None,
    n_ctx: int = 2048,
    n_threads: int | None = None,
    ready_timeout: float = 120.0,
    python: str = sys.executable,
) -> LlamaServer:
    """Start `python -m llama_cpp.server` for `model_path` on 127.0.0.1 and return once `/v1/models` answers.

    `model_alias` is the model name the server reports (default: the file name without `.gguf`); the server
    answers whatever `model` a request names. Raises `FileNotFoundError`, `ModuleNotFoundError` (with
    :data:`INSTALL_HINT`) or `RuntimeError` (the server exited, or did not answer within `ready_timeout` s).
    """
    path = Path(model_path)
    if not path.is_file():
        raise FileNotFoundError(f"start_llama_server: model_path {str(path)!r} is not a file (expected a GGUF file)")
    if python == sys.executable:
        missing = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
        if missing:
            raise ModuleNotFoundError(
                f"start_llama_server: llama-cpp-python's server needs {', '.join(missing)}, which "
                f"{'is' if len(missing) == 1 else 'are'} not installed; install it with: {INSTALL_HINT}"
            )
    alias = model_alias or (path.name[: -len(".gguf")] if path.name.endswith(".gguf") else path.name)
    directory = tempfile.mkdtemp(prefix="ext-llama-server-")
    port = free_port()
    arguments = [
        python,
        "-m",
        "llama_cpp.server",
        "--model",
        str(path),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--chat_format",
        chat_format,
        "--n_ctx",
        str(n_ctx),
    ]
    if n_threads is not None:
        arguments += ["--n_threads", str(n_threads)]
    try:
        # A log file, not a pipe: a server that logs a lot must never block on a full pipe nobody reads.
        with open(Path(directory) / "server.log", "wb") as log:
            process = subprocess.Popen(arguments, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    server = LlamaServer(process, port, path, alias, directory)
    try:
        _wait_until_ready(server, ready_timeout)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_until_ready(server: LlamaServer, timeout: float) -> None:
    url = f"{server.base_url}/models"
    deadline = time.monotonic() + timeout
    while True:
        code = server.process.poll()
        if code is not None:
            raise RuntimeError(
                f"llama_cpp.server exited with code {code} before answering {url}; its log ends:\n{server.log_tail()}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                models = json.loads(response.read())
            if any(entry.get("id") == server.model_alias for entry in models.get("data", [])):
                return
        except (urllib.error.URLError, OSError, ValueError):
            pass  # not listening yet, or loading the model
        if time.monotonic() >= deadline:
            raise RuntimeError(
                f"llama_cpp.server did not answer {url} within {timeout} s; its log ends:\n{server.log_tail()}"
            )
        time.sleep(0.1)  # polling a process that is still loading its model; bounded by the deadline
