"""`LlamaCppChatCompletionClient`'s configuration (what `dump_component` writes and `load_component` reads)."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_N_CTX = 2048
DEFAULT_N_GPU_LAYERS = 0
DEFAULT_TEMPERATURE = 0.8
DEFAULT_TOP_P = 0.95
DEFAULT_TOP_K = 40
DEFAULT_MAX_TOKENS = 512


class LlamaCppClientConfig(BaseModel):
    """`LlamaCppChatCompletionClient` configuration. A `chat_handler` object is not part of it (code, not config)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True, defer_build=True)

    model_path: str = Field(min_length=1, description="Path of the GGUF model file.")
    model: Optional[str] = Field(None, min_length=1, description="Model name (default: the file name without .gguf).")
    n_ctx: int = Field(DEFAULT_N_CTX, gt=0, description="Context window in tokens (also the token limit).")
    n_gpu_layers: int = Field(DEFAULT_N_GPU_LAYERS, ge=-1, description="Layers offloaded to a GPU (-1: all).")
    n_threads: Optional[int] = Field(None, gt=0, description="CPU threads for generation (default: llama.cpp's).")
    n_batch: int = Field(512, gt=0, description="Prompt tokens evaluated per batch.")
    seed: Optional[int] = Field(None, description="Sampling seed of the model (a per-call ChatOptions.seed wins).")
    chat_format: Optional[str] = Field(
        None, description="llama-cpp-python chat format name (default: the GGUF's own chat template)."
    )
    temperature: float = Field(DEFAULT_TEMPERATURE, ge=0.0, le=2.0, description="0.0 to 2.0.")
    top_p: float = Field(DEFAULT_TOP_P, ge=0.0, le=1.0, description="Nucleus sampling mass, 0.0 to 1.0.")
    top_k: int = Field(DEFAULT_TOP_K, ge=0, description="Sample from the k most likely tokens (0: all).")
    max_tokens: int = Field(DEFAULT_MAX_TOKENS, gt=0, description="Most tokens to generate per call.")
    min_p: float = Field(0.05, ge=0.0, le=1.0, description="Minimum token probability relative to the best.")
    repeat_penalty: float = Field(1.0, gt=0.0, description="Penalty for repeated tokens (1.0: none).")
    tool_calling: Literal["constrained", "prompt"] = Field(
        "constrained",
        description="Tool calls at the prompt level: 'constrained' holds the reply to the call JSON with a grammar "
        "(a call is well-formed and validates against the tool's schema); 'prompt' only describes the tools and "
        "reads the answer tolerantly (the whole answer must be the call: JSON, <tool_call> tags, a Python-like call, "
        "or one fenced block of these).",
    )
    timeout: Optional[float] = Field(None, gt=0, description="Seconds a call may take before TimeoutError.")
    max_retries: int = Field(0, ge=0, description="Retries of a failed call (a local model rarely needs any).")
    verbose: bool = Field(False, description="Let llama.cpp print its logs to stderr.")
    model_info: Optional[dict[str, Any]] = Field(None, description="Capability overrides (ModelInfo fields).")
    token_limit: Optional[int] = Field(None, gt=0, description="Context window for budgeting (default: n_ctx).")
    default_options: Optional[dict[str, Any]] = Field(None, description="Default ChatOptions for every call.")

    @field_validator("model_path")
    @classmethod
    def _gguf_path(cls, value: str) -> str:
        return value.strip()
