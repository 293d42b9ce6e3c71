"""What a model can do, from a table of known families with prefix rules and safe defaults.

No name is ever an error: an unknown model gets `DEFAULT_MODEL_INFO` (text, tools and JSON mode on,
no vision, a context window of `DEFAULT_TOKEN_LIMIT`), and every client takes an override.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_TOKEN_LIMIT = 8192
"""Context window assumed for a model the table does not know."""


class ModelInfo(BaseModel):
    """Capabilities and limits of a model. `vision`, `function_calling` and `json_output` gate requests."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    vision: bool = False
    function_calling: bool = True
    json_output: bool = True
    structured_output: bool = False
    family: str = "unknown"
    context_window: int = Field(default=DEFAULT_TOKEN_LIMIT, gt=0)
    max_output_tokens: int | None = Field(default=None, gt=0)
    reasoning: bool = False


# Constants are built unvalidated, so importing ext.core builds no schema; a test validates every one.
DEFAULT_MODEL_INFO = ModelInfo.model_construct()


@dataclass(frozen=True)
class ModelRule:
    """Models whose normalised name starts with `prefix` have `info`."""

    prefix: str
    info: ModelInfo

    @classmethod
    def of(cls, prefix: str, **info: Any) -> ModelRule:
        """A rule for a table written in code: `info` fields are taken as given (no validation at import, so
        no schema is built when the table is defined). Tables from user input should pass a validated
        `ModelInfo`; `ModelTable.validate()` checks a whole table (call it in a test)."""
        unknown = info.keys() - ModelInfo.model_fields.keys()
        if unknown:
            raise TypeError(f"ModelRule.of({prefix!r}): unknown ModelInfo fields {sorted(unknown)}")
        return cls(prefix, ModelInfo.model_construct(**info))


# Longest prefix wins, so specific entries (gpt-4o-mini) can sit next to general ones (gpt-4o).
_KNOWN: tuple[ModelRule, ...] = (
    # OpenAI
    ModelRule.of("gpt-5", vision=True, structured_output=True, family="gpt-5", context_window=400_000, reasoning=True),
    ModelRule.of("gpt-4.1", vision=True, structured_output=True, family="gpt-4.1", context_window=1_047_576),
    ModelRule.of("gpt-4o", vision=True, structured_output=True, family="gpt-4o", context_window=128_000),
    ModelRule.of("gpt-4-turbo", vision=True, family="gpt-4", context_window=128_000),
    ModelRule.of("gpt-4", family="gpt-4", context_window=8_192),
    ModelRule.of("gpt-3.5-turbo", family="gpt-35", context_window=16_385),
    ModelRule.of("o1", vision=True, structured_output=True, family="o1", context_window=200_000, reasoning=True),
    ModelRule.of("o3", vision=True, structured_output=True, family="o3", context_window=200_000, reasoning=True),
    ModelRule.of("o4-mini", vision=True, structured_output=True, family="o4", context_window=200_000, reasoning=True),
    # Anthropic (direct and Bedrock ids are normalised to the same names)
    ModelRule.of("claude-3-haiku", vision=True, family="claude-3-haiku", context_window=200_000),
    ModelRule.of("claude-3-5", vision=True, family="claude-3-5", context_window=200_000),
    ModelRule.of("claude-3-7", vision=True, family="claude-3-7", context_window=200_000, reasoning=True),
    ModelRule.of(
        "claude", vision=True, structured_output=True, family="claude-4", context_window=200_000, reasoning=True
    ),
    # Open-weight families commonly served by Ollama, llama.cpp and Azure AI
    ModelRule.of("llama3.2-vision", vision=True, family="llama-3", context_window=128_000),
    ModelRule.of("llama3", family="llama-3", context_window=128_000),
    ModelRule.of("llama-3", family="llama-3", context_window=128_000),
    ModelRule.of("meta-llama-3", family="llama-3", context_window=128_000),
    ModelRule.of("qwen", family="qwen", context_window=32_768),
    ModelRule.of("mistral", family="mistral", context_window=32_768),
    ModelRule.of("phi-4", family="phi-4", context_window=16_384),
    ModelRule.of("phi4", family="phi-4", context_window=16_384),
    ModelRule.of("deepseek-r1", family="deepseek-r1", context_window=128_000, reasoning=True),
    ModelRule.of("gemma", family="gemma", context_window=8_192, function_calling=False),
)

_VENDOR_PREFIXES = ("us.", "eu.", "apac.", "global.", "anthropic.", "meta.", "openai/", "azure/")


def normalize_model_name(model: str) -> str:
    """The name used for lookup: lower case, vendor and region prefixes (Bedrock, routers) removed."""
    name = model.strip().lower()
    changed = True
    while changed:
        changed = False
        for prefix in _VENDOR_PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix) :]
                changed = True
    return name


class ModelTable:
    """An immutable table of prefix rules. `lookup` never raises."""

    __slots__ = ("_rules",)

    def __init__(self, rules: Iterable[ModelRule] = ()) -> None:
        self._rules = tuple(sorted(rules, key=lambda r: len(r.prefix), reverse=True))

    def extend(self, rules: Iterable[ModelRule]) -> ModelTable:
        """A new table with `rules` added (they win over existing rules of the same prefix)."""
        new = list(rules)
        prefixes = {r.prefix for r in new}
        return ModelTable([*new, *(r for r in self._rules if r.prefix not in prefixes)])

    def find(self, model: str) -> ModelInfo | None:
        """The info of the longest matching prefix, or None when no rule matches."""
        name = normalize_model_name(model)
        for rule in self._rules:
            if name.startswith(rule.prefix):
                return rule.info
        return None

    def lookup(self, model: str, default: ModelInfo = DEFAULT_MODEL_INFO) -> ModelInfo:
        """The info of `model`, or `default` for a name no rule matches."""
        return self.find(model) or default

    def __len__(self) -> int:
        return len(self._rules)

    def __iter__(self) -> Iterator[ModelRule]:
        return iter(self._rules)

    def validate(self) -> None:
        """Raise pydantic's `ValidationError` if any rule's info breaks `ModelInfo`'s constraints or fields."""
        for rule in self._rules:
            ModelInfo.model_validate(rule.info.model_dump(exclude_unset=True))


KNOWN_MODELS = ModelTable(_KNOWN)
"""The families ext knows. Providers extend it with their own rules."""


def resolve_model_info(
    model: str,
    *,
    table: ModelTable = KNOWN_MODELS,
    override: ModelInfo | Mapping[str, Any] | None = None,
    token_limit: int | None = None,
) -> ModelInfo:
    """The info a client uses: the table's entry (or the defaults), then the user's override.

    `override` may be a full `ModelInfo` or a partial mapping of fields to change; `token_limit`
    replaces the context window.
    """
    if isinstance(override, ModelInfo):
        info = override
    else:
        info = table.lookup(model)
        if override:
            info = ModelInfo.model_validate({**info.model_dump(), **dict(override)})
    if token_limit is not None:
        info = ModelInfo.model_validate({**info.model_dump(), "context_window": token_limit})
    return info
