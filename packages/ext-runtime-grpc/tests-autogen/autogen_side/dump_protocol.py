"""Print AutoGen 0.7.5's own `agents` protocol (from its generated descriptors) as JSON: each message's fields and
each service method, to compare with ext's `agent_rpc.proto` field by field. Runs with the `autogen` hatch
environment's python."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from autogen_ext.runtimes.grpc.protos import agent_worker_pb2
from google.protobuf import descriptor_pb2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from autogen_support import describe_protocol


def main() -> None:
    file = descriptor_pb2.FileDescriptorProto()
    agent_worker_pb2.DESCRIPTOR.CopyToProto(file)
    sys.stdout.write(json.dumps(describe_protocol(file)) + "\n")


if __name__ == "__main__":
    main()
