"""`GlobalSearchTool` and `LocalSearchTool`: graphrag's query engines behind the ext `Tool` interface."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field, ValidationError

from ext.core import BaseTool, CancellationToken, ConfigurationError

from ._config import (
    GlobalContextConfig,
    GlobalDataConfig,
    GlobalSearchToolConfig,
    LocalContextConfig,
    LocalDataConfig,
    LocalSearchConfig,
    LocalSearchToolConfig,
    MapReduceConfig,
    ModelSettings,
    SettingsSource,
)
from ._settings import (
    GraphRagSettingsError,
    existing_file,
    existing_prompt,
    graphrag_model,
    load_settings,
    model_settings,
    output_files,
    read_prompt,
    read_table,
    settings_source,
)
from ._worker import on_worker

__all__ = ["GlobalSearchTool", "GraphRagSettingsError", "LocalSearchTool", "QueryArgs"]

_GLOBAL_DESCRIPTION = (
    "Answer a broad question about the whole document collection (themes, trends, summaries across many "
    "sources) from GraphRAG's community reports."
)
_LOCAL_DESCRIPTION = (
    "Answer a question about specific people, places, organisations or things named in the documents, from "
    "GraphRAG's entities, relationships and source text."
)
_VECTOR_STORE_SECRETS = ("api_key", "connection_string")


class QueryArgs(BaseModel):
    """The tools' arguments."""

    query: str = Field(min_length=1, description="The question to answer from the indexed documents.")


# -- the tools -----------------------------------------------------------------------------------------------------


class _GraphRagTool(BaseTool):
    component_type = "tool"
    _search_label: ClassVar[str]

    def __init__(self, *, name: str, description: str) -> None:
        super().__init__(name=name, description=description, args_type=QueryArgs)
        self._engine: Any = None
        self._settings_source: SettingsSource | None = None

    async def run(self, args: Any, cancellation_token: CancellationToken | None) -> str:
        return await on_worker(self._search(args.query), cancellation_token)

    async def _search(self, query: str) -> str:
        if self._engine is None:
            self._engine = self._build_engine()
        result = await self._engine.search(query=query)
        response = result.response
        return response if isinstance(response, str) else str(response)

    def _build_engine(self) -> Any:
        raise NotImplementedError


