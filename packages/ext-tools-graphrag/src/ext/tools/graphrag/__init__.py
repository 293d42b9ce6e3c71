"""ext-tools-graphrag: GraphRAG global and local search as ext tools."""

from .__about__ import __version__

__all__ = ["__version__"]
