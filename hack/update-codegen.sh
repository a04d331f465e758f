#!/usr/bin/env bash
# Regenerates generated/ from the API types named in codegen.toml, the CRDs in
# config/300-*.yaml from the types and their #[kind] markers (keeping each
# manifest's labels and annotations), and the RBAC rules in config/. Runs from
# any directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo run --quiet --package codegen -- --config codegen.toml
cargo run --quiet --package schema -- update-crds config
# Last: it builds the reconcilers, which use the code generated above.
cargo run --quiet --package controller --bin rbac -- config
