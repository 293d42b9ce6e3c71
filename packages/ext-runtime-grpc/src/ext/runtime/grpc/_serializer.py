"""`ProtobufMessageSerializer`: messages to bytes and CloudEvents (protobuf format) and back."""

from __future__ import annotations

import builtins
import dataclasses
import itertools
import json
import uuid
from collections.abc import Mapping
from datetime import timezone
from typing import Any

from google.protobuf import any_pb2, symbol_database
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as ProtoMessage
from pydantic import BaseModel, TypeAdapter, ValidationError

from ext.core import ExtError

from .protos.cloudevent_pb2 import CloudEvent

JSON_TYPE = "ext.json"
"""The type name of plain JSON values (str, int, float, bool, None, list, dict), which need no registration."""

PROTOBUF_CONTENT_TYPE = "application/protobuf"
JSON_CONTENT_TYPE = "application/json"
SPEC_VERSION = "1.0"
_TYPE_URL_PREFIX = "type.googleapis.com/"

_JSON_NATIVE = (str, int, float, bool, list, dict, type(None))

# Cached CloudEvent templates, one per (message class, source): beyond this many, the cache starts over.
_MAX_TEMPLATES = 4096


class SerializationError(ExtError, ValueError):
    """A message cannot be serialized or deserialized (unregistered type, bad payload)."""


