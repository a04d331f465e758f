#!/usr/bin/env bash
# Starts a new kind: its API types (spec, status with conditions, lifecycle,
# defaults and validation, with tests), a reconciler with a table test, an
# example object under config/samples/, and their registration. Writes all
# files or none. Then run hack/update-codegen.sh. Runs from any directory.
#
#   hack/new-kind.sh --group tutorial.example.com --version v1alpha1 --kind Widget [--scope cluster]
#                    [--field replicas:int32]... [--owns Job]... [--watches Secret]...
#   hack/new-kind.sh --for Pod [--owns ConfigMap]...    # a controller of a Kubernetes kind
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# On a terminal cargo shows its progress; elsewhere it is quiet.
quiet=(--quiet)
if [ -t 2 ]; then quiet=(); fi

cargo run ${quiet[@]+"${quiet[@]}"} --package codegen -- --config codegen.toml new-kind "$@"
