#!/usr/bin/env bash
# The local cluster until Ctrl-C: an in-memory API server with config/
# applied, a kubelet, Job, ReplicaSet and Deployment controllers, the webhook
# and the controller, each as its service account, and config/samples/ once
# the webhook serves (cmd/controller/examples/local.rs; `hack/run-local.sh
# --help` lists its switches). Its kubeconfig is .testenv/kubeconfig.
# Runs from any directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# On a terminal cargo shows its progress (the first build takes minutes).
quiet=(--quiet)
if [ -t 2 ]; then quiet=(); fi
exec cargo run ${quiet[@]+"${quiet[@]}"} -p controller --example local -- "$@"
