"""`python -m ext.cli`: the `ext` command."""

from ._main import main

main()
