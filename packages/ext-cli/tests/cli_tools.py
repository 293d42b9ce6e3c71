"""Plain functions the `ext chat --tool cli_tools:...` tests load."""

from __future__ import annotations


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}, 21 C"


def broken(city: str) -> str:
    """Always fails."""
    raise RuntimeError(f"no station for {city}")
