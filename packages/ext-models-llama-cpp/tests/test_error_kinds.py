"""llama-cpp-python's refusal of a prompt longer than the window is a context-window error (the `ext.errors`
classifier), with a real GGUF model."""

from __future__ import annotations

from typing import Any

import pytest

from ext.core import ErrorKind, UserMessage, classify_error


async def test_a_prompt_longer_than_the_window_is_a_context_window_error(make_client: Any) -> None:
    client = make_client(n_ctx=256, max_tokens=4)
    with pytest.raises(ValueError, match="exceed context window") as caught:
        await client.create([UserMessage(content="word " * 600)])
    found = classify_error(caught.value)
    assert found is not None and found.kind is ErrorKind.CONTEXT_WINDOW
    assert classify_error(ValueError("some other value error")) is None
