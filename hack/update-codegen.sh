#!/usr/bin/env bash
# Regenerates generated/ from the API types named in codegen.toml, the CRDs in
# config/300-*.yaml from the types and their #[kind] markers (keeping each
# manifest's labels and annotations), and the RBAC rules in config/. Runs from
# any directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo run --quiet --package kinject-codegen -- --config codegen.toml
cargo run --quiet --package schema -- update-crds config
# testenv's protobuf decoders, from the locked k8s-pb and k8s-openapi (the
# framework's own generated file; its test, run by `cargo test --workspace`,
# fails when it is stale). KINJECT_SKIP_TESTENV_CODEGEN=1 leaves it out, for
# the scaffold tests, which change nothing it is made from.
if [[ -z "${KINJECT_SKIP_TESTENV_CODEGEN:-}" ]]; then
  TESTENV_REGENERATE=1 cargo test --quiet --package kinject-testenv --test proto_generated
fi
# Last: it builds the reconcilers, which use the code generated above.
cargo run --quiet --package controller --bin rbac -- config
