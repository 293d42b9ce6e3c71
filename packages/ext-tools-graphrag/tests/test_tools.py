"""GlobalSearchTool and LocalSearchTool over a real graphrag index, graphrag's models at a loopback
OpenAI-protocol server that answers graphrag's prompts."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _project import API_BASE_ENV, build_project
from pydantic import SecretStr

from ext.core import CancellationToken, StaticWorkbench, ToolArgumentsError, load_component
from ext.testing.graphrag import GraphRagServer
from ext.testing.servers import RecordedRequest
from ext.tools.graphrag import (
    GlobalContextConfig,
    GlobalDataConfig,
    GlobalSearchTool,
    GraphRagSettingsError,
    LocalDataConfig,
    LocalSearchTool,
    MapReduceConfig,
    ModelSettings,
)


def _body(request: RecordedRequest) -> dict[str, Any]:
    assert isinstance(request.json, dict)
    return request.json


RIVERTON = "Community of Alice, Bob, Riverton, Carol"
STONEHAVEN = "Community of Stonehaven, Dmitri, Granite Guild"


# Two child processes each import graphrag (about 130 packages) and indexing makes ~30 model calls: about 80 s on a
# shared 2-core machine, past the suite's default 120 s limit when that machine is busier still.
@pytest.mark.timeout(300)
async def test_index_built_from_scratch_by_graphrag_then_searched(
    tmp_path: Path, server: GraphRagServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "fresh"
    monkeypatch.setenv(API_BASE_ENV, server.base_url + "/v1")
    monkeypatch.setenv("GRAPHRAG_API_KEY", "sk-loopback-not-a-secret")  # as .env says; restored afterwards
    server.api_key = None  # graphrag init writes its own key placeholder; .env gives a fake one
    await build_project(root, server)

    # Every document went through graph extraction, every community got a report, and embeddings were made.
    extracted = server.requests_of("extract_graph")
    assert len(extracted) == 4
    assert sorted(r["title"] for r in pd.read_parquet(root / "output" / "entities.parquet").to_dict("records")) == [
        "ALICE",
        "BOB",
        "CAROL",
        "DMITRI",
        "GRANITE GUILD",
        "RIVERTON",
        "STONEHAVEN",
    ]
    reports = pd.read_parquet(root / "output" / "community_reports.parquet")
    assert sorted(reports["title"]) == [RIVERTON, STONEHAVEN]
    assert "ALICE:Alice is the baker of Riverton." in server.embedded  # entity title:description
    # Claims (graphrag's covariates) were extracted from every document, in graphrag's claim tuple format.
    assert len(server.requests_of("extract_claims")) == 4
    claims = pd.read_parquet(root / "output" / "covariates.parquet")
    assert ("DMITRI", "GRANITE GUILD", "TRADE", "TRUE") in set(
        zip(claims["subject_id"], claims["object_id"], claims["type"], claims["status"], strict=True)
    )

    server.reset()
    tool = GlobalSearchTool.from_settings(root)
    answer = await tool.run_json({"query": "What are the main places?"})
    assert answer == "Global answer from: " + ", ".join(
        ["Alice", "Bob", "Riverton", "Carol", "Stonehaven", "Dmitri", "Granite Guild"]
    )


async def test_global_search_sends_every_community_report_to_map_and_points_to_reduce(
    project: Path, server: GraphRagServer
) -> None:
    server.responder.answers["global"] = "Two towns: Riverton by the river and Stonehaven in the hills."
    tool = GlobalSearchTool.from_settings(project)
    assert tool.name == "global_search"
    assert tool.schema.get("parameters", {}).get("required") == ["query"]

    answer = await tool.run_json({"query": "What are the main themes?"})

    assert answer == "Two towns: Riverton by the river and Stonehaven in the hills."
    maps = server.requests_of("global_map")
    assert len(maps) == 1
    assert sorted(server.responder.report_titles_in(server.responder.context_of(maps[0]))) == [RIVERTON, STONEHAVEN]
    assert server.responder.query_of(maps[0]) == "What are the main themes?"
    (reduce,) = server.requests_of("global_reduce")
    reduce_context = server.responder.context_of(reduce)
    assert f"Report {RIVERTON!r} is relevant." in reduce_context
    assert f"Report {STONEHAVEN!r} is relevant." in reduce_context
    assert _body(reduce)["stream"] is True
    assert reduce.headers["authorization"] == "Bearer sk-loopback-not-a-secret"


async def test_local_search_puts_the_questioned_entity_and_its_community_in_context(
    project: Path, server: GraphRagServer
) -> None:
    settings = project / "settings.yaml"
    settings.write_text(settings.read_text().replace("local_search:\n", "local_search:\n  top_k_entities: 1\n"))
    tool = LocalSearchTool.from_settings(project)
    assert tool.name == "local_search"
    assert tool.context_config.top_k_entities == 1

    answer = await tool.run_json({"query": "Who is Dmitri of Stonehaven?"})

    assert "Who is Dmitri of Stonehaven?" in server.embedded  # the query was embedded to find entities
    (request,) = server.requests_of("local")
    context = server.responder.context_of(request)
    assert "DMITRI" in context
    assert "Dmitri is the quarry master of Stonehaven." in context
    assert server.responder.report_titles_in(context) == [STONEHAVEN]
    assert answer.startswith("Local answer about: ")
    assert "Dmitri" in answer


async def test_tools_in_a_static_workbench(project: Path, server: GraphRagServer) -> None:
    server.responder.answers.update(local="Carol runs the library.", **{"global": "Bread and stone."})
    workbench = StaticWorkbench([GlobalSearchTool.from_settings(project), LocalSearchTool.from_settings(project)])
    assert [t["name"] for t in await workbench.list_tools()] == ["global_search", "local_search"]

    local = await workbench.call_tool("local_search", {"query": "Who is Carol?"})
    broad = await workbench.call_tool("global_search", {"query": "What is traded?"})

    assert (local.is_error, local.to_text()) == (False, "Carol runs the library.")
    assert (broad.is_error, broad.to_text()) == (False, "Bread and stone.")


async def test_built_from_explicit_configs(project: Path, server: GraphRagServer) -> None:
    out = project / "output"
    model = ModelSettings(
        model="gpt-4o-mini", api_base=server.base_url + "/v1", api_key=SecretStr("sk-loopback-not-a-secret")
    )
    tool = GlobalSearchTool(
        GlobalDataConfig(
            entities_filepath=str(out / "entities.parquet"),
            communities_filepath=str(out / "communities.parquet"),
            reports_filepath=str(out / "community_reports.parquet"),
        ),
        model,
        GlobalContextConfig(shuffle_data=False, include_community_rank=False),
        MapReduceConfig(map_max_tokens=321, reduce_max_tokens=654, response_type="one sentence"),
    )

    await tool.run_json({"query": "Anything?"})

    (map_request,) = server.requests_of("global_map")
    (reduce_request,) = server.requests_of("global_reduce")
    assert _body(map_request)["max_tokens"] == 321
    assert _body(reduce_request)["max_tokens"] == 654
    assert "one sentence" in server.responder.context_of(reduce_request)
    map_context = server.responder.context_of(map_request)
    assert "id|title|occurrence weight|content\n" in map_context  # no rank column


async def test_cancellation_aborts_the_search_and_closes_the_request(project: Path, server: GraphRagServer) -> None:
    server.responder.reply_delay = 60
    tool = LocalSearchTool.from_settings(project)
    token = CancellationToken()
    call = asyncio.ensure_future(tool.run_json({"query": "Who is Alice?"}, token))
    while not server.requests_of("local"):
        await server.wait_for_requests(server.request_count + 1, timeout=30)
    (request,) = server.requests_of("local")

    token.cancel()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(call, 5)
    await asyncio.wait_for(request.disconnected.wait(), 5)  # the loopback server saw the client go
    assert not request.completed


async def test_bad_arguments_fail_before_any_request(project: Path, server: GraphRagServer) -> None:
    tool = GlobalSearchTool.from_settings(project)
    with pytest.raises(ToolArgumentsError, match="query"):
        await tool.run_json({"question": "wrong key"})
    assert server.request_count == 0


def test_missing_index_file_is_named(project: Path) -> None:
    missing = project / "output" / "community_reports.parquet"
    missing.unlink()
    with pytest.raises(GraphRagSettingsError, match=r"community_reports\.parquet"):
        GlobalSearchTool.from_settings(project)


def test_missing_vector_store_is_named(project: Path) -> None:
    shutil.rmtree(project / "output" / "lancedb")
    with pytest.raises(GraphRagSettingsError, match="lancedb"):
        LocalSearchTool.from_settings(project)


def test_missing_or_bad_settings_file_is_named(project: Path) -> None:
    with pytest.raises(GraphRagSettingsError, match=r"nope\.yaml"):
        GlobalSearchTool.from_settings(project, "nope.yaml")
    broken = project / "broken.yaml"
    broken.write_text("completion_models: [1, 2\n", encoding="utf-8")
    with pytest.raises(GraphRagSettingsError, match=r"broken\.yaml"):
        GlobalSearchTool.from_settings(project, broken)
    invalid = project / "invalid.yaml"
    invalid.write_text((project / "settings.yaml").read_text().replace("type: exponential_backoff", "type: 7"))
    with pytest.raises(GraphRagSettingsError, match=r"invalid\.yaml"):
        LocalSearchTool.from_settings(project, invalid)


async def test_dump_and_load_round_trip_without_keys(
    project: Path, server: GraphRagServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_settings = LocalSearchTool.from_settings(project)
    dumped = from_settings.dump_component()
    assert dumped.provider == "ext.tools.graphrag.LocalSearchTool"
    assert dumped.config["settings"] == {"root_dir": str(project), "config_filepath": None}  # tmp_path is resolved
    assert "sk-loopback" not in json.dumps(dumped.model_dump())
    loaded = load_component(dumped, LocalSearchTool)
    server.responder.answers["local"] = "Bob fishes."
    assert await loaded.run_json({"query": "Who is Bob?"}) == "Bob fishes."

    monkeypatch.setenv("EXT_TEST_GRAPHRAG_KEY", "sk-loopback-not-a-secret")
    out = project / "output"
    base = server.base_url + "/v1"
    embedding = ModelSettings(model="text-embedding-3-small", api_base=base, api_key_env="EXT_TEST_GRAPHRAG_KEY")
    explicit = LocalSearchTool(
        LocalDataConfig(
            entities_filepath=str(out / "entities.parquet"),
            relationships_filepath=str(out / "relationships.parquet"),
            text_units_filepath=str(out / "text_units.parquet"),
            reports_filepath=str(out / "community_reports.parquet"),
            communities_filepath=str(out / "communities.parquet"),
            vector_store={"type": "lancedb", "db_uri": str(out / "lancedb"), "api_key": "vs-secret"},
        ),
        ModelSettings(
            model="gpt-4o-mini",
            api_base=base,
            api_key=SecretStr("sk-loopback-not-a-secret"),
            api_key_env="EXT_TEST_GRAPHRAG_KEY",
        ),
        embedding,
    )
    text = json.dumps(explicit.dump_component().model_dump())
    assert "sk-loopback" not in text and "vs-secret" not in text
    assert '"api_key_env": "EXT_TEST_GRAPHRAG_KEY"' in text
    again = LocalSearchTool.load_component(explicit.dump_component())
    reloaded, original = again.dump_component().config, explicit.dump_component().config
    assert reloaded["model"].pop("api_key") is None  # the key itself stays out; api_key_env brings it back
    assert "api_key" not in original["model"]
    assert reloaded == original
    assert await again.run_json({"query": "Who is Bob?"}) == "Bob fishes."
