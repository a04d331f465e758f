#!/usr/bin/env bash
# Regenerates src/http/proto/generated.rs, testenv's protobuf request decoders, from
# the sources of the locked k8s-pb and k8s-openapi. The file is written only
# when its content changes, so running this on an up-to-date tree makes cargo
# rebuild nothing. Runs from any directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

TESTENV_REGENERATE=1 cargo test --package kinject-testenv --test integration proto_generated
