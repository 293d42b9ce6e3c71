"""Plain configuration of the GraphRAG search tools (pydantic; dumped by `dump_component`, keys left out)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSettings(_Config):
    """A graphrag model (graphrag's `completion_models` / `embedding_models` entry, as in settings.yaml).

    `model_provider` and `model` follow LiteLLM's naming (`openai` + `gpt-4o-mini`); `api_base` points the calls
    at any OpenAI-compatible endpoint. The key is given as `api_key` (kept out of dumps) and/or `api_key_env`
    (the environment variable to read it from; kept in dumps). `extra` carries any other graphrag model field
    (`call_args`, `retry`, `rate_limit`, `azure_deployment_name`, ...).
    """

    model_provider: str = Field(default="openai", min_length=1)
    model: str = Field(min_length=1)
    api_base: str | None = None
    api_version: str | None = None
    api_key: SecretStr | None = None
    api_key_env: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class GlobalDataConfig(_Config):
    """The index tables global search reads (parquet or csv files written by `graphrag index`)."""

    entities_filepath: str
    communities_filepath: str
    reports_filepath: str
    community_level: int | None = Field(default=2, ge=0, description="Community level to search at (None: all levels).")


class GlobalContextConfig(_Config):
    """How community reports are packed into the map batches."""

    use_community_summary: bool = False
    shuffle_data: bool = True
    include_community_rank: bool = True
    min_community_rank: int = 0
    include_community_weight: bool = True
    normalize_community_weight: bool = True
    max_context_tokens: int = Field(default=12_000, gt=0)
    random_state: int = 86


class MapReduceConfig(_Config):
    """The map (one JSON list of points per batch of reports) and reduce (the final answer) calls.

    As in graphrag's own query API, no `max_tokens` is sent unless `map_max_tokens` / `reduce_max_tokens` is set:
    the prompts ask for up to `map_max_length` / `reduce_max_length` words and the model finishes its answer.
    """

    max_data_tokens: int = Field(default=12_000, gt=0, description="Token budget of the reduce step's analyst reports.")
    map_max_tokens: int | None = Field(
        default=None, gt=0, description="Completion tokens of each map call (max_tokens); None: not sent."
    )
    reduce_max_tokens: int | None = Field(
        default=None, gt=0, description="Completion tokens of the reduce call (max_tokens); None: not sent."
    )
    map_max_length: int = Field(default=1_000, gt=0, description="Word limit written into the map prompt.")
    reduce_max_length: int = Field(default=2_000, gt=0, description="Word limit written into the reduce prompt.")
    response_type: str = "multiple paragraphs"
    allow_general_knowledge: bool = False
    concurrency: int = Field(default=25, gt=0, description="Map calls in flight at once.")
    map_prompt_filepath: str | None = None
    reduce_prompt_filepath: str | None = None
    knowledge_prompt_filepath: str | None = None


class LocalDataConfig(_Config):
    """The index tables and the entity-description vector store local search reads.

    `covariates_filepath` is graphrag's claims table (`covariates.parquet`, written when the project extracts
    claims); with it the context gets a Claims table, as with graphrag's own local search.

    `vector_store` is graphrag's `vector_store` settings section (`type`: lancedb, azure_ai_search, cosmosdb, with
    its fields); secret fields in it (`api_key`, `connection_string`) are left out of dumps.
    """

    entities_filepath: str
    relationships_filepath: str
    text_units_filepath: str
    reports_filepath: str
    communities_filepath: str
    vector_store: dict[str, Any]
    covariates_filepath: str | None = Field(default=None, description="Claims table (None: no claims).")
    community_level: int = Field(default=2, ge=0)


class LocalContextConfig(_Config):
    """How entities, relationships, text units and community reports share the context window."""

    text_unit_prop: float = Field(default=0.5, ge=0, le=1)
    community_prop: float = Field(default=0.25, ge=0, le=1)
    top_k_entities: int = Field(default=10, gt=0)
    top_k_relationships: int = Field(default=10, gt=0)
    include_entity_rank: bool = True
    include_relationship_weight: bool = True
    include_community_rank: bool = False
    max_context_tokens: int = Field(default=12_000, gt=0)


class LocalSearchConfig(_Config):
    """The answer call of local search."""

    max_tokens: int | None = Field(default=None, gt=0, description="Completion tokens of the answer (max_tokens).")
    response_type: str = "multiple paragraphs"
    prompt_filepath: str | None = None


class SettingsSource(_Config):
    """A tool built by `from_settings`: the project folder (and settings file) it was loaded from."""

    root_dir: str
    config_filepath: str | None = None


class GlobalSearchToolConfig(_Config):
    """`GlobalSearchTool`'s dump: either `settings` (loaded again from the project) or the explicit configs."""

    name: str = "global_search"
    description: str | None = None
    settings: SettingsSource | None = None
    data: GlobalDataConfig | None = None
    context: GlobalContextConfig = Field(default_factory=GlobalContextConfig)
    mapreduce: MapReduceConfig = Field(default_factory=MapReduceConfig)
    model: ModelSettings | None = None


class LocalSearchToolConfig(_Config):
    """`LocalSearchTool`'s dump: either `settings` or the explicit configs."""

    name: str = "local_search"
    description: str | None = None
    settings: SettingsSource | None = None
    data: LocalDataConfig | None = None
    context: LocalContextConfig = Field(default_factory=LocalContextConfig)
    search: LocalSearchConfig = Field(default_factory=LocalSearchConfig)
    model: ModelSettings | None = None
    embedding_model: ModelSettings | None = None
