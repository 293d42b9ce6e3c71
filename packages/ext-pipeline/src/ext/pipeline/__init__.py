"""ext-pipeline: the chat pipeline. Any model client wrapped in middleware (logging, response cache, retries, the
tool loop), built in code (`ChatClientBuilder`) or from a pipeline file (`load_pipeline`), and clients built from
configuration (`build_client`)."""

from .__about__ import __version__
from ._builder import ChatClientBuilder
from ._building import build_client, check_secrets, provider_class
from ._cache import DEFAULT_CACHE_TTL, CacheMiddleware, CacheStore, CacheTTL, InMemoryCacheStore, check_ttl
from ._middleware import LoggingMiddleware, RetryMiddleware
from ._middleware_kinds import ENTRY_POINT_GROUP, MiddlewareKind, middleware_kinds
from ._pipeline import (
    RETRY_MAX_WAIT,
    ChatCall,
    ChatItem,
    ChatMiddleware,
    ChatPipeline,
    CreateNext,
    StreamNext,
    ToolInvocation,
    ToolNext,
)
from ._pipeline_config import PipelineCheck, check_pipeline, load_pipeline, pipeline_from_config, read_config_file
from ._tool_loop import (
    HoldCallback,
    ModelTurn,
    ToolCallFinished,
    ToolCallHeld,
    ToolCallStarted,
    ToolLoop,
    ToolLoopEvent,
)

__all__ = [
    # application code: building pipelines and clients
    "ChatClientBuilder",
    "ChatPipeline",
    "PipelineCheck",
    "build_client",
    "check_pipeline",
    "check_secrets",
    "load_pipeline",
    "pipeline_from_config",
    "provider_class",
    "read_config_file",
    # application code: the middleware that ships here
    "CacheMiddleware",
    "DEFAULT_CACHE_TTL",
    "InMemoryCacheStore",
    "LoggingMiddleware",
    "RetryMiddleware",
    "ToolLoop",
    # application code: the tool loop's events
    "ModelTurn",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolLoopEvent",
    "ToolCallHeld",
    "HoldCallback",
    # middleware and cache-store authors
    "CacheStore",
    "CacheTTL",
    "ChatCall",
    "ChatItem",
    "ChatMiddleware",
    "CreateNext",
    "ENTRY_POINT_GROUP",
    "MiddlewareKind",
    "RETRY_MAX_WAIT",
    "StreamNext",
    "ToolInvocation",
    "ToolNext",
    "check_ttl",
    "middleware_kinds",
    "__version__",
]
