"""Reading a graphrag project's settings and index files, without touching process-wide state.

graphrag's own loader (`graphrag.config.load_config`) loads the project's `.env` into `os.environ` and changes
the working directory to the settings folder so that relative paths resolve there. Here the same loader runs
with both switched off: `.env` values only fill in the settings file's `${VAR}` references (the process
environment wins, as with graphrag's `load_dotenv`), and the relative paths graphrag resolves are anchored to
the settings folder before graphrag sees them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from string import Template
from typing import Any

import pandas as pd
import yaml
from dotenv import dotenv_values
from pydantic import SecretStr, ValidationError

from ext.core import ConfigurationError

from ._config import ModelSettings, SettingsSource

__all__ = [
    "GraphRagSettingsError",
    "existing_file",
    "existing_prompt",
    "graphrag_model",
    "load_settings",
    "model_settings",
    "output_files",
    "read_prompt",
    "read_table",
    "settings_source",
]

_SETTINGS_NAMES = ("settings.yaml", "settings.yml", "settings.json")


class GraphRagSettingsError(ConfigurationError):
    """A graphrag settings file or index file is missing or invalid (the message names the file)."""


def load_settings(root_dir: str | Path, config_filepath: str | Path | None) -> tuple[Any, Path]:
    """graphrag's config as its CLI loads it (settings file, `.env` beside it, `${VAR}` references). Returns the
    config and the settings file's folder."""
    from graphrag.config.models.graph_rag_config import GraphRagConfig
    from graphrag_common.config import ConfigParsingError
    from graphrag_common.config import load_config as load_graphrag_config

    root = Path(root_dir).resolve()
    if not root.is_dir():
        raise GraphRagSettingsError(f"graphrag root_dir {str(root)!r} is not a directory")
    target = Path(config_filepath) if config_filepath is not None else root
    if not target.is_absolute():
        target = root / target
    if config_filepath is not None and not target.is_file():
        raise GraphRagSettingsError(f"graphrag settings file {str(target)!r} does not exist")
    settings_file = _settings_file(target)
    base = settings_file.parent
    try:
        config = load_graphrag_config(
            config_initializer=GraphRagConfig,
            config_path=target,
            set_cwd=False,
            parse_env_vars=False,
            load_dot_env_file=False,
            config_parser=_parser(settings_file, base),
        )
    except FileNotFoundError as exc:
        raise GraphRagSettingsError(f"graphrag settings: {exc}") from None
    except (ConfigParsingError, ValidationError, ValueError) as exc:
        raise GraphRagSettingsError(f"graphrag settings file {str(settings_file)!r} is invalid: {exc}") from exc
    return config, base


def _settings_file(target: Path) -> Path:
    if target.is_file():
        return target
    for name in _SETTINGS_NAMES:
        if (target / name).is_file():
            return target / name
    return target / "settings.yaml"


def _parser(settings_file: Path, base: Path) -> Callable[[str], dict[str, Any]]:
    """The settings text to a dict as graphrag's loader makes it, with the environment and paths given
    explicitly instead of through the process."""

    def parse(text: str) -> dict[str, Any]:
        dot_env = settings_file.parent / ".env"
        values = {k: v for k, v in dotenv_values(dot_env).items() if v is not None} if dot_env.is_file() else {}
        try:
            # graphrag's loader: load_dotenv (no override, so the process environment wins), then substitute.
            text = Template(text).substitute({**values, **os.environ})
        except KeyError as exc:
            raise ValueError(f"environment variable not found: {exc}") from None
        data = json.loads(text) if settings_file.suffix.lower() == ".json" else yaml.safe_load(text)
        if not isinstance(data, dict):
            raise ValueError("the settings are not a mapping")
        _anchor_paths(data, base)
        return data

    return parse


