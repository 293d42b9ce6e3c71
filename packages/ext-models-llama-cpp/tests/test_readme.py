"""The README's usage example runs as written (on the embedded default model, SmolLM2), and what it says about
tool-call ids is what the client does."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from ext.core import FunctionExecutionResult, FunctionExecutionResultMessage, UserMessage
from ext.testing.inprocess import ScriptedModel
from ext.testing.sample_inputs import ADD
from ext.testing.script import Reply, ToolCallSpec

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs() -> None:
    code = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[0]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "Paris" in lines[0] and "prompt_tokens" in lines[0]
    assert "Paris" in lines[1]
    assert lines[2].startswith("country=") and "capital=" in lines[2]
    assert re.fullmatch(r"\d+ prompt tokens; \d+ left", lines[3])


async def test_readme_says_how_tool_call_ids_are_formed(scripted: ScriptedModel, make_client: Any) -> None:
    """The README called the ids fresh; they are `call_<turn>_<index>`, and its example id is the real one."""
    text = " ".join(README.read_text().split())
    assert "fresh ids" not in text
    assert "`call_<turn>_<index>`" in text
    assert "the first call answering `[UserMessage(...)]` with tools is `call_2_0`" in text
    client = make_client(scripted)
    two_calls = Reply(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2}), ToolCallSpec("add", {"a": 3, "b": 4})])
    scripted.enqueue(two_calls, two_calls)
    first = await client.create([UserMessage(content="Hi")], tools=[ADD])
    assert isinstance(first.content, list)
    assert [c.id for c in first.content] == ["call_2_0", "call_2_1"]
    # The next turn: 2 ext messages more (the calls, their results) -> turn 4; the same ids on every run.
    results = [FunctionExecutionResult(call_id=c.id, name="add", content="3") for c in first.content]
    history = [UserMessage(content="Hi"), first.to_assistant_message(), FunctionExecutionResultMessage(content=results)]
    second = await client.create(history, tools=[ADD])
    assert isinstance(second.content, list)
    assert [c.id for c in second.content] == ["call_4_0", "call_4_1"]
