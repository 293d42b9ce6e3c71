"""`Image`: bytes plus a MIME type, with no dependency on Pillow."""

from __future__ import annotations

import base64
import binascii
import mimetypes
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_serializer, field_validator

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
)


def sniff_image_type(data: bytes) -> str | None:
    """The MIME type that the leading bytes of `data` identify, or None."""
    for signature, mime in _SIGNATURES:
        if data.startswith(signature):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class Image(BaseModel):
    """An image for a model: raw bytes and their MIME type.

    Build one with `from_file`, `from_base64`, `from_data_uri` or `from_bytes`; the MIME type is
    read from the bytes when not given. In JSON the bytes are base64.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    type: Literal["Image"] = "Image"
    data: bytes
    mime_type: str

    @field_validator("data", mode="before")
    @classmethod
    def _decode_base64(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True)
            except binascii.Error as exc:
                raise ValueError("Image.data must be bytes or base64 text") from exc
        return value

    @field_validator("mime_type")
    @classmethod
    def _check_mime(cls, value: str) -> str:
        if not value.startswith("image/"):
            raise ValueError(f"Image.mime_type must start with 'image/', got {value!r}")
        return value

    @field_serializer("data", when_used="json")
    def _encode_base64(self, value: bytes) -> str:
        return base64.b64encode(value).decode("ascii")

    @classmethod
    def from_bytes(cls, data: bytes, mime_type: str | None = None) -> Image:
        """An image from raw bytes; the MIME type is sniffed when omitted."""
        mime = mime_type or sniff_image_type(data)
        if mime is None:
            raise ValueError("Image.from_bytes: cannot tell the image type from its bytes; pass mime_type")
        return cls(data=data, mime_type=mime)

    @classmethod
    def from_file(cls, path: str | Path, mime_type: str | None = None) -> Image:
        """An image read from a file; the type comes from the bytes, then the file extension."""
        p = Path(path)
        data = p.read_bytes()
        mime = mime_type or sniff_image_type(data) or mimetypes.guess_type(p.name)[0]
        if mime is None:
            raise ValueError(f"Image.from_file: cannot tell the image type of {p.name!r}; pass mime_type")
        return cls(data=data, mime_type=mime)

    @classmethod
    def from_base64(cls, b64: str, mime_type: str | None = None) -> Image:
        """An image from base64 text."""
        try:
            data = base64.b64decode(b64, validate=True)
        except binascii.Error as exc:
            raise ValueError("Image.from_base64: the text is not valid base64") from exc
        return cls.from_bytes(data, mime_type)

    @classmethod
    def from_data_uri(cls, uri: str) -> Image:
        """An image from a `data:image/...;base64,...` URI."""
        header, sep, payload = uri.partition(",")
        if not sep or not header.startswith("data:") or not header.endswith(";base64"):
            raise ValueError("Image.from_data_uri: expected 'data:<mime>;base64,<data>'")
        return cls.from_base64(payload, header[5:-7] or None)

    def to_base64(self) -> str:
        """The bytes as base64 text."""
        return base64.b64encode(self.data).decode("ascii")

    @property
    def data_uri(self) -> str:
        """The image as a `data:` URI, as OpenAI-style APIs take it."""
        return f"data:{self.mime_type};base64,{self.to_base64()}"

    def __repr__(self) -> str:
        return f"Image(mime_type={self.mime_type!r}, size={len(self.data)})"
