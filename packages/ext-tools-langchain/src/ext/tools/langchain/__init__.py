"""ext-tools-langchain: use any langchain-core tool as an ext tool (`LangChainToolAdapter`)."""

from .__about__ import __version__
from ._adapter import LangChainToolAdapter, LangChainToolError, adapt_toolkit

__all__ = ["LangChainToolAdapter", "LangChainToolError", "__version__", "adapt_toolkit"]