class ProtobufMessageSerializer:
    """Turns messages into bytes and CloudEvents and back.

    - protobuf messages: their wire format, under their full name (`ext.runtime.v1.AgentId`); no registration.
    - pydantic models and dataclasses: JSON, under a registered fully-qualified type name
      (`register(Model)` uses `module.QualName`; pass `type_name=` to choose another).
    - plain JSON values (str, int, float, bool, None, list, dict): JSON under `ext.json`.

    A receiver decodes only types it knows (registered, or protobuf classes it has imported): nothing from the
    wire makes it import code.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, type[Any]] = {}
        self._by_type: dict[type[Any], str] = {}
        self._adapters: dict[type[Any], TypeAdapter[Any]] = {}
        # Decoding's hot path: `type.googleapis.com/<name>` -> registered protobuf class.
        self._by_url: dict[str, type[ProtoMessage]] = {}
        # Encoding's hot path: the attributes every event of one class from one source shares, merged in one call.
        self._templates: dict[tuple[type[Any], str], tuple[CloudEvent, bool]] = {}
        self._id_prefix = f"{uuid.uuid4().hex[:16]}-"
        self._event_ids = itertools.count(1)

    # --- registry --------------------------------------------------------------------------------------

    def register(self, message_type: type[Any], type_name: str | None = None) -> str:
        """Register a protobuf, pydantic or dataclass message class; returns its type name."""
        if not isinstance(message_type, type):
            raise TypeError(f"message_type must be a class, got {type(message_type).__name__}")
        if issubclass(message_type, ProtoMessage):
            name = message_type.DESCRIPTOR.full_name
            if type_name is not None and type_name != name:
                raise ValueError(f"type_name of a protobuf message is its full name {name!r}, got {type_name!r}")
        elif issubclass(message_type, BaseModel) or dataclasses.is_dataclass(message_type):
            name = type_name if type_name is not None else f"{message_type.__module__}.{message_type.__qualname__}"
        else:
            raise TypeError(
                f"message_type must be a protobuf message, pydantic model or dataclass, got {message_type.__qualname__}"
            )
        if not name or not isinstance(name, str) or name == JSON_TYPE:
            raise ValueError(f"type_name must be a non-empty string other than {JSON_TYPE!r}, got {name!r}")
        existing = self._by_name.get(name)
        if existing is not None and existing is not message_type:
            raise ValueError(f"type name {name!r} is already registered for {existing.__qualname__}")
        self._by_name[name] = message_type
        self._by_type[message_type] = name
        if issubclass(message_type, ProtoMessage):
            self._by_url[_TYPE_URL_PREFIX + name] = message_type
        # A class registered again travels under its new name from now on.
        self._templates.clear()
        return name

    def is_registered(self, message_type: type[Any]) -> bool:
        return message_type in self._by_type

    def type_name(self, message: Any) -> str:
        """The type name a message travels under."""
        cls = type(message)
        name = self._by_type.get(cls)
        if name is not None:
            return name
        if isinstance(message, ProtoMessage):
            return self.register(cls)
        if isinstance(message, _JSON_NATIVE):
            return JSON_TYPE
        if isinstance(message, BaseModel) or dataclasses.is_dataclass(message):
            raise SerializationError(
                f"{cls.__module__}.{cls.__qualname__} is not registered: call register({cls.__qualname__}) "
                "on the serializer (or register_message_type on the runtime) on every process that sends or "
                "receives it"
            )
        raise SerializationError(
            f"cannot serialize {cls.__qualname__}: messages must be protobuf messages, pydantic models, "
            "dataclasses or plain JSON values"
        )

    def resolve(self, type_name: str) -> type[Any] | None:
        """The class registered under `type_name` (or an imported protobuf class of that full name)."""
        cls = self._by_name.get(type_name)
        if cls is not None:
            return cls
        try:
            found = symbol_database.Default().GetSymbol(type_name)
        except KeyError:
            return None
        self.register(found)
        return found

    # --- bytes -----------------------------------------------------------------------------------------

    def serialize(self, message: Any) -> bytes:
        """The message's bytes: protobuf wire format, or UTF-8 JSON for pydantic, dataclass and JSON values."""
        if isinstance(message, ProtoMessage):
            return message.SerializeToString()
        name = self.type_name(message)
        if name == JSON_TYPE:
            return _dump_json(message)
        if isinstance(message, BaseModel):
            return message.model_dump_json().encode()
        return self._adapter(type(message)).dump_json(message)

    def deserialize(self, data: bytes, message_type: str | type[Any]) -> Any:
        """Rebuild a message from `serialize`'s bytes; `message_type` is the class or its type name."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        if isinstance(message_type, str):
            if message_type == JSON_TYPE:
                try:
                    return json.loads(bytes(data))
                except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than Python's stack
                    raise SerializationError(f"payload of type {JSON_TYPE!r} is not valid JSON: {exc}") from None
            cls = self.resolve(message_type)
            if cls is None:
                raise SerializationError(
                    f"unknown message type {message_type!r}: register its class with the serializer "
                    "(or register_message_type on the runtime)"
                )
        elif isinstance(message_type, type):
            cls = message_type
            if not issubclass(cls, ProtoMessage):
                self.type_name_of_class(cls)
        else:
            raise TypeError(f"message_type must be a class or a type name, got {type(message_type).__name__}")
        try:
            if issubclass(cls, ProtoMessage):
                message = cls()
                message.ParseFromString(bytes(data))
                return message
            if issubclass(cls, BaseModel):
                return cls.model_validate_json(bytes(data))
            return self._adapter(cls).validate_json(bytes(data))
        except (DecodeError, ValidationError, ValueError) as exc:
            raise SerializationError(f"payload is not a valid {cls.__qualname__}: {exc}") from None

    def type_name_of_class(self, cls: type[Any]) -> str:
        name = self._by_type.get(cls)
        if name is None:
            if issubclass(cls, ProtoMessage):
                return self.register(cls)
            raise SerializationError(f"{cls.__module__}.{cls.__qualname__} is not registered with the serializer")
        return name

    def _adapter(self, cls: type[Any]) -> TypeAdapter[Any]:
        adapter = self._adapters.get(cls)
        if adapter is None:
            adapter = self._adapters[cls] = TypeAdapter(cls)
        return adapter

    # --- CloudEvents -----------------------------------------------------------------------------------

    def to_cloud_event(
        self,
        message: Any,
        source: str,
        type: str | None = None,
        *,
        id: str | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> CloudEvent:
        """Wrap `message` in a CloudEvent (protobuf format). `type` defaults to the message's type name.

        Protobuf messages travel as `proto_data` (an `Any`), others as JSON `text_data`; `datacontenttype`
        says which, and the `dataschema`-like extension `exttype` always holds the message's type name.
        """
        event = CloudEvent()
        self.fill_cloud_event(event, message, source, type, id=id, attributes=attributes)
        return event

    def fill_cloud_event(
        self,
        event: CloudEvent,
        message: Any,
        source: str,
        type: str | None = None,
        *,
        id: str | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> None:
        """`to_cloud_event` into an existing (empty) event, such as a field of an envelope: no copy."""
        if type is None and id is None and not attributes and source.__class__ is str:
            # The runtime's hot path: the shared attributes come from a cached template.
            entry = self._templates.get((message.__class__, source))
            if entry is None:
                entry = self._template(message, source)
            template, is_proto = entry
            event.MergeFrom(template)  # as setting each field would: what `event` already held stays
            event.id = f"{self._id_prefix}{next(self._event_ids)}"
            if is_proto:
                event.proto_data.value = message.SerializeToString()
            else:
                event.text_data = self.serialize(message).decode()
            return
        if not isinstance(source, str) or not source:
            raise ValueError(f"source must be a non-empty URI-reference string, got {source!r}")
        name = self.type_name(message)
        # Unique per process run: a random prefix and a counter (cheaper than a uuid per message).
        event.id = id if id is not None else f"{self._id_prefix}{next(self._event_ids)}"
        event.source = source
        event.spec_version = SPEC_VERSION
        event.type = type if type is not None else name
        if isinstance(message, ProtoMessage):
            # proto_data is self-describing (the Any's type URL), so no datacontenttype attribute is added.
            data = event.proto_data
            data.type_url = _TYPE_URL_PREFIX + name
            data.value = message.SerializeToString()
        else:
            event.text_data = self.serialize(message).decode()
            event.attributes["datacontenttype"].ce_string = JSON_CONTENT_TYPE
        if type is not None and type != name:
            event.attributes["exttype"].ce_string = name
        if attributes:
            for key, value in attributes.items():
                event.attributes[key].ce_string = value

    def from_cloud_event(self, event: CloudEvent, type: str | builtins.type[Any] | None = None) -> Any:
        """The message inside a CloudEvent. `type` (class or type name) defaults to the event's own type name."""
        if not isinstance(event, CloudEvent):
            raise TypeError(f"event must be a CloudEvent (protobuf), got {builtins.type(event).__name__}")
        if type is None:
            # The hot path: a registered protobuf type, found by its type URL (empty unless proto_data is the data
            # that is set: a oneof).
            data = event.proto_data
            cls = self._by_url.get(data.type_url)
            if cls is not None and not event.attributes:
                try:
                    return cls.FromString(data.value)
                except DecodeError as exc:
                    raise SerializationError(f"payload is not a valid {cls.__qualname__}: {exc}") from None
        which = event.WhichOneof("data")
        attributes = event.attributes
        target: str | builtins.type[Any]
        if type is not None:
            target = type
        elif attributes and "exttype" in attributes:
            target = attributes["exttype"].ce_string
        elif which == "proto_data":
            target = event.proto_data.type_url.rpartition("/")[2] or event.type
        else:
            target = event.type
        if which == "proto_data":
            if builtins.type(target) is str:
                # The hot path: a known protobuf type, parsed without the generic checks.
                cls = self._by_name.get(target)
                if cls is not None and issubclass(cls, ProtoMessage):
                    try:
                        return cls.FromString(event.proto_data.value)
                    except DecodeError as exc:
                        raise SerializationError(f"payload is not a valid {cls.__qualname__}: {exc}") from None
            return self.deserialize(event.proto_data.value, target)
        if which == "text_data":
            return self.deserialize(event.text_data.encode(), target)
        if which == "binary_data":
            return self.deserialize(event.binary_data, target)
        return None

    def _template(self, message: Any, source: str) -> tuple[CloudEvent, bool]:
        """The attributes every event of `message`'s class from `source` shares, and whether it is protobuf."""
        if not source:
            raise ValueError(f"source must be a non-empty URI-reference string, got {source!r}")
        name = self.type_name(message)
        template = CloudEvent(source=source, spec_version=SPEC_VERSION, type=name)
        is_proto = isinstance(message, ProtoMessage)
        if is_proto:
            template.proto_data.type_url = _TYPE_URL_PREFIX + name
        else:
            template.attributes["datacontenttype"].ce_string = JSON_CONTENT_TYPE
        if len(self._templates) >= _MAX_TEMPLATES:
            self._templates.clear()
        entry = self._templates[(message.__class__, source)] = (template, is_proto)
        return entry


