"""ext-testing's stand-in for ``ollama serve``: Ollama's native API on 127.0.0.1, answered by a REAL model.

This is not Ollama. No ``ollama`` binary is installable from the package indexes this project uses (PyPI, Debian),
so :class:`OllamaModelServer` does what ``ollama serve`` does with one pulled model, on the same protocol: it runs a
GGUF file (the embedded SmolLM2-135M-Instruct, ``ext.models.llama_cpp.default_model_path()``) through
llama-cpp-python, prompts it with the model's own chat template (the GGUF's, as Ollama applies the Modelfile's), and
turns ``format`` into a grammar for llama.cpp the way Ollama does (``"json"``: llama.cpp's JSON grammar; a JSON
schema: the schema's grammar, ``llama_cpp.llama_grammar.json_schema_to_gbnf``). Request validation, refusals and
response shapes are :class:`ext.testing.servers.OllamaServer`'s (each rule cites its Ollama source there): a body
that does not decode, a model that is not served (404), ``tools`` for a model without the tools capability (400),
a bad ``format`` (500), an empty ``messages`` (the model "loads"). Only the replies differ: they are generated.

    async with OllamaModelServer(default_model_path()) as server:
        client = OllamaChatCompletionClient("smollm2", host=server.base_url)

What differs from Ollama: one model, loaded once with ``n_ctx`` (a request's ``num_ctx`` does not reload it);
``images`` and ``think`` are not passed to the model; a streamed reply is generated to its end first and then
sent as NDJSON parts (the same wire, not the same timing). The model runs in one worker thread, one request at a
time, as Ollama's ``OLLAMA_NUM_PARALLEL=1`` does on a CPU. Items given to :meth:`enqueue` still take precedence
over the model (a scripted fault next to real replies).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ext.testing.script import Reply
from ext.testing.servers import RecordedRequest, Response, json_response
from ext.testing.servers.ollama import OllamaServer

__all__ = ["INSTALL_HINT", "OLLAMA_DEFAULT_OPTIONS", "OllamaModelServer", "generation_arguments"]

INSTALL_HINT = "pip install 'ext-testing[ollama-model]' (llama-cpp-python>=0.3.36,<0.4)"

OLLAMA_DEFAULT_OPTIONS: Mapping[str, Any] = {
    "temperature": 0.8,
    "top_k": 40,
    "top_p": 0.9,
    "min_p": 0.0,
    "typical_p": 1.0,
    "repeat_penalty": 1.1,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}
"""Ollama's sampling defaults (api/types.go ``DefaultOptions``), used for what a request's ``options`` leave out."""

# Ollama's option name -> llama-cpp-python's create_chat_completion keyword (the same meaning on both sides).
_SAMPLING = {name: name for name in OLLAMA_DEFAULT_OPTIONS}
# GGUF general.file_type -> the quantization name `ollama show` reports (llama.cpp's llama_ftype).
_FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 15: "Q4_K_M", 17: "Q5_K_M"}
_MAX_GRAMMARS = 64


def generation_arguments(body: Mapping[str, Any]) -> dict[str, Any]:
    """The ``create_chat_completion`` keywords (no grammar) for an ``/api/chat`` body that passed
    :meth:`OllamaServer.check`: the messages as role and text (the template renders them), Ollama's ``options``
    over its defaults, ``num_predict`` as ``max_tokens`` (-1 and -2, "until the context is full", as None),
    ``seed`` only when it is not negative (Ollama's -1 is a random seed), ``stop`` as a list."""
    messages = [
        {"role": str(message.get("role") or "user"), "content": str(message.get("content") or "")}
        for message in body.get("messages") or []
        if isinstance(message, dict)
    ]
    raw = body.get("options")
    options: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    arguments: dict[str, Any] = {"messages": messages}
    for name, keyword in _SAMPLING.items():
        value = options.get(name)
        arguments[keyword] = OLLAMA_DEFAULT_OPTIONS[name] if value is None else value
    predict = options.get("num_predict")
    arguments["max_tokens"] = predict if isinstance(predict, int) and predict >= 0 else None
    seed = options.get("seed")
    if isinstance(seed, int) and seed >= 0:
        arguments["seed"] = seed
    stop = options.get("stop")
    if stop is not None:
        arguments["stop"] = [stop] if isinstance(stop, str) else [str(s) for s in stop]
    return arguments


class OllamaModelServer(OllamaServer):
    """``ollama serve`` with one model, generated for real (see the module docstring: a stand-in, not Ollama).

    ``model_path`` is the GGUF file; ``name`` the model name requests use (``"smollm2"`` means
    ``smollm2:latest``, as in Ollama); ``capabilities`` what ``/api/show`` reports and what is enforced (SmolLM2's
    template takes no tools: ``completion`` only, so a request with ``tools`` is refused as Ollama refuses it).
    ``start()`` loads the model (in the worker thread) and binds 127.0.0.1 on an ephemeral port; ``stop()`` closes
    the listener and frees the model. Raises ``FileNotFoundError`` for a missing model file and
    ``ModuleNotFoundError`` naming :data:`INSTALL_HINT` without llama-cpp-python, before anything starts.
    """

    scripted_usage = False  # prompt_eval_count / eval_count are the model's real token counts

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        name: str = "smollm2",
        capabilities: Sequence[str] = ("completion",),
        n_ctx: int = 4096,
        n_threads: int | None = None,
        record: bool = True,
    ) -> None:
        path = Path(model_path)
        if not path.is_file():
            raise FileNotFoundError(f"OllamaModelServer: model_path {str(path)!r} is not a file (expected a GGUF file)")
        if importlib.util.find_spec("llama_cpp") is None:
            raise ModuleNotFoundError(
                f"OllamaModelServer runs the model with llama-cpp-python; install: {INSTALL_HINT}"
            )
        self.model_path = path
        self.name = name
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self._llama: Any = None
        self._metadata: dict[str, str] = {}
        self._grammars: dict[str, Any] = {}
        self._executor: ThreadPoolExecutor | None = None
        super().__init__(
            models=[name],
            capabilities={name: list(capabilities)},
            context_length=n_ctx,
            default=self._generate,
            record=record,
        )

    async def start(self) -> None:
        """Load the model (once) in the worker thread, then listen."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ollama-model")
        if self._llama is None:
            self._llama = await asyncio.get_running_loop().run_in_executor(self._executor, self._load)
            self._metadata = dict(getattr(self._llama, "metadata", {}) or {})
        await super().start()

    async def stop(self) -> None:
        """Close the listener and every connection, then free the model (idempotent)."""
        await super().stop()
        executor, self._executor = self._executor, None
        if executor is not None:
            # A generation still running ends at its max_tokens; nothing waits for it.
            executor.shutdown(wait=False, cancel_futures=True)
        self._llama = None
        self._grammars.clear()

    def _load(self) -> Any:
        from llama_cpp import Llama

        # chat_format None: llama-cpp-python formats with the GGUF's own tokenizer.chat_template.
        return Llama(str(self.model_path), n_ctx=self.n_ctx, n_threads=self.n_threads, verbose=False)

    # -- what `ollama show` reports ---------------------------------------------------------------------------------

    def _details(self, name: str) -> dict[str, Any]:
        details = super()._details(name)
        family = self._metadata.get("general.architecture")
        if family:
            details.update(family=family, families=[family])
        size = self._metadata.get("general.size_label")
        details["parameter_size"] = size or ""
        file_type = self._metadata.get("general.file_type", "")
        details["quantization_level"] = _FILE_TYPES.get(int(file_type), "unknown") if file_type.isdigit() else "unknown"
        return details

    # -- generation -------------------------------------------------------------------------------------------------

    def _grammar(self, fmt: Any) -> Any:
        """``format`` as Ollama hands it to llama.cpp: "json" -> the JSON grammar, a schema -> its grammar."""
        from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar, json_schema_to_gbnf

        key = json.dumps(fmt, sort_keys=True)
        grammar = self._grammars.get(key)
        if grammar is None:
            gbnf = JSON_GBNF if fmt == "json" else json_schema_to_gbnf(json.dumps(fmt))
            if len(self._grammars) >= _MAX_GRAMMARS:
                self._grammars.clear()
            grammar = self._grammars[key] = LlamaGrammar.from_string(gbnf, verbose=False)
        return grammar

    async def _generate(self, request: RecordedRequest) -> Reply | Response:
        body: dict[str, Any] = request.json if isinstance(request.json, dict) else {}
        arguments = generation_arguments(body)
        fmt = body.get("format")
        if fmt == "json" or isinstance(fmt, dict):
            try:
                arguments["grammar"] = self._grammar(fmt)
            except Exception:  # the converter raises assorted errors for schemas it cannot handle
                # llm/server.go Completion: a schema llama.SchemaToGrammar cannot convert is
                # `invalid JSON schema in format`, which ChatHandler answers with 500.
                return json_response({"error": "invalid JSON schema in format"}, 500)
        executor = self._executor
        if executor is None or self._llama is None:
            raise RuntimeError("OllamaModelServer is not started")
        return await asyncio.get_running_loop().run_in_executor(executor, self._complete, arguments)

    def _complete(self, arguments: dict[str, Any]) -> Reply:
        """The worker thread's part: one whole generation, with the model's own token counts."""
        llama = self._llama
        if llama is None:
            raise RuntimeError("OllamaModelServer was stopped")
        completion = llama.create_chat_completion(**arguments, stream=False)
        choice = completion["choices"][0]
        usage = completion.get("usage") or {}
        return Reply(
            text=choice["message"].get("content") or "",
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
        )
