"""What a call costs: `price_usage(model, usage)` and `PriceTable` (the `genai-prices` table plus overrides).

The table is the snapshot bundled in the `genai-prices` wheel, read through its public `calc_price`; ext never
starts its `UpdatePrices` updater, so pricing makes no network call (a test checks this with an audit hook). An
application that starts the updater itself gets the updated table here too. Prices are in US dollars.

ext's `RequestUsage` maps onto the table's units as its providers report them: `prompt_tokens` is every input token
(cached ones included, priced at the cache-read price where the table has one), `completion_tokens` every output
token (reasoning included, priced at the reasoning price where the table has one).

Overrides are per model (the model name as the call gives it, compared without case), in price per million tokens:
`input_mtok`, `output_mtok`, `cache_read_mtok`, `cache_write_mtok`, `output_reasoning_mtok`. They win over the
table, so a model the table lacks or prices differently (a fine-tune, a local model at 0) gets the right price.
An override file is JSON or YAML: `{"models": {"my-model": {"input_mtok": 1.5, "output_mtok": 2}}}`.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from ext.core import ConfigurationError, RequestUsage

__all__ = ["PRICE_KEYS", "PriceTable", "price_usage"]

PRICE_KEYS = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok", "output_reasoning_mtok")


def _price(value: object, where: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        raise ConfigurationError(f"{where} must be a price per million tokens (a number >= 0), got {value!r}")
    try:
        price = Decimal(str(value))
    except InvalidOperation:
        raise ConfigurationError(f"{where} must be a price per million tokens (a number >= 0), got {value!r}") from None
    if not price.is_finite() or price < 0:
        raise ConfigurationError(f"{where} must be a price per million tokens (a number >= 0), got {value!r}")
    return price


def _usage(usage: RequestUsage) -> Any:
    from genai_prices import Usage

    values: dict[str, int] = {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}
    if usage.cached_tokens:
        values["cache_read_tokens"] = min(usage.cached_tokens, usage.prompt_tokens)
    if usage.reasoning_tokens:
        values["output_reasoning_tokens"] = min(usage.reasoning_tokens, usage.completion_tokens)
    return Usage(**values)


class PriceTable:
    """Prices of models: `overrides` first, then the `genai-prices` table (unless `use_table=False`).

    `price(model, usage, provider=...)` gives the cost in dollars as a `Decimal`, or None for a model neither
    knows. `provider` (an ext provider name such as `openai`) narrows the table's search; an unknown one is ignored.
    """

    def __init__(self, overrides: Mapping[str, Mapping[str, Any]] | None = None, *, use_table: bool = True) -> None:
        from genai_prices.types import ModelPrice

        if overrides is not None and not isinstance(overrides, Mapping):
            raise ConfigurationError(f"overrides must map model names to prices, got {type(overrides).__name__}")
        self._overrides: dict[str, Any] = {}
        for model, prices in (overrides or {}).items():
            where = f"overrides[{model!r}]"
            if not isinstance(model, str) or not model:
                raise ConfigurationError(f"overrides: a model name must be a non-empty str, got {model!r}")
            if not isinstance(prices, Mapping):
                raise ConfigurationError(f"{where} must map {', '.join(PRICE_KEYS)} to prices")
            unknown = sorted(set(map(str, prices)) - set(PRICE_KEYS))
            if unknown:
                raise ConfigurationError(f"{where}: unknown price keys {unknown}; expected {', '.join(PRICE_KEYS)}")
            model_price = ModelPrice(**{k: _price(v, f"{where}.{k}") for k, v in prices.items()})
            self._overrides[model.lower()] = _Override(model_price)
        self._use_table = bool(use_table)
        self._known: dict[tuple[str, str | None], Any] = {}

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, use_table: bool = True) -> PriceTable:
        """A table with the overrides of a JSON or YAML file (`{"models": {name: {price_key: number}}}`); errors
        name the file and the field."""
        from ext.pipeline import read_config_file

        data = read_config_file(path)
        models = data.get("models")
        unknown = sorted(set(data) - {"models"})
        if unknown or not isinstance(models, Mapping):
            raise ConfigurationError(f"{path}: expected {{models: {{<model>: {{input_mtok: ..., ...}}}}}}")
        try:
            return cls(models, use_table=use_table)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{path}: {exc}") from None

    def __repr__(self) -> str:
        return f"PriceTable(overrides={len(self._overrides)}, use_table={self._use_table})"

    def _find(self, model: str, provider: str | None) -> Any:
        """The model's `ModelPrice`-like pricer (something with `calc_price(usage)`), or None."""
        lowered = model.lower()
        override = self._overrides.get(lowered)
        if override is not None:
            return override
        if not self._use_table or not model:
            return None
        cache_key = (lowered, provider)
        if cache_key in self._known:
            return self._known[cache_key]
        found = _TablePrice(model, provider) if _table_knows(model, provider) else None
        if found is None and provider is not None and _table_knows(model, None):
            found = _TablePrice(model, None)
        self._known[cache_key] = found
        return found

    def knows(self, model: str, *, provider: str | None = None) -> bool:
        """Whether this table has a price for `model`."""
        return self._find(model, provider) is not None

    def price_tokens(
        self, model: str, prompt_tokens: int, completion_tokens: int, *, provider: str | None = None
    ) -> Decimal | None:
        """`price` of plain token counts (no cached or reasoning tokens), without building a `RequestUsage`."""
        pricer = self._find(model, provider)
        if pricer is None:
            return None
        linear = getattr(pricer, "linear", None)
        if linear is not None:
            return linear.price_counts(prompt_tokens, completion_tokens, None, None)  # type: ignore[no-any-return]
        return self.price(model, RequestUsage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens))

    def price(self, model: str, usage: RequestUsage, *, provider: str | None = None) -> Decimal | None:
        """The cost of `usage` on `model` in dollars, or None when no price is known."""
        pricer = self._find(model, provider)
        if pricer is None:
            return None
        linear = getattr(pricer, "linear", None)
        if linear is not None:
            return linear.price(usage)  # type: ignore[no-any-return]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            result = pricer.calc_price(_usage(usage))
        return Decimal(result["total_price"])


