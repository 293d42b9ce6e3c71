"""Generated protobuf and gRPC modules (see tools/build/gen_protos.py)."""