def _dump_json(value: Any) -> bytes:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"message is not plain JSON: {exc}") from None


# --- interop with the cloudevents SDK (JSON format) ------------------------------------------------------


def to_sdk_event(event: CloudEvent) -> Any:
    """The same event as a `cloudevents.core` v1 `CloudEvent`, e.g. for `JSONFormat().write(...)`."""
    from cloudevents.core.v1.event import CloudEvent as SdkCloudEvent

    attributes: dict[str, Any] = {
        "id": event.id,
        "source": event.source,
        "specversion": event.spec_version,
        "type": event.type,
    }
    for key, value in event.attributes.items():
        which = value.WhichOneof("attr")
        if which == "ce_timestamp":
            attributes[key] = value.ce_timestamp.ToDatetime(tzinfo=timezone.utc)
        elif which is not None:
            attributes[key] = getattr(value, which)
    data: Any
    which_data = event.WhichOneof("data")
    if which_data == "text_data":
        data = json.loads(event.text_data) if _is_json(attributes) else event.text_data
    elif which_data == "binary_data":
        data = event.binary_data
    elif which_data == "proto_data":
        # The JSON format carries protobuf payloads as base64 of the message bytes (data_base64).
        data = event.proto_data.value
        attributes.setdefault("datacontenttype", PROTOBUF_CONTENT_TYPE)
        type_name = event.proto_data.type_url.rpartition("/")[2]
        if type_name and type_name != event.type:
            attributes.setdefault("exttype", type_name)
    else:
        data = None
    return SdkCloudEvent(attributes, data)


