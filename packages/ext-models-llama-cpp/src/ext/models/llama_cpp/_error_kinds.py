"""What kind of failure the embedded llama.cpp model raised (registered under ext-core's `ext.errors` entry
points). llama-cpp-python refuses a prompt longer than `n_ctx` with a plain `ValueError` ("Requested tokens (N)
exceed context window of M"): the message is the only sign."""

from __future__ import annotations

from ext.core import ErrorClass, ErrorKind


def classify_llama_cpp_error_kind(error: BaseException) -> ErrorClass | None:
    """llama-cpp-python's context-window `ValueError` as `CONTEXT_WINDOW`; None for anything else."""
    if type(error) is ValueError and "exceed context window" in str(error):
        return ErrorClass(ErrorKind.CONTEXT_WINDOW)
    return None
