from __future__ import annotations

import base64
from pathlib import Path

import pytest

from ext.core import Image

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
JPEG_HEAD = b"\xff\xd8\xff\xe0" + b"\x00" * 16


def test_from_bytes_sniffs_type() -> None:
    assert Image.from_bytes(PNG).mime_type == "image/png"
    assert Image.from_bytes(JPEG_HEAD).mime_type == "image/jpeg"
    assert Image.from_bytes(b"RIFF\x00\x00\x00\x00WEBPVP8 ").mime_type == "image/webp"


def test_unknown_bytes_need_a_type() -> None:
    with pytest.raises(ValueError, match="mime_type"):
        Image.from_bytes(b"not an image")
    assert Image.from_bytes(b"x", "image/x-raw").mime_type == "image/x-raw"


def test_from_file_and_data_uri_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "dot.png"
    path.write_bytes(PNG)
    image = Image.from_file(path)
    assert image.data == PNG
    assert image.data_uri.startswith("data:image/png;base64,")
    again = Image.from_data_uri(image.data_uri)
    assert again == image
    assert Image.from_base64(image.to_base64()) == image


def test_bad_inputs_are_clear() -> None:
    with pytest.raises(ValueError, match="base64"):
        Image.from_base64("***")
    with pytest.raises(ValueError, match="data:"):
        Image.from_data_uri("http://example/x.png")
    with pytest.raises(ValueError, match="mime_type"):
        Image(data=PNG, mime_type="text/plain")


def test_repr_does_not_dump_bytes() -> None:
    assert repr(Image.from_bytes(PNG)) == f"Image(mime_type='image/png', size={len(PNG)})"


def test_json_is_base64() -> None:
    image = Image.from_bytes(PNG)
    dumped = image.model_dump_json()
    assert base64.b64encode(PNG).decode() in dumped
    assert Image.model_validate_json(dumped) == image
