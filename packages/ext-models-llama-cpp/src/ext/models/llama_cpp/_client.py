"""`LlamaCppChatCompletionClient`: a GGUF model run in process by llama-cpp-python.

Generation runs on one worker thread per client, never on the event loop. The thread reads llama-cpp-python's
token stream and checks a stop flag after every token, so a cancelled token, a cancelled task, a timeout or a
consumer that stops reading a stream ends the generation within a token (the thread does not finish a reply
nobody reads). One `Llama` is not re-entrant: calls on one client are serialised by an asyncio lock held until the
worker thread has finished, so concurrent `create` calls queue up and each gets its own, whole reply.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel

from ext.core import (
    BaseChatCompletionClient,
    ChatOptions,
    ChatRequest,
    ClientClosedError,
    ConfigurationError,
    CreateResult,
    FunctionCall,
    LLMMessage,
    ModelInfo,
    RequestUsage,
    RetryPolicy,
    StreamChunk,
    Tool,
    ToolCalling,
    ToolSchema,
    UnsupportedOptionError,
    config_from_arguments,
    merge_default_options,
    normalize_finish_reason,
)

from ._config import LlamaCppClientConfig
from ._mapping import LlamaCall, check_extra_args, map_messages, map_request, parse_output, tool_system_text

if TYPE_CHECKING:
    from llama_cpp import Llama

logger = logging.getLogger(__name__)

__all__ = ["LlamaCppChatCompletionClient"]

_END = object()


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


@dataclass(slots=True)
class _Outcome:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    stopped: bool


class LlamaCppChatCompletionClient(BaseChatCompletionClient):
    """A chat client for a GGUF model file, run in this process by llama.cpp (no server, no key, no network).

    `model_path` names the GGUF file (`ext.models.llama_cpp.default_model_path()` gives the embedded default,
    SmolLM2-135M-Instruct). Prompts use the GGUF's own chat template unless `chat_format` names another
    llama-cpp-python format or `chat_handler` is given. Tool calls get deterministic ids, `call_<turn>_<index>`
    (the number of messages in the prompt the model answered, the call's place in its answer). See the package
    README for every option.
    """

    provider_name = "llama_cpp"
    # llama.cpp renders the chat template over whatever history it is given: a tool call left without its result
    # is accepted (and count_tokens measures a conversation in progress); a result without its call is still refused.
    tool_results_required: ClassVar[bool] = False
    component_config_schema: ClassVar[type[BaseModel]] = LlamaCppClientConfig
    component_provider_override: ClassVar[str | None] = "ext.models.llama_cpp.LlamaCppChatCompletionClient"

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        model: str | None = None,
        n_ctx: int = 2048,
        n_gpu_layers: int = 0,
        n_threads: int | None = None,
        n_batch: int = 512,
        seed: int | None = None,
        chat_format: str | None = None,
        chat_handler: Callable[..., Any] | None = None,
        temperature: float = 0.8,
        top_p: float = 0.95,
        top_k: int = 40,
        max_tokens: int = 512,
        min_p: float = 0.05,
        repeat_penalty: float = 1.0,
        tool_calling: Literal["constrained", "prompt"] = "constrained",
        timeout: float | None = None,
        max_retries: int = 0,
        verbose: bool = False,
        model_info: ModelInfo | Mapping[str, Any] | None = None,
        token_limit: int | None = None,
        default_options: ChatOptions | Mapping[str, Any] | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        owner = type(self).__name__
        config = config_from_arguments(LlamaCppClientConfig, locals(), owner)
        path = Path(config.model_path).expanduser()
        if not path.is_file():
            raise ConfigurationError(f"{owner}: model_path {str(path)!r} is not a file (expected a GGUF model file)")
        if chat_handler is not None and not callable(chat_handler):
            raise ConfigurationError(f"{owner}: chat_handler must be a llama-cpp-python chat handler (a callable)")
        info: dict[str, Any] = {"vision": False, "structured_output": True, "family": "gguf"}
        if isinstance(model_info, ModelInfo):
            info.update(model_info.model_dump())
        elif config.model_info:
            info.update(config.model_info)
        name = config.model or (path.name[: -len(".gguf")] if path.name.endswith(".gguf") else path.name)
        super().__init__(
            model=name,
            model_info=info,
            token_limit=config.token_limit or config.n_ctx,
            default_options=merge_default_options(config.default_options),
            max_retries=config.max_retries,
            retry_policy=retry_policy,
        )
        self._config = config
        self._chat_handler = chat_handler
        self._sampling: dict[str, Any] = {
            "temperature": config.temperature,
            "top_p": config.top_p,
            "top_k": config.top_k,
            "max_tokens": config.max_tokens,
            "min_p": config.min_p,
            "repeat_penalty": config.repeat_penalty,
        }
        from llama_cpp import Llama  # deferred: importing ext.models.llama_cpp does not load llama.cpp

        kwargs: dict[str, Any] = {
            "model_path": str(path),
            "n_ctx": config.n_ctx,
            "n_gpu_layers": config.n_gpu_layers,
            "n_batch": min(config.n_batch, config.n_ctx),
            "chat_format": config.chat_format,
            "chat_handler": chat_handler,
            "verbose": config.verbose,
        }
        if config.n_threads is not None:
            kwargs["n_threads"] = config.n_threads
        if config.seed is not None:
            kwargs["seed"] = config.seed
        try:
            self._llama: Llama | None = Llama(**kwargs)
        except ValueError as exc:
            raise ConfigurationError(f"{owner}: could not load {str(path)!r}: {exc}") from exc
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ext-llama-cpp")
        self._lock: asyncio.Lock | None = None
        self._active: threading.Event | None = None
        self._grammars: dict[str, Any] = {}
        self._formatter: tuple[Callable[[list[dict[str, str]]], tuple[str, bool]] | None, bool] | None = None

    # --- public extras -------------------------------------------------------------------------------

    @property
    def llama(self) -> Llama:
        """The loaded `llama_cpp.Llama` (for what ext does not map). Do not call it while a call is running."""
        if self._llama is None:
            raise ClientClosedError(f"{type(self).__name__} is closed")
        return self._llama

    @property
    def model_path(self) -> str:
        return self._config.model_path

    # --- the provider's part -------------------------------------------------------------------------

    def _tool_calling_for(self, model: str, info: ModelInfo) -> ToolCalling:
        # Every model gets tools at the prompt level here: llama.cpp has no tool API of its own.
        return self._config.tool_calling

    def _check_request(self, request: ChatRequest) -> None:
        if request.options.model_id is not None and request.options.model_id != self.model:
            raise UnsupportedOptionError(
                f"model_id={request.options.model_id!r}: a LlamaCppChatCompletionClient runs one GGUF file "
                f"({self.model!r}); make another client for another model"
            )
        if request.extra:
            check_extra_args(request.extra)

    async def _create(self, request: ChatRequest) -> CreateResult:
        call = map_request(request, self._sampling, self._config.tool_calling)
        stop, future = await self._start(call, request, None)
        try:
            result: CreateResult = await self._within(asyncio.wrap_future(future), self._config.timeout)
            return result
        finally:
            stop.set()

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk | CreateResult]:
        call = map_request(request, self._sampling, self._config.tool_calling)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        put = queue.put_nowait
        call_soon = loop.call_soon_threadsafe

        def push(text: str) -> None:
            call_soon(put, text)

        stop, future = await self._start(call, request, push)
        done = asyncio.wrap_future(future)
        # Runs after every chunk the thread pushed (both reach the loop through call_soon_threadsafe, in order).
        done.add_done_callback(lambda _: put(_END))
        timeout = self._config.timeout
        deadline = None if timeout is None else loop.time() + timeout
        try:
            get = queue.get
            of = StreamChunk.of
            while True:
                item = await get() if deadline is None else await self._within(get(), deadline - loop.time())
                if item is _END:
                    break
                yield of(item)
            yield await done
        finally:
            stop.set()
            # A consumer that left early never reads the outcome; its error (if any) must not be reported as lost.
            done.add_done_callback(_retrieve)

    async def _within(self, awaitable: Any, timeout: float | None) -> Any:
        """`awaitable`'s result, or the client's `TimeoutError` after `timeout` seconds (None: no limit)."""
        if timeout is None:
            return await awaitable
        try:
            return await asyncio.wait_for(awaitable, max(timeout, 0.0))
        except asyncio.TimeoutError:
            raise TimeoutError(
                f"{type(self).__name__}: the call took longer than timeout={self._config.timeout} s; generation "
                "was stopped"
            ) from None

    async def _start(
        self, call: LlamaCall, request: ChatRequest, push: Callable[[str], None] | None
    ) -> tuple[threading.Event, Future[CreateResult]]:
        """Wait for the model, then start the generation on the worker thread. The lock is released by the
        thread's end, not by the caller: a cancelled caller leaves while its generation stops."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        lock = self._lock
        await lock.acquire()
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        token = request.cancellation_token
        remove = token.add_callback(stop.set) if token is not None else None

        def release(_: object) -> None:
            if remove is not None:
                remove()
            try:
                loop.call_soon_threadsafe(lock.release)
            except RuntimeError:  # the event loop is closed: nobody waits for the lock any more
                pass

        if self._llama is None:  # closed while this call waited for the lock
            lock.release()
            raise ClientClosedError(f"{type(self).__name__} is closed")
        try:
            future = self._executor.submit(self._generate, call, stop, push)
        except BaseException:
            lock.release()
            raise
        self._active = stop
        future.add_done_callback(release)
        return stop, future

    def _grammar(self, gbnf: str) -> Any:
        grammar = self._grammars.get(gbnf)
        if grammar is None:
            from llama_cpp.llama_grammar import LlamaGrammar

            if len(self._grammars) >= 64:
                self._grammars.clear()
            grammar = self._grammars[gbnf] = LlamaGrammar.from_string(gbnf, verbose=False)
        return grammar

    def _generate(self, call: LlamaCall, stop: threading.Event, push: Callable[[str], None] | None) -> CreateResult:
        """The worker thread's part: one generation, token by token, until its end or `stop`."""
        llama = self._llama
        assert llama is not None
        kwargs = call.kwargs
        if call.grammar is not None:
            kwargs = {**kwargs, "grammar": self._grammar(call.grammar)}
        outcome = self._read(llama, kwargs, call, stop, push)
        exact = self._exact_prompt_tokens(kwargs["messages"])  # after the reply: not in the time to first token
        if exact is not None:
            outcome.prompt_tokens = exact
        del llama  # an exception's traceback keeps this frame: it must not keep the model alive after close()
        if outcome.stopped and self._closed:
            raise ClientClosedError(f"{type(self).__name__} was closed during the call; generation was stopped")
        result = self._result(outcome, call)
        if push is not None and call.buffer_text and isinstance(result.content, str) and result.content:
            push(result.content)  # held back in case it was a call: it is text, so it streams as one chunk
        return result

    @staticmethod
    def _read(
        llama: Llama,
        kwargs: dict[str, Any],
        call: LlamaCall,
        stop: threading.Event,
        push: Callable[[str], None] | None,
    ) -> _Outcome:
        stream: Any = llama.create_chat_completion(**kwargs, stream=True)
        parts: list[str] = []
        finish: str | None = None
        prompt_tokens = -1
        # Text streams at once unless it may be a tool call: with tools and `auto`, the first character decides
        # (a call starts with "{"); with tools otherwise, or JSON next to tools, everything waits for the end.
        live = push is not None and not call.buffer_text and not call.tools
        deciding = push is not None and not call.buffer_text and bool(call.tools)
        stopped = False
        try:
            for chunk in stream:
                if prompt_tokens < 0:
                    # The prompt is evaluated by the first chunk (plus any tokens held back with it: the exact
                    # count, when the chat format is known, replaces this).
                    prompt_tokens = llama.n_tokens
                choice = chunk["choices"][0]
                content = choice["delta"].get("content")
                if content:
                    parts.append(content)
                    if live:
                        push(content)  # type: ignore[misc]
                    elif deciding:
                        so_far = "".join(parts)
                        if so_far.strip():
                            deciding = False
                            if not so_far.lstrip().startswith("{"):
                                live = True
                                push(so_far)  # type: ignore[misc]
                reason = choice.get("finish_reason")
                if reason is not None:
                    finish = reason
                if stop.is_set():
                    stopped = True
                    break
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # ends llama-cpp-python's generator: no token is computed after this
        text = "".join(parts)
        completion_tokens = len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)) if text else 0
        if prompt_tokens < 0:
            prompt_tokens = llama.n_tokens
        return _Outcome(text, finish, prompt_tokens, completion_tokens, stopped)

    @staticmethod
    def _result(outcome: _Outcome, call: LlamaCall) -> CreateResult:
        usage = RequestUsage.of(outcome.prompt_tokens, outcome.completion_tokens)
        turn = len(call.kwargs.get("messages") or ())
        # Constrained: the grammar makes a call start with "{", and other text streamed as it came stays text.
        read = call.tools and (call.tolerant or outcome.text.lstrip().startswith("{"))
        calls: list[FunctionCall] | None = (
            parse_output(outcome.text, call.tools, turn=turn, constrained=not call.tolerant) if read else None
        )
        if calls:
            return CreateResult.of("function_calls", calls, usage)
        return CreateResult.of(normalize_finish_reason(outcome.finish_reason), outcome.text, usage)

    async def _close(self) -> None:
        """Stop a running generation, wait for the worker thread, then free the model."""
        if self._active is not None:
            self._active.set()
        if self._lock is not None:
            async with self._lock:
                self._free()
        else:
            self._free()

    def _free(self) -> None:
        llama, self._llama = self._llama, None
        if llama is not None:
            llama.close()
        self._executor.shutdown(wait=False)

    # --- tokens --------------------------------------------------------------------------------------

    def _formatter_for(self) -> tuple[Callable[[list[dict[str, str]]], tuple[str, bool]] | None, bool]:
        """How to render a prompt without generating: (render, exact). `exact` when it is the very formatter
        generation uses (the GGUF's template, or a llama-cpp-python format given by name); a custom chat handler
        is counted with the GGUF's template when there is one (close, not exact); None when there is nothing."""
        if self._formatter is None:
            self._formatter = self._make_formatter()
        return self._formatter

    def _make_formatter(self) -> tuple[Callable[[list[dict[str, str]]], tuple[str, bool]] | None, bool]:
        from llama_cpp import llama_chat_format

        llama = self.llama
        template = llama.metadata.get("tokenizer.chat_template")
        name = llama.chat_format
        formatter: Any = None
        exact = False
        if self._chat_handler is None and name == "chat_template.default" and template:
            formatter, exact = self._jinja(template), True
        elif self._chat_handler is None and name:
            formatter = getattr(llama_chat_format, "format_" + name.replace("-", "_").replace(".", "_"), None)
            exact = formatter is not None
        if formatter is None and template:
            formatter = self._jinja(template)
        if formatter is None:
            return None, False

        def render(messages: list[dict[str, str]]) -> tuple[str, bool]:
            result = formatter(messages=messages)
            return result.prompt, bool(result.added_special)

        return render, exact

    def _jinja(self, template: str) -> Any:
        from llama_cpp import llama_chat_format

        llama = self.llama
        eos = llama.detokenize([llama.token_eos()], special=True).decode("utf-8", "replace")
        bos = llama.detokenize([llama.token_bos()], special=True).decode("utf-8", "replace")
        return llama_chat_format.Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)

    def _count_mapped(self, mapped: list[dict[str, str]]) -> int:
        llama = self.llama
        render, _ = self._formatter_for()
        if render is None:
            text = "\n".join(f"{m['role']}: {m['content']}" for m in mapped)
            return len(llama.tokenize(text.encode("utf-8"), add_bos=True, special=True))
        prompt, added_special = render(mapped)
        return len(llama.tokenize(prompt.encode("utf-8"), add_bos=not added_special, special=True))

    def _exact_prompt_tokens(self, mapped: list[dict[str, str]]) -> int | None:
        """The prompt's token count when it can be known exactly before generating (see `_formatter_for`)."""
        render, exact = self._formatter_for()
        return self._count_mapped(mapped) if render is not None and exact else None

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()) -> int:
        """Prompt tokens by the model's own tokenizer, over the prompt its chat template renders (including the
        system message that describes `tools`)."""
        if self._closed:
            raise ClientClosedError(f"{type(self).__name__} is closed")
        request = self.build_request(messages, tools=tools)
        mapped = map_messages(request.messages)
        if request.tools:
            mapped.insert(0, {"role": "system", "content": tool_system_text(request.tools, "auto")})
        return self._count_mapped(mapped)

    # --- components ----------------------------------------------------------------------------------

    def _undumpable_settings(self) -> dict[str, str]:
        if self._chat_handler is not None:
            return {"chat_handler": "a chat handler object given in code (a config names a chat_format instead)"}
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, model_path={self._config.model_path!r})"
