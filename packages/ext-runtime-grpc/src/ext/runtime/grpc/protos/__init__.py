"""Generated protobuf and gRPC modules (see tools/gen_protos.py)."""
