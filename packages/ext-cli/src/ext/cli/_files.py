"""Reading the JSON files options name (`--schema FILE`, `--http-tool FILE`), with one set of error messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ._errors import CliError


def read_json_file(path: Path, option: str) -> Any:
    """The JSON value in `path`; a missing, unreadable or malformed file raises a `CliError` that starts with
    `option` (the flag and the file as the user wrote them, e.g. `--schema out.json`)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(f"{option}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{option}: cannot read it: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{option}: not valid JSON: {exc.msg} (line {exc.lineno})") from None
