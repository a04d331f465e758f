#!/usr/bin/env bash
# Fails when generated/, a CRD or the RBAC rules in config/ differ from what
# hack/update-codegen.sh would write, listing the stale files. Changes nothing.
# Runs from any directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# On a terminal cargo shows its progress; elsewhere it is quiet.
quiet=(--quiet)
if [ -t 2 ]; then quiet=(); fi

stale=0
cargo run ${quiet[@]+"${quiet[@]}"} --package codegen -- --config codegen.toml --verify || stale=1
cargo run ${quiet[@]+"${quiet[@]}"} --package schema -- update-crds --verify config || stale=1
cargo run ${quiet[@]+"${quiet[@]}"} --package controller --bin rbac -- --verify config || stale=1

if [[ "${stale}" -ne 0 ]]; then
  echo "Generated files are out of date: run hack/update-codegen.sh and commit the result." >&2
  exit 1
fi
echo "Generated files are up to date."
