"""Constants shared by the tests and the test server (imported by name: conftest puts this folder on sys.path)."""

from __future__ import annotations

import base64
from pathlib import Path

HERE = Path(__file__).parent
SDK_SERVER = str(HERE / "sdk_server.py")
LOOPBACK_PRELOAD = str(HERE / "loopback.cjs")
TOKEN = "test-token-123"
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
PNG = base64.b64decode(PNG_B64)
WAV = b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00@\x1f\x00\x00\x80>\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00"
