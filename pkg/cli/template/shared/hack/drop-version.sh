#!/usr/bin/env bash
# Retires a version of a kind: its API files, its module and [[api]] entry
# when nothing else lives there, and its example objects. Refused while the
# version is the hub, the one stored, or named by a reconciler. Writes all
# changes or none. Then run hack/update-codegen.sh, and on a cluster
# `kinject migrate KIND` before applying the CRD. Runs from any directory.
#
#   hack/drop-version.sh --group tutorial.example.com --version v1alpha1 --kind Widget
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# On a terminal cargo shows its progress; elsewhere it is quiet.
quiet=(--quiet)
if [ -t 2 ]; then quiet=(); fi

cargo run ${quiet[@]+"${quiet[@]}"} --package codegen -- --config codegen.toml drop-version "$@"
