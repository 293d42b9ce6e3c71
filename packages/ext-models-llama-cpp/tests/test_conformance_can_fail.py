"""The conformance suite, scripted in process, fails exactly where a broken in-process client is broken.

Two deliberately broken subclasses of the real client run the same suite on the tiny model: one drops system
messages and loses usage, one ignores cancellation (its worker never sees the stop flag, so generation runs on).
"""

from __future__ import annotations

import textwrap

import pytest

from ext.testing.can_fail import run_suite_in_subprocess

BROKEN = textwrap.dedent(
    """
    import threading
    from pathlib import Path
    from typing import Any

    import pytest

    from ext.core import RequestUsage, SystemMessage
    from ext.models.llama_cpp import LlamaCppChatCompletionClient
    from ext.testing.conformance import ChatClientConformance
    from ext.testing.gguf import write_tiny_llama_gguf
    from ext.testing.inprocess import ScriptedModel, llama_cpp_chat_handler
    from ext.testing.script import NeutralMessage, NeutralRequest


    class LosesUsageAndSystemMessages(LlamaCppChatCompletionClient):
        async def _create(self, request):
            request.messages = [m for m in request.messages if not isinstance(m, SystemMessage)]
            result = await super()._create(request)
            return result.model_copy(update={"usage": RequestUsage()})


    class IgnoresCancellation(LlamaCppChatCompletionClient):
        def _generate(self, call, stop, push):
            return super()._generate(call, threading.Event(), push)


    def decode(body):
        wire = NeutralRequest(stream=bool(body.get("stream")))
        for message in body["messages"]:
            if message["role"] == "system":
                wire.system.append(message["content"])
            else:
                wire.messages.append(NeutralMessage(role=message["role"], text=message["content"]))
        return wire


    @pytest.fixture(scope="session")
    def tiny(tmp_path_factory):
        return write_tiny_llama_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


    class _Base(ChatClientConformance):
        timeout_error = TimeoutError
        create_streams_internally = True
        unsupported_options = [({"model_id": "another-model"}, "model_id")]
        client_class: Any = None

        @pytest.fixture(autouse=True)
        def _model(self, tiny):
            self.path = tiny

        def make_server(self):
            return ScriptedModel(decode)

        def make_client(self, server, **kwargs):
            handler = llama_cpp_chat_handler(server, lambda reply: reply.text)
            return self.client_class(self.path, chat_handler=handler, seed=1, n_ctx=512, **kwargs)


    class TestLosesUsage(_Base):
        client_class = LosesUsageAndSystemMessages


    class TestIgnoresCancellation(_Base):
        client_class = IgnoresCancellation
    """
)


def test_suite_fails_exactly_what_is_broken(pytester: pytest.Pytester) -> None:
    # A subprocess: llama.cpp and numpy cannot be imported a second time into this process.
    outcome = run_suite_in_subprocess(
        pytester,
        BROKEN,
        "-k",
        "test_text_create or test_usage_is_accounted or test_system_messages_anywhere or test_cancel_mid "
        "or test_stream_text or test_close_and_context_manager",
        name="test_broken_clients",
    )
    assert outcome.failed == [
        "TestIgnoresCancellation::test_cancel_mid_request_closes_the_connection",
        "TestIgnoresCancellation::test_cancel_mid_stream_closes_the_connection",
        "TestLosesUsage::test_system_messages_anywhere",
        "TestLosesUsage::test_text_create",
        "TestLosesUsage::test_usage_is_accounted",
    ]
    assert outcome.passed >= 6