class GlobalSearchTool(_GraphRagTool):
    """GraphRAG global search (map-reduce over community reports) as a tool named `global_search`.

    Build it with `from_settings(root_dir)` for a project made with `graphrag init` / `graphrag index`, or from
    `GlobalDataConfig`, `GlobalContextConfig`, `MapReduceConfig` and a `ModelSettings`. The index tables are read
    (and checked) at construction; the model is first called on the first query.
    """

    component_config_schema = GlobalSearchToolConfig
    component_provider_override = "ext.tools.graphrag.GlobalSearchTool"

    def __init__(
        self,
        data_config: GlobalDataConfig,
        model: ModelSettings,
        context_config: GlobalContextConfig | None = None,
        mapreduce_config: MapReduceConfig | None = None,
        *,
        name: str = "global_search",
        description: str | None = None,
    ) -> None:
        super().__init__(name=name, description=description or _GLOBAL_DESCRIPTION)
        self.data_config = data_config
        self.context_config = context_config or GlobalContextConfig()
        self.mapreduce_config = mapreduce_config or MapReduceConfig()
        self.model_settings = model
        from graphrag.data_model.dfs import communities_typed, community_reports_typed, entities_typed

        self._entities = read_table(data_config.entities_filepath, "entities_filepath", entities_typed)
        self._communities = read_table(data_config.communities_filepath, "communities_filepath", communities_typed)
        self._reports = read_table(data_config.reports_filepath, "reports_filepath", community_reports_typed)
        mr = self.mapreduce_config
        self._prompts = (
            read_prompt(mr.map_prompt_filepath, "map_prompt_filepath"),
            read_prompt(mr.reduce_prompt_filepath, "reduce_prompt_filepath"),
            read_prompt(mr.knowledge_prompt_filepath, "knowledge_prompt_filepath"),
        )
        self._model_config = graphrag_model(model, "model")

    @classmethod
    def from_settings(
        cls, root_dir: str | Path, config_filepath: str | Path | None = None, *, name: str = "global_search"
    ) -> GlobalSearchTool:
        """The tool over the index of the graphrag project in `root_dir` (settings.yaml and .env there, or
        `config_filepath`), with the project's `global_search` settings and completion model."""
        config, base = load_settings(root_dir, config_filepath)
        files = output_files(config, ("entities", "communities", "community_reports"))
        gs = config.global_search
        try:
            model = config.get_completion_model_config(gs.completion_model_id)
        except ValueError as exc:
            raise GraphRagSettingsError(f"graphrag settings in {str(base)!r}: {exc}") from None
        tool = cls(
            GlobalDataConfig(
                entities_filepath=files["entities"],
                communities_filepath=files["communities"],
                reports_filepath=files["community_reports"],
            ),
            model_settings(model),
            GlobalContextConfig(max_context_tokens=gs.max_context_tokens),
            MapReduceConfig(
                max_data_tokens=gs.data_max_tokens,
                map_max_length=gs.map_max_length,
                reduce_max_length=gs.reduce_max_length,
                concurrency=config.concurrent_requests,
                map_prompt_filepath=existing_prompt(base, gs.map_prompt),
                reduce_prompt_filepath=existing_prompt(base, gs.reduce_prompt),
                knowledge_prompt_filepath=existing_prompt(base, gs.knowledge_prompt),
            ),
            name=name,
        )
        tool._settings_source = settings_source(root_dir, config_filepath)
        return tool

    def _build_engine(self) -> Any:
        from graphrag.query.indexer_adapters import (
            read_indexer_communities,
            read_indexer_entities,
            read_indexer_reports,
        )
        from graphrag.query.structured_search.global_search.community_context import GlobalCommunityContext
        from graphrag.query.structured_search.global_search.search import GlobalSearch
        from graphrag_llm.completion import create_completion

        level = self.data_config.community_level
        model = create_completion(self._model_config)
        tokenizer = model.tokenizer
        ctx, mr = self.context_config, self.mapreduce_config
        call_args = dict(self._model_config.call_args)
        map_prompt, reduce_prompt, knowledge_prompt = self._prompts
        return GlobalSearch(
            model=model,
            map_system_prompt=map_prompt,
            reduce_system_prompt=reduce_prompt,
            general_knowledge_inclusion_prompt=knowledge_prompt,
            context_builder=GlobalCommunityContext(
                community_reports=read_indexer_reports(self._reports, self._communities, community_level=level),
                communities=read_indexer_communities(self._communities, self._reports),
                entities=read_indexer_entities(self._entities, self._communities, community_level=level),
                tokenizer=tokenizer,
                random_state=ctx.random_state,
            ),
            tokenizer=tokenizer,
            max_data_tokens=mr.max_data_tokens,
            # graphrag's query factory passes the model's call_args alone; a limit only when the user set one.
            map_llm_params=_with_max_tokens(call_args, mr.map_max_tokens),
            reduce_llm_params=_with_max_tokens(call_args, mr.reduce_max_tokens),
            map_max_length=mr.map_max_length,
            reduce_max_length=mr.reduce_max_length,
            allow_general_knowledge=mr.allow_general_knowledge,
            json_mode=False,  # graphrag asks the map calls for a JSON object itself
            context_builder_params={
                "use_community_summary": ctx.use_community_summary,
                "shuffle_data": ctx.shuffle_data,
                "include_community_rank": ctx.include_community_rank,
                "min_community_rank": ctx.min_community_rank,
                "community_rank_name": "rank",
                "include_community_weight": ctx.include_community_weight,
                "community_weight_name": "occurrence weight",
                "normalize_community_weight": ctx.normalize_community_weight,
                "max_context_tokens": ctx.max_context_tokens,
                "context_name": "Reports",
            },
            concurrent_coroutines=mr.concurrency,
            response_type=mr.response_type,
        )

    def _to_config(self) -> GlobalSearchToolConfig:
        if self._settings_source is not None:
            return GlobalSearchToolConfig(name=self.name, description=self.description, settings=self._settings_source)
        return GlobalSearchToolConfig(
            name=self.name,
            description=self.description,
            data=self.data_config,
            context=self.context_config,
            mapreduce=self.mapreduce_config,
            model=self.model_settings,
        )

    @classmethod
    def _from_config(cls, config: GlobalSearchToolConfig) -> GlobalSearchTool:
        if config.settings is not None:
            tool = cls.from_settings(config.settings.root_dir, config.settings.config_filepath, name=config.name)
            return tool
        if config.data is None or config.model is None:
            raise ConfigurationError("GlobalSearchTool config needs either 'settings' or both 'data' and 'model'")
        return cls(
            config.data,
            config.model,
            config.context,
            config.mapreduce,
            name=config.name,
            description=config.description,
        )


