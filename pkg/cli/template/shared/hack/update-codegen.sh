#!/usr/bin/env bash
# Regenerates generated/ from the API types named in codegen.toml, the CRDs in
# config/300-*.yaml from the types and their #[kind] markers (keeping each
# manifest's labels and annotations), and the RBAC rules in config/. Runs from
# any directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# On a terminal cargo shows its progress (the first build takes minutes);
# elsewhere (CI logs, tests) it is quiet.
quiet=(--quiet)
if [ -t 2 ]; then quiet=(); fi

cargo run ${quiet[@]+"${quiet[@]}"} --package codegen -- --config codegen.toml
cargo run ${quiet[@]+"${quiet[@]}"} --package schema -- update-crds config
# Last: it builds the reconcilers, which use the code generated above.
cargo run ${quiet[@]+"${quiet[@]}"} --package controller --bin rbac -- config