def from_sdk_event(sdk_event: Any) -> CloudEvent:
    """A `cloudevents.core` `CloudEvent` as the protobuf-format `CloudEvent` this package sends."""
    attrs: dict[str, Any] = dict(sdk_event.get_attributes())
    event = CloudEvent(
        id=str(attrs.pop("id")),
        source=str(attrs.pop("source")),
        spec_version=str(attrs.pop("specversion")),
        type=str(attrs.pop("type")),
    )
    for key, value in attrs.items():
        slot = event.attributes[key]
        if isinstance(value, bool):
            slot.ce_boolean = value
        elif isinstance(value, int):
            slot.ce_integer = value
        elif isinstance(value, bytes):
            slot.ce_bytes = value
        elif hasattr(value, "isoformat"):
            slot.ce_timestamp.FromDatetime(value)
        else:
            slot.ce_string = str(value)
    data = sdk_event.get_data()
    content_type = attrs.get("datacontenttype")
    if isinstance(data, (bytes, bytearray)):
        if content_type == PROTOBUF_CONTENT_TYPE:
            any_message = any_pb2.Any(value=bytes(data))
            type_name = attrs.get("exttype", event.type)
            any_message.type_url = f"type.googleapis.com/{type_name}"
            event.proto_data.CopyFrom(any_message)
        else:
            event.binary_data = bytes(data)
    elif isinstance(data, str) and not _is_json(attrs):
        event.text_data = data
    elif data is not None:
        event.text_data = _dump_json(data).decode()
    return event


def _is_json(attributes: Mapping[str, Any]) -> bool:
    content_type = str(attributes.get("datacontenttype", JSON_CONTENT_TYPE))
    return content_type.split(";")[0].strip().endswith("json")