class LocalSearchTool(_GraphRagTool):
    """GraphRAG local search (entities near the question in the vector store, their relationships, source text
    and community reports) as a tool named `local_search`.

    Build it with `from_settings(root_dir)`, or from `LocalDataConfig` (tables + the project's `vector_store`
    settings), `LocalContextConfig`, `LocalSearchConfig` and the chat and embedding `ModelSettings`.
    """

    component_config_schema = LocalSearchToolConfig
    component_provider_override = "ext.tools.graphrag.LocalSearchTool"

    def __init__(
        self,
        data_config: LocalDataConfig,
        model: ModelSettings,
        embedding_model: ModelSettings,
        context_config: LocalContextConfig | None = None,
        search_config: LocalSearchConfig | None = None,
        *,
        name: str = "local_search",
        description: str | None = None,
    ) -> None:
        super().__init__(name=name, description=description or _LOCAL_DESCRIPTION)
        self.data_config = data_config
        self.context_config = context_config or LocalContextConfig()
        self.search_config = search_config or LocalSearchConfig()
        self.model_settings = model
        self.embedding_settings = embedding_model
        from graphrag.config.embeddings import entity_description_embedding
        from graphrag.data_model.dfs import (
            communities_typed,
            community_reports_typed,
            covariates_typed,
            entities_typed,
            relationships_typed,
            text_units_typed,
        )
        from graphrag_vectors import IndexSchema, VectorStoreConfig

        d = data_config
        self._entities = read_table(d.entities_filepath, "entities_filepath", entities_typed)
        self._relationships = read_table(d.relationships_filepath, "relationships_filepath", relationships_typed)
        self._text_units = read_table(d.text_units_filepath, "text_units_filepath", text_units_typed)
        self._reports = read_table(d.reports_filepath, "reports_filepath", community_reports_typed)
        self._communities = read_table(d.communities_filepath, "communities_filepath", communities_typed)
        self._covariates = (
            read_table(d.covariates_filepath, "covariates_filepath", covariates_typed)
            if d.covariates_filepath is not None
            else None
        )
        try:
            self._vector_store = VectorStoreConfig(**d.vector_store)
        except ValidationError as exc:
            raise ConfigurationError(f"vector_store: invalid graphrag vector store config: {exc}") from None
        schemas = self._vector_store.index_schema
        if entity_description_embedding not in schemas:  # as graphrag's own settings loader fills it in
            schemas[entity_description_embedding] = IndexSchema(
                index_name=entity_description_embedding, vector_size=self._vector_store.vector_size
            )
        db_uri = self._vector_store.db_uri
        if self._vector_store.type == "lancedb" and db_uri and not Path(db_uri).exists():
            raise GraphRagSettingsError(
                f"vector_store.db_uri: LanceDB folder {db_uri!r} does not exist (run `graphrag index`)"
            )
        self._prompt = read_prompt(self.search_config.prompt_filepath, "prompt_filepath")
        self._model_config = graphrag_model(model, "model")
        self._embedding_config = graphrag_model(embedding_model, "embedding_model")

    @classmethod
    def from_settings(
        cls, root_dir: str | Path, config_filepath: str | Path | None = None, *, name: str = "local_search"
    ) -> LocalSearchTool:
        """The tool over the index of the graphrag project in `root_dir`, with the project's `local_search`
        settings, completion and embedding models and `vector_store`."""
        config, base = load_settings(root_dir, config_filepath)
        files = output_files(
            config, ("entities", "relationships", "text_units", "community_reports", "communities", "covariates")
        )
        ls = config.local_search
        try:
            model = config.get_completion_model_config(ls.completion_model_id)
            embedding = config.get_embedding_model_config(ls.embedding_model_id)
        except ValueError as exc:
            raise GraphRagSettingsError(f"graphrag settings in {str(base)!r}: {exc}") from None
        tool = cls(
            LocalDataConfig(
                entities_filepath=files["entities"],
                relationships_filepath=files["relationships"],
                text_units_filepath=files["text_units"],
                reports_filepath=files["community_reports"],
                communities_filepath=files["communities"],
                vector_store=config.vector_store.model_dump(exclude_none=True),
                covariates_filepath=existing_file(files["covariates"]),  # optional, as in graphrag's CLI
            ),
            model_settings(model),
            model_settings(embedding),
            LocalContextConfig(
                text_unit_prop=ls.text_unit_prop,
                community_prop=ls.community_prop,
                top_k_entities=ls.top_k_entities,
                top_k_relationships=ls.top_k_relationships,
                max_context_tokens=ls.max_context_tokens,
            ),
            LocalSearchConfig(prompt_filepath=existing_prompt(base, ls.prompt)),
            name=name,
        )
        tool._settings_source = settings_source(root_dir, config_filepath)
        return tool

    def _build_engine(self) -> Any:
        from graphrag.config.embeddings import entity_description_embedding
        from graphrag.query.context_builder.entity_extraction import EntityVectorStoreKey
        from graphrag.query.indexer_adapters import (
            read_indexer_covariates,
            read_indexer_entities,
            read_indexer_relationships,
            read_indexer_reports,
            read_indexer_text_units,
        )
        from graphrag.query.structured_search.local_search.mixed_context import LocalSearchMixedContext
        from graphrag.query.structured_search.local_search.search import LocalSearch
        from graphrag.utils.api import get_embedding_store
        from graphrag_llm.completion import create_completion
        from graphrag_llm.embedding import create_embedding

        level = self.data_config.community_level
        model = create_completion(self._model_config)
        tokenizer = model.tokenizer
        ctx = self.context_config
        params = dict(self._model_config.call_args)
        if self.search_config.max_tokens is not None:
            params["max_tokens"] = self.search_config.max_tokens
        return LocalSearch(
            model=model,
            system_prompt=self._prompt,
            context_builder=LocalSearchMixedContext(
                community_reports=read_indexer_reports(self._reports, self._communities, level),
                text_units=read_indexer_text_units(self._text_units),
                entities=read_indexer_entities(self._entities, self._communities, level),
                relationships=read_indexer_relationships(self._relationships),
                # graphrag.api.local_search: the claims table under "claims" (empty without one).
                covariates={
                    "claims": read_indexer_covariates(self._covariates) if self._covariates is not None else []
                },
                entity_text_embeddings=get_embedding_store(self._vector_store, entity_description_embedding),
                embedding_vectorstore_key=EntityVectorStoreKey.ID,
                text_embedder=create_embedding(self._embedding_config),
                tokenizer=tokenizer,
            ),
            tokenizer=tokenizer,
            model_params=params,
            context_builder_params={
                "text_unit_prop": ctx.text_unit_prop,
                "community_prop": ctx.community_prop,
                "conversation_history_max_turns": 5,
                "conversation_history_user_turns_only": True,
                "top_k_mapped_entities": ctx.top_k_entities,
                "top_k_relationships": ctx.top_k_relationships,
                "include_entity_rank": ctx.include_entity_rank,
                "include_relationship_weight": ctx.include_relationship_weight,
                "include_community_rank": ctx.include_community_rank,
                "return_candidate_context": False,
                "embedding_vectorstore_key": EntityVectorStoreKey.ID,
                "max_context_tokens": ctx.max_context_tokens,
            },
            response_type=self.search_config.response_type,
        )

    def _to_config(self) -> LocalSearchToolConfig:
        if self._settings_source is not None:
            return LocalSearchToolConfig(name=self.name, description=self.description, settings=self._settings_source)
        data = self.data_config.model_copy(
            update={
                "vector_store": {
                    k: v for k, v in self.data_config.vector_store.items() if k not in _VECTOR_STORE_SECRETS
                }
            }
        )
        return LocalSearchToolConfig(
            name=self.name,
            description=self.description,
            data=data,
            context=self.context_config,
            search=self.search_config,
            model=self.model_settings,
            embedding_model=self.embedding_settings,
        )

    @classmethod
    def _from_config(cls, config: LocalSearchToolConfig) -> LocalSearchTool:
        if config.settings is not None:
            return cls.from_settings(config.settings.root_dir, config.settings.config_filepath, name=config.name)
        if config.data is None or config.model is None or config.embedding_model is None:
            raise ConfigurationError(
                "LocalSearchTool config needs either 'settings' or 'data', 'model' and 'embedding_model'"
            )
        return cls(
            config.data,
            config.model,
            config.embedding_model,
            config.context,
            config.search,
            name=config.name,
            description=config.description,
        )


def _with_max_tokens(call_args: dict[str, Any], max_tokens: int | None) -> dict[str, Any]:
    return {**call_args, "max_tokens": max_tokens} if max_tokens is not None else {**call_args}
