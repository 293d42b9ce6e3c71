"""The real-server conformance suite fails exactly the cases a broken client breaks, on the real server.

The OpenAI client passes RealServerConformance against llama-cpp-python's server in ext-models-openai's tests; here
two deliberately broken subclasses run it against the same kind of server. One has the bug NOTES-worthy servers
expose: it leaves out `tool_choice` when it is "auto" (the API's default), which llama-cpp-python's
chatml-function-calling server answers by ignoring the tools. The other drops system messages and usage.
"""

from __future__ import annotations

import textwrap

import pytest

from ext.testing.can_fail import run_suite_in_subprocess

pytestmark = pytest.mark.integration

BROKEN = textwrap.dedent(
    """
    from typing import Any

    import openai
    import pytest

    from ext.core import RequestUsage, SystemMessage
    from ext.models.llama_cpp import default_model_path
    from ext.models.openai import OpenAIChatCompletionClient
    from ext.testing.conformance import RealServerConformance
    from ext.testing.llama_server import (
        CHAT_COMPLETIONS_FEATURES,
        CHAT_COMPLETIONS_NOT_APPLICABLE,
        start_llama_server,
    )


    @pytest.fixture(scope="session")
    def real_server():
        with start_llama_server(default_model_path()) as server:
            yield server


    class LeavesOutAutoToolChoice(OpenAIChatCompletionClient):
        async def _create(self, request):
            if request.tool_choice == "auto":
                request.extra = {**request.extra, "tool_choice": openai.NOT_GIVEN}
            return await super()._create(request)


    class LosesSystemMessagesAndUsage(OpenAIChatCompletionClient):
        async def _create(self, request):
            request.messages = [m for m in request.messages if not isinstance(m, SystemMessage)]
            result = await super()._create(request)
            return result.model_copy(update={"usage": RequestUsage()})


    class _Base(RealServerConformance):
        timeout_error = openai.APITimeoutError
        bad_request_error = openai.BadRequestError
        features = CHAT_COMPLETIONS_FEATURES
        not_applicable = CHAT_COMPLETIONS_NOT_APPLICABLE
        client_class: Any = None

        def make_client(self, server, **kwargs):
            # The server's own tool calling is what breaks here (SmolLM2's default would be ext's, at the prompt level).
            return self.client_class(
                server.model_alias, base_url=server.base_url, api_key="none", tool_calling="native", **kwargs
            )


    class TestLeavesOutAutoToolChoice(_Base):
        client_class = LeavesOutAutoToolChoice


    class TestLosesSystemMessagesAndUsage(_Base):
        client_class = LosesSystemMessagesAndUsage
    """
)


# The cases the two breakages touch, and their neighbours (each case is a real generation on a shared CPU).
CASES = "test_text_create or test_finish_reason_length or test_system_message or test_tool_choice or test_stream_text"


@pytest.mark.timeout(600)  # the inner run's cases each have the usual limit; this is their sum
def test_suite_fails_exactly_what_is_broken(pytester: pytest.Pytester) -> None:
    # A fresh interpreter: this run imports the SDK stack and must not share module caches with other runs.
    outcome = run_suite_in_subprocess(pytester, BROKEN, "-k", CASES, name="test_broken_clients")
    assert outcome.failed == [
        "TestLeavesOutAutoToolChoice::test_tool_choice_auto",
        "TestLosesSystemMessagesAndUsage::test_finish_reason_length",  # completion_tokens == 2 is checked
        "TestLosesSystemMessagesAndUsage::test_system_message_reaches_the_model",
        "TestLosesSystemMessagesAndUsage::test_text_create",
    ]
    assert outcome.passed == 2 * 7 - 4  # 8 cases per class, tool_choice_required not applicable (skipped)
