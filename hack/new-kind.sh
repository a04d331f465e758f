#!/usr/bin/env bash
# Starts a new kind: its API types (spec, status with conditions, lifecycle,
# defaults and validation, with tests), a reconciler with a table test, an
# example object under config/samples/, and their registration. Writes all
# files or none. Then run hack/update-codegen.sh. Runs from any directory.
#
#   hack/new-kind.sh --group tutorial.example.com --version v1alpha1 --kind Widget [--scope cluster]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo run --quiet --package codegen -- --config codegen.toml new-kind "$@"
