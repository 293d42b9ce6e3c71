"""The `budget:` entry of a pipeline file (published under the `ext.pipeline.middleware` entry points).

```yaml
middleware:
  - tool_loop: {...}
  - budget:
      limits: [{cost: 5, window: 86400}, {tokens: 20000, per_run: true}]
      key: caller
      prices_file: prices.yaml       # overrides of the genai-prices table (relative to the working directory)
      backend: redis                 # the URL from $EXT_REDIS_URL, the password from $REDIS_PASSWORD
```

`check` finds every error `build` would (the price file included), without connecting anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ext.core import ConfigurationError

from ._budget import Budget
from ._budget_middleware import BudgetMiddleware
from ._prices import PriceTable
from ._ratelimit_file import _known, redis_connection

__all__ = ["BudgetEntry", "budget_entry"]

_BUDGET_KEYS = ("limits", "currency", "usd_rate", "allow_unpriced", "name")
_KEYS = (*_BUDGET_KEYS, "key", "prices_file", "use_price_table", "backend", "redis_url_env", "prefix")


def _middleware(settings: Mapping[str, Any], where: str, *, offline: bool) -> BudgetMiddleware:
    _known(settings, where, _KEYS)
    if "limits" not in settings:
        raise ConfigurationError(f"{where}.limits is required: a list such as [{{cost: 5, window: 86400}}]")
    use_table = settings.get("use_price_table", True)
    if not isinstance(use_table, bool):
        raise ConfigurationError(f"{where}.use_price_table must be true or false, got {use_table!r}")
    prices_file = settings.get("prices_file")
    try:
        if prices_file is None:
            prices = PriceTable(use_table=use_table)
        elif isinstance(prices_file, str):
            prices = PriceTable.from_file(prices_file, use_table=use_table)
        else:
            raise ConfigurationError(f"prices_file must be a path, got {type(prices_file).__name__}")
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}.prices_file: {exc}") from None
    connection = redis_connection(settings, where)
    store = None
    if connection is not None and not offline:
        from ._budget_redis import RedisBudgetStore

        prefix = settings.get("prefix")
        store = RedisBudgetStore(connection, **({} if prefix is None else {"prefix": prefix}))
    limits = settings["limits"]
    if not isinstance(limits, list):
        raise ConfigurationError(f"{where}.limits must be a list of limits, got {type(limits).__name__}")
    try:
        budget = Budget(
            limits,
            store=store,
            prices=prices,
            close_store=True,
            **{k: settings[k] for k in _BUDGET_KEYS[1:] if k in settings},
        )
        return BudgetMiddleware(budget, key=settings.get("key", "global"))
    except ConfigurationError as exc:
        raise ConfigurationError(
            f"{where}.{exc}"
            if str(exc).startswith(("limits", "key ", "currency", "usd_rate", "name"))
            else f"{where}: {exc}"
        ) from None


class BudgetEntry:
    """The `budget:` middleware kind of pipeline files."""

    def check(self, settings: dict[str, Any], where: str) -> None:
        _middleware(settings, where, offline=True)

    def build(self, settings: dict[str, Any], where: str) -> BudgetMiddleware:
        return _middleware(settings, where, offline=False)


budget_entry = BudgetEntry()
