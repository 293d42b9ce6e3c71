"""ext-tools-graphrag: GraphRAG global and local search as ext tools (`GlobalSearchTool`, `LocalSearchTool`)."""

from .__about__ import __version__
from ._config import (
    GlobalContextConfig,
    GlobalDataConfig,
    GlobalSearchToolConfig,
    LocalContextConfig,
    LocalDataConfig,
    LocalSearchConfig,
    LocalSearchToolConfig,
    MapReduceConfig,
    ModelSettings,
    SettingsSource,
)
from ._tools import GlobalSearchTool, GraphRagSettingsError, LocalSearchTool, QueryArgs

__all__ = [
    # application code: the tools
    "GlobalSearchTool",
    "GraphRagSettingsError",
    "LocalSearchTool",
    "QueryArgs",
    # application code: explicit configuration
    "GlobalContextConfig",
    "GlobalDataConfig",
    "GlobalSearchToolConfig",
    "LocalContextConfig",
    "LocalDataConfig",
    "LocalSearchConfig",
    "LocalSearchToolConfig",
    "MapReduceConfig",
    "ModelSettings",
    "SettingsSource",
    "__version__",
]
