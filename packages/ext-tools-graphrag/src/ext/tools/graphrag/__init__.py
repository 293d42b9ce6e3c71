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
    "GlobalContextConfig",
    "GlobalDataConfig",
    "GlobalSearchTool",
    "GlobalSearchToolConfig",
    "GraphRagSettingsError",
    "LocalContextConfig",
    "LocalDataConfig",
    "LocalSearchConfig",
    "LocalSearchTool",
    "LocalSearchToolConfig",
    "MapReduceConfig",
    "ModelSettings",
    "QueryArgs",
    "SettingsSource",
    "__version__",
]
