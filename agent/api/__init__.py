"""Generated protobuf/gRPC modules (see proto/ and scripts/gen-protos)."""
