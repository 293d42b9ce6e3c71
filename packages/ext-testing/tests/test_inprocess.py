"""ScriptedModel (the in-process peer) and the grammars that force a reply; the llama.cpp adapter itself is
exercised by ext-models-llama-cpp's conformance run on a real model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

import pytest

from ext.testing.inprocess import InProcessRequest, ScriptedModel, gbnf_literal, reply_grammar
from ext.testing.script import Fault, NeutralRequest, Reply


def _decode(body: Mapping[str, Any]) -> NeutralRequest:
    return NeutralRequest(model=body.get("model"), stream=bool(body.get("stream")))


def test_gbnf_literal_escapes() -> None:
    assert gbnf_literal('say "hi"\\\n') == '"say \\"hi\\"\\\\\\x0A"'
    assert gbnf_literal("café") == '"café"'


def test_reply_grammar_forces_the_text_or_runs_on() -> None:
    assert reply_grammar("one two") == 'root ::= "one " "two"\n'
    assert reply_grammar("") == 'root ::= ""\n'
    endless = reply_grammar("a", endless=True)
    assert endless.startswith('root ::= "a" filler\n') and 'filler ::= "~" filler' in endless


async def test_script_is_taken_in_order_from_any_thread() -> None:
    async with ScriptedModel(_decode) as model:
        model.enqueue(Reply(text="first"), lambda request: Reply(text=f"call {request.index}"))
        taken: list[tuple[InProcessRequest, Reply | Fault]] = []
        waiter = asyncio.ensure_future(model.wait_for_requests(2))
        thread = threading.Thread(target=lambda: taken.extend([model.take({"model": "m"}), model.take({})]))
        thread.start()
        await asyncio.get_running_loop().run_in_executor(None, thread.join)
        requests = await asyncio.wait_for(waiter, 5)
        assert [r.index for r in requests] == [0, 1]
        first, second = (item for _, item in taken)
        assert isinstance(first, Reply) and first.text == "first"
        assert isinstance(second, Reply) and second.text == "call 1"
        assert model.decode(requests[0]).model == "m"
        model.ended(requests[0], completed=False)
        await asyncio.wait_for(requests[0].disconnected.wait(), 5)
        assert requests[0].completed is False


async def test_exhausted_script_and_network_faults_are_refused() -> None:
    async with ScriptedModel(_decode) as model:
        with pytest.raises(ValueError, match="cannot produce Fault"):
            model.enqueue(Fault("rate_limit"))
        model.enqueue(Fault("hang"))
        assert isinstance(model.take({})[1], Fault)
        with pytest.raises(AssertionError, match="script exhausted"):
            model.take({})
        assert len(model.errors) == 1
        model.default = Reply(text="d")
        assert model.take({})[1] == Reply(text="d")
        with pytest.raises(TimeoutError, match="expected 9"):
            await model.wait_for_requests(9, timeout=0.01)