def _anchor_paths(data: dict[str, Any], base: Path) -> None:
    """Make the relative paths GraphRagConfig resolves (against the working directory, which graphrag's loader
    has changed to the settings folder) absolute against the settings folder, defaults included."""
    from graphrag.config.defaults import graphrag_config_defaults as defaults

    # (section, path field, the type whose path is a local path, default when the section is absent, default when
    # the field is empty): graphrag.config.models.graph_rag_config's _validate_*_base_dir / _db_uri.
    rules: tuple[tuple[str, str, str, str | None, str | None], ...] = (
        ("input_storage", "base_dir", "file", defaults.input_storage.base_dir, None),
        ("output_storage", "base_dir", "file", defaults.output_storage.base_dir, None),
        ("update_output_storage", "base_dir", "file", defaults.update_output_storage.base_dir, None),
        ("reporting", "base_dir", "file", defaults.reporting.base_dir, defaults.reporting.base_dir),
        ("vector_store", "db_uri", "lancedb", defaults.vector_store.db_uri, defaults.vector_store.db_uri),
    )
    for section, field, local_type, absent, empty in rules:
        present = data.get(section)
        if present is not None and not isinstance(present, dict):
            continue  # graphrag's validation names the bad section
        values = dict(present or {})
        if str(values.get("type", local_type)) != local_type:
            continue
        value = values.get(field) if present is not None else absent
        if (value is None or (isinstance(value, str) and not value.strip())) and empty is not None:
            value = empty
        if isinstance(value, str) and value.strip() and not Path(value).is_absolute():
            values[field] = str(base / value)
            data[section] = values


def output_files(config: Any, names: tuple[str, ...]) -> dict[str, str]:
    """Where `graphrag index` wrote each table (file output storage)."""
    storage = config.output_storage
    if str(getattr(storage.type, "value", storage.type)) != "file":
        raise GraphRagSettingsError(
            f"output_storage type {storage.type!r} is not supported by from_settings (file storage only); build the "
            "tool from GlobalDataConfig / LocalDataConfig with local copies of the tables"
        )
    suffix = ".csv" if str(getattr(config.table_provider, "type", "parquet")).endswith("csv") else ".parquet"
    base = Path(storage.base_dir)
    return {name: str(base / f"{name}{suffix}") for name in names}


def model_settings(model: Any) -> ModelSettings:
    """A graphrag model config as `ModelSettings` (the key as a secret)."""
    data = model.model_dump(exclude_none=True)
    key = data.pop("api_key", None)
    known = {name: data.pop(name) for name in ("model_provider", "model", "api_base", "api_version") if name in data}
    return ModelSettings(**known, api_key=SecretStr(key) if key else None, extra=data)


def graphrag_model(settings: ModelSettings, what: str) -> Any:
    """`ModelSettings` as graphrag's `ModelConfig` (the key read from `api_key_env` if given there)."""
    from graphrag_llm.config import ModelConfig

    key = settings.api_key.get_secret_value() if settings.api_key is not None else None
    if key is None and settings.api_key_env:
        key = os.environ.get(settings.api_key_env)
        if key is None:
            raise ConfigurationError(f"{what}.api_key_env: environment variable {settings.api_key_env!r} is not set")
    fields: dict[str, Any] = {**settings.extra, "model_provider": settings.model_provider, "model": settings.model}
    if settings.api_base is not None:
        fields["api_base"] = settings.api_base
    if settings.api_version is not None:
        fields["api_version"] = settings.api_version
    if key is not None:
        fields["api_key"] = key
    try:
        return ModelConfig(**fields)
    except ValidationError as exc:
        raise ConfigurationError(f"{what}: invalid graphrag model config: {exc}") from None


def read_table(path: str, field: str, typed: Callable[[pd.DataFrame], pd.DataFrame]) -> pd.DataFrame:
    """An index table (parquet or csv) with graphrag's column types; a missing or unreadable file is named."""
    file = Path(path)
    if not file.is_file():
        raise GraphRagSettingsError(f"{field}: graphrag index file {str(file)!r} does not exist (run `graphrag index`)")
    try:
        frame = pd.read_csv(file) if file.suffix == ".csv" else pd.read_parquet(file)
        return typed(frame)
    except Exception as exc:
        raise GraphRagSettingsError(f"{field}: cannot read graphrag index file {str(file)!r}: {exc}") from exc


def read_prompt(path: str | None, field: str) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise GraphRagSettingsError(f"{field}: cannot read prompt file {path!r}: {exc.strerror}") from None


def existing_prompt(base: Path, path: str | None) -> str | None:
    """A prompt file named in the settings (relative to the settings folder), if it exists: graphrag falls back
    to its built-in prompt otherwise."""
    if not path:
        return None
    resolved = Path(path) if Path(path).is_absolute() else base / path
    return str(resolved) if resolved.is_file() else None


def existing_file(path: str) -> str | None:
    """An optional index table (graphrag's CLI reads `covariates` only when the index has it)."""
    return path if Path(path).is_file() else None


def settings_source(root_dir: str | Path, config_filepath: str | Path | None) -> SettingsSource:
    return SettingsSource(
        root_dir=str(Path(root_dir).resolve()), config_filepath=str(config_filepath) if config_filepath else None
    )
