"""The committed protobuf/gRPC code matches what tools/build/gen_protos.py generates from proto/ today."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tools" / "build" / "gen_protos.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_protos", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_code_is_not_stale(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools regenerates the code; install it to run this check")
    gen = _load_script()
    fresh = gen.generate(tmp_path / "src")
    committed = gen.OUTPUT_DIR
    assert sorted(p.name for p in fresh.glob("*.py*")) == sorted(p.name for p in committed.glob("*.py*"))
    assert gen.differences(committed, fresh) == [], "stale generated code: run python tools/build/gen_protos.py"


def test_staleness_is_detected(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools regenerates the code; install it to run this check")
    gen = _load_script()
    fresh = gen.generate(tmp_path / "fresh")
    edited = tmp_path / "edited"
    edited.mkdir()
    for path in fresh.glob("*.py*"):
        (edited / path.name).write_bytes(path.read_bytes())
    (edited / "agent_worker_pb2.py").write_text((edited / "agent_worker_pb2.py").read_text() + "\n# hand edit\n")
    assert gen.differences(edited, fresh) == ["agent_worker_pb2.py"]


def test_generated_modules_import_by_package_path() -> None:
    from ext.runtime.grpc.protos import agent_worker_pb2, agent_worker_pb2_grpc, cloudevent_pb2

    assert agent_worker_pb2.DESCRIPTOR.name == "ext/runtime/grpc/protos/agent_worker.proto"
    assert cloudevent_pb2.CloudEvent.DESCRIPTOR.full_name == "io.cloudevents.v1.CloudEvent"
    assert hasattr(agent_worker_pb2_grpc, "AgentWorkerStub")
