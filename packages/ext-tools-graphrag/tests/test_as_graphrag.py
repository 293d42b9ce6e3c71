"""The tools against graphrag's own query API (`graphrag.api.global_search` / `local_search`, tables read as
graphrag's CLI reads them) on the same index and the same loopback model: the requests each side sends, as the
loopback server recorded them, must be the same; and the tools leave the process environment and working
directory as they found them."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from ext.testing.graphrag import GraphRagServer
from ext.testing.servers import RecordedRequest
from ext.tools.graphrag import GlobalSearchTool, LocalSearchTool


def _body(request: RecordedRequest) -> dict[str, Any]:
    assert isinstance(request.json, dict)
    return request.json


async def _on_own_loop(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run graphrag's API call on a loop in another thread: its local search embeds the query with a blocking
    HTTP call, which on this loop would wait forever for the loopback server running here."""
    return await asyncio.to_thread(asyncio.run, coro)


async def _graphrag_config_and_tables(project: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, Any]]:
    """graphrag's CLI path: `load_config(root_dir)` (it changes into the project folder: monkeypatch puts the
    working directory back after the test) and the index tables through its DataReader."""
    from graphrag.config.load_config import load_config
    from graphrag.data_model.data_reader import DataReader
    from graphrag_storage import create_storage
    from graphrag_storage.tables.table_provider_factory import create_table_provider

    monkeypatch.chdir(project)
    config = load_config(root_dir=project)
    provider = create_table_provider(config.table_provider, storage=create_storage(config.output_storage))
    reader = DataReader(provider)
    names = ("entities", "communities", "community_reports", "text_units", "relationships", "covariates")
    tables = {name: await getattr(reader, name)() for name in names}
    return config, tables


async def test_global_search_sends_what_graphrag_sends(
    project: Path, server: GraphRagServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import graphrag.api

    query = "What are the main themes?"
    config, tables = await _graphrag_config_and_tables(project, monkeypatch)
    graphrag_answer, _ = await _on_own_loop(
        graphrag.api.global_search(
            config=config,
            entities=tables["entities"],
            communities=tables["communities"],
            community_reports=tables["community_reports"],
            community_level=2,
            dynamic_community_selection=False,
            response_type="multiple paragraphs",
            query=query,
        )
    )
    graphrag_sent = [_body(r) for r in server.requests_of("global_map") + server.requests_of("global_reduce")]
    server.reset()

    ext_answer = await GlobalSearchTool.from_settings(project).run_json({"query": query})
    ext_sent = [_body(r) for r in server.requests_of("global_map") + server.requests_of("global_reduce")]

    assert len(graphrag_sent) == 2  # one map batch, then the reduce call
    assert ext_sent == graphrag_sent  # model, messages, stream, and no max_tokens on either call
    assert all("max_tokens" not in body for body in ext_sent)
    assert ext_answer == graphrag_answer


async def test_local_search_sends_what_graphrag_sends_claims_included(
    project: Path, server: GraphRagServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import graphrag.api

    query = "What does the Granite Guild do with Dmitri's stone?"
    config, tables = await _graphrag_config_and_tables(project, monkeypatch)
    assert tables["covariates"] is not None  # the fixture index extracted claims
    graphrag_answer, graphrag_context = await _on_own_loop(
        graphrag.api.local_search(
            config=config,
            entities=tables["entities"],
            communities=tables["communities"],
            community_reports=tables["community_reports"],
            text_units=tables["text_units"],
            relationships=tables["relationships"],
            covariates=tables["covariates"],
            community_level=2,
            response_type="multiple paragraphs",
            query=query,
        )
    )
    (graphrag_request,) = server.requests_of("local")
    server.reset()

    ext_answer = await LocalSearchTool.from_settings(project).run_json({"query": query})
    (ext_request,) = server.requests_of("local")

    assert isinstance(graphrag_context, dict)
    assert "claims" in graphrag_context and len(graphrag_context["claims"]) > 0
    context = server.responder.context_of(ext_request)
    assert "-----claims-----" in context  # graphrag names the table after the covariates key
    assert "|DMITRI|GRANITE GUILD|TRUE|NONE|NONE|Dmitri sells cut stone to the Granite Guild." in context
    assert _body(ext_request) == _body(graphrag_request)
    assert ext_answer == graphrag_answer


async def test_tools_leave_environment_and_working_directory_alone(
    project: Path, server: GraphRagServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The key only in the project's .env, and the caller somewhere else: relative paths in settings.yaml
    # (output, output/lancedb) must still resolve against the project.
    monkeypatch.delenv("GRAPHRAG_API_KEY")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    environment, cwd = dict(os.environ), os.getcwd()

    global_tool = GlobalSearchTool.from_settings(project)
    local_tool = LocalSearchTool.from_settings(project)
    assert (dict(os.environ), os.getcwd()) == (environment, cwd)
    await global_tool.run_json({"query": "What are the main themes?"})
    await local_tool.run_json({"query": "Who is Carol?"})

    assert dict(os.environ) == environment
    assert os.getcwd() == cwd
    assert global_tool.data_config.entities_filepath == str(project / "output" / "entities.parquet")
    assert local_tool.data_config.vector_store["db_uri"] == str(project / "output" / "lancedb")
    keys = {r.headers["authorization"] for r in server.requests if r.route == "chat"}
    assert keys == {"Bearer sk-loopback-not-a-secret"}  # from .env, without putting it into os.environ
