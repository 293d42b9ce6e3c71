"""ext-runtime-grpc: the distributed agent runtime (gateway, `GrpcAgentRuntime` workers, protobuf and CloudEvents)."""

from .__about__ import __version__
from ._cli import main as gateway_main
from ._cluster import LocalCluster
from ._connection import ConnectionOptions
from ._gateway import Gateway
from ._redis_registry import RedisRegistry
from ._registry import InMemoryRegistry, Registry, RegistryUnavailableError
from ._serializer import (
    JSON_TYPE,
    ProtobufMessageSerializer,
    SerializationError,
    from_sdk_event,
    to_sdk_event,
)
from ._wire import DEFAULT_MAX_MESSAGE_BYTES, AuthenticationError
from ._worker import GrpcAgentRuntime
from .protos.cloudevent_pb2 import CloudEvent

__all__ = [
    # application code: workers and the gateway
    "ConnectionOptions",
    "Gateway",
    "gateway_main",
    "GrpcAgentRuntime",
    "LocalCluster",
    # application code: the registry (replicas share one in Redis)
    "InMemoryRegistry",
    "RedisRegistry",
    "Registry",
    # application code: errors
    "AuthenticationError",
    "RegistryUnavailableError",
    "SerializationError",
    # the wire: protobuf messages and CloudEvents
    "CloudEvent",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "from_sdk_event",
    "JSON_TYPE",
    "ProtobufMessageSerializer",
    "to_sdk_event",
    "__version__",
]
