"""ext's `agent_rpc.proto` against AutoGen 0.7.5's own generated descriptors (read in the `autogen` environment):
the same package, messages, field names, numbers, types, labels, oneofs and service methods, so the two encode
every message alike, including the ones the end-to-end tests do not exercise (the control channel's)."""

from __future__ import annotations

import json
import subprocess

from autogen_support import HERE, describe_protocol
from google.protobuf import descriptor_pb2

from ext.runtime.grpc.protos import agent_rpc_pb2


def test_agent_rpc_proto_matches_autogens_field_for_field(autogen_python: str) -> None:
    done = subprocess.run(
        [autogen_python, str(HERE / "autogen_side" / "dump_protocol.py")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    theirs = json.loads(done.stdout)

    file = descriptor_pb2.FileDescriptorProto()
    agent_rpc_pb2.DESCRIPTOR.CopyToProto(file)
    ours = json.loads(json.dumps(describe_protocol(file)))

    assert ours["package"] == theirs["package"] == "agents"
    assert ours["methods"] == theirs["methods"]
    assert sorted(ours["messages"]) == sorted(theirs["messages"])
    for name, fields in theirs["messages"].items():
        assert ours["messages"][name] == fields, name
