"""README examples as code: find a distribution's ```python block so its tests can run it as written."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["python_example"]

_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def python_example(readme: Path, containing: str) -> str:
    """The first ```python block of `readme` whose code contains `containing` (AssertionError if none does)."""
    blocks = [block for block in _BLOCK.findall(readme.read_text(encoding="utf-8")) if containing in block]
    assert blocks, f"{readme} has no python example containing {containing!r}"
    return str(blocks[0])
