"""The chat-client conformance suite fails exactly the cases a broken client breaks.

The real OpenAI client passes the whole suite in ext-models-openai's tests; here two deliberately
broken subclasses of it run the same suite, and each must fail precisely where it is broken.
"""

from __future__ import annotations

import textwrap

import pytest

from ext.testing.can_fail import run_suite_inline

BROKEN = textwrap.dedent(
    """
    from typing import Any

    import openai

    from ext.core import CreateResult, RequestUsage, SystemMessage
    from ext.models.openai import OpenAIChatCompletionClient
    from ext.testing.conformance import ChatClientConformance
    from ext.testing.servers import OpenAIServer

    SECRET = "sk-conformance-secret-0000"


    class LosesUsageAndSystemMessages(OpenAIChatCompletionClient):
        async def _create(self, request):
            request.messages = [m for m in request.messages if not isinstance(m, SystemMessage)]
            result = await super()._create(request)
            return result.model_copy(update={"usage": RequestUsage()})


    class SwallowsErrors(OpenAIChatCompletionClient):
        async def _create(self, request):
            try:
                return await super()._create(request)
            except (openai.RateLimitError, openai.InternalServerError):
                return CreateResult(finish_reason="stop", content="", usage=RequestUsage())


    class _Base(ChatClientConformance):
        rate_limit_error = openai.RateLimitError
        server_error = openai.InternalServerError
        connection_error = openai.APIConnectionError
        timeout_error = openai.APITimeoutError
        secret = SECRET
        features = frozenset({"json_mode", "parallel_tool_calls", "tool_choice_required"})
        unsupported_options = [({"top_k": 5}, "top_k")]
        client_class: Any = None

        def make_server(self):
            return OpenAIServer(api_key=SECRET)

        def make_client(self, server, **kwargs):
            return self.client_class(
                "gpt-4o-mini", base_url=server.base_url + "/v1", api_key=SECRET, bundled_encodings=False, **kwargs
            )


    class TestLosesUsage(_Base):
        client_class = LosesUsageAndSystemMessages


    class TestSwallowsErrors(_Base):
        client_class = SwallowsErrors
    """
)


def test_suite_fails_exactly_what_is_broken(pytester: pytest.Pytester) -> None:
    outcome = run_suite_inline(pytester, BROKEN, name="test_broken_clients")
    assert outcome.failed == [
        "TestLosesUsage::test_system_messages_anywhere",
        "TestLosesUsage::test_text_create",
        "TestLosesUsage::test_usage_is_accounted",
        "TestSwallowsErrors::test_rate_limit_forever_raises_the_provider_error",
        "TestSwallowsErrors::test_rate_limit_with_retry_after_is_retried",
        "TestSwallowsErrors::test_server_error",
        "TestSwallowsErrors::test_server_error_is_retried",
    ]
    assert outcome.passed > 40
