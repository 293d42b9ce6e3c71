"""ext-cli: the `ext` command line (`ext chat`, `ext models`, `ext mcp`, `ext gateway`, `ext config check`)."""

from .__about__ import __version__
from ._errors import CliError
from ._main import cli, main

__all__ = ["CliError", "__version__", "cli", "main"]