class _TablePrice:
    """A model of the `genai-prices` table. Priced through its public `calc_price` (which picks the price in force
    at the time of the call, and tiered prices, itself), or, when the model's price is linear (a plain price per
    token kind, no tiers), by `_Linear` from the price `calc_price` found first: the same Decimal result, about 50
    times faster. A test holds the two to the same result over the whole table."""

    __slots__ = ("linear", "model", "provider")

    def __init__(self, model: str, provider: str | None) -> None:
        from genai_prices import Usage, calc_price

        self.model = model
        self.provider = provider
        found = calc_price(Usage(input_tokens=0, output_tokens=0), model, provider_id=provider)
        self.linear = _Linear.of(found.model_price)

    def calc_price(self, usage: Any) -> Mapping[str, Any]:
        from genai_prices import calc_price

        result = calc_price(usage, self.model, provider_id=self.provider)
        return {"total_price": result.total_price}


class _Override:
    """A price given in the overrides: genai-prices' `ModelPrice`, and its linear form."""

    __slots__ = ("linear", "model_price")

    def __init__(self, model_price: Any) -> None:
        self.model_price = model_price
        self.linear = _Linear.of(model_price)

    def calc_price(self, usage: Any) -> Mapping[str, Any]:
        return self.model_price.calc_price(usage)  # type: ignore[no-any-return]


_MILLION = Decimal(1_000_000)
_THOUSAND = Decimal(1000)


class _Linear:
    """A price that is a plain sum over token kinds: cached input and reasoning output at their own prices where
    given (else at the input and output prices, as genai-prices counts them), plus a price per request."""

    __slots__ = ("cache_read", "input", "output", "reasoning", "request")

    def __init__(self, prices: Mapping[str, Decimal]) -> None:
        self.input = prices.get("input_mtok")
        self.output = prices.get("output_mtok")
        self.cache_read = prices.get("cache_read_mtok")
        self.reasoning = prices.get("output_reasoning_mtok")
        self.request = prices.get("requests_kcount")

    @classmethod
    def of(cls, model_price: Any) -> _Linear | None:
        """The linear form of a genai-prices `ModelPrice`, or None when it has tiers or prices a unit this mapping
        does not know (it then goes through `calc_price`)."""
        prices: dict[str, Decimal] = {}
        for name, value in vars(model_price).items():
            if value is None or name.startswith("_"):
                continue
            if not isinstance(value, Decimal):
                return None  # tiered
            if name in _LINEAR_KEYS:
                prices[name] = value
            elif not _UNREPORTED.match(name):
                return None  # a unit genai-prices may infer from what ext reports (audio, image, text-only...)
        return cls(prices)

    def price(self, usage: RequestUsage) -> Decimal:
        return self.price_counts(
            usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens, usage.reasoning_tokens
        )

    def price_counts(self, prompt: int, completion: int, cached: int | None, reasoning: int | None) -> Decimal:
        total = Decimal(0)
        cached = min(cached or 0, prompt)
        reasoning = min(reasoning or 0, completion)
        if self.input is not None:
            total += (prompt - cached if self.cache_read is not None else prompt) * self.input
        if self.cache_read is not None:
            total += cached * self.cache_read
        if self.output is not None:
            total += (completion - reasoning if self.reasoning is not None else completion) * self.output
        if self.reasoning is not None:
            total += reasoning * self.reasoning
        total /= _MILLION
        if self.request is not None:
            total += self.request / _THOUSAND
        return total


# Units ext never reports, which genai-prices then counts as 0: cache writes, and counts of things other than tokens
# (web searches...) except requests.
_UNREPORTED = re.compile(r"cache_write(_\w+)?_mtok|(?!requests_)\w+_kcount")
_LINEAR_KEYS = frozenset(("input_mtok", "output_mtok", "cache_read_mtok", "output_reasoning_mtok", "requests_kcount"))


def _table_knows(model: str, provider: str | None) -> bool:
    from genai_prices import Usage, calc_price

    try:
        calc_price(Usage(input_tokens=0, output_tokens=0), model, provider_id=provider)
    except LookupError:
        return False
    return True


_DEFAULT: PriceTable | None = None


def price_usage(
    model: str, usage: RequestUsage, *, provider: str | None = None, table: PriceTable | None = None
) -> Decimal | None:
    """The cost in US dollars of `usage` on `model` (`provider`: an ext provider name such as `openai`, to narrow
    the search), from `table` (default: the `genai-prices` table alone), or None when the model has no price."""
    global _DEFAULT
    if table is None:
        if _DEFAULT is None:
            _DEFAULT = PriceTable()
        table = _DEFAULT
    return table.price(model, usage, provider=provider)
