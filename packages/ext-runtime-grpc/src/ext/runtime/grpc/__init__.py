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
    "DEFAULT_MAX_MESSAGE_BYTES",
    "JSON_TYPE",
    "AuthenticationError",
    "CloudEvent",
    "ConnectionOptions",
    "Gateway",
    "GrpcAgentRuntime",
    "InMemoryRegistry",
    "LocalCluster",
    "ProtobufMessageSerializer",
    "RedisRegistry",
    "Registry",
    "RegistryUnavailableError",
    "SerializationError",
    "__version__",
    "from_sdk_event",
    "gateway_main",
    "to_sdk_event",
]
