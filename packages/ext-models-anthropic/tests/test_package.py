"""Package shape: public names, lazy SDK import, entry points."""

from __future__ import annotations

import subprocess
import sys

import ext.models.anthropic as package
from ext.core import registered_components


def test_mapping_does_not_import_the_sdk() -> None:
    code = (
        "import sys\n"
        "from ext.models.anthropic import map_request, map_response, StreamState\n"
        "assert 'anthropic' not in sys.modules, 'the SDK was imported'\n"
        "from ext.models.anthropic import AnthropicChatCompletionClient\n"
        "assert 'anthropic' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_public_names() -> None:
    for name in package.__all__:
        assert getattr(package, name) is not None
    assert set(dir(package)) >= set(package.__all__)


def test_registered_as_a_component() -> None:
    assert registered_components()["AnthropicChatCompletionClient"] == (
        "ext.models.anthropic:AnthropicChatCompletionClient"
    )


def test_every_rule_of_the_anthropic_table_is_a_valid_model_info() -> None:
    # The rules are written in code (ModelRule.of, unvalidated at import); they are validated here.
    package.ANTHROPIC_MODELS.validate()
    assert package.ANTHROPIC_MODELS.lookup("claude-2.1").context_window == 100_000
    assert package.ANTHROPIC_MODELS.lookup("some-proxy-name").family == "claude"
