#!/usr/bin/env bash
# The controller against a local in-memory API server (`kinject serve`) until
# Ctrl-C: starts the server, writes its kubeconfig to .testenv/kubeconfig,
# applies config/ with kubectl, and runs the controller with
# SYSTEM_NAMESPACE={{namespace}}. Runs from any directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v kubectl >/dev/null || { echo "error: kubectl is not on PATH; install it to apply config/" >&2; exit 1; }
command -v kinject >/dev/null || {
  echo "error: the kinject command is not on PATH; install it from the framework: cargo install --path <framework>/pkg/cli" >&2
  exit 1
}

# On a terminal cargo shows its progress (the first build takes minutes).
quiet=(--quiet)
if [ -t 2 ]; then quiet=(); fi
cargo build ${quiet[@]+"${quiet[@]}"} -p controller --bin controller
target_dir=$(cargo metadata --format-version 1 --no-deps --offline | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')

mkdir -p .testenv
rm -f .testenv/kubeconfig
# In a process group of its own (job control on for this one line), so
# Ctrl-C reaches only the controller: the API server outlives it, and the
# controller's watches end without a warning. The trap stops the server.
set -m
kinject serve --kubeconfig .testenv/kubeconfig &
server=$!
set +m
trap 'kill "${server}" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  [ -s .testenv/kubeconfig ] && break
  kill -0 "${server}" 2>/dev/null || { echo "error: the API server exited" >&2; exit 1; }
  sleep 0.1
done
[ -s .testenv/kubeconfig ] || { echo "error: the API server wrote no kubeconfig in 10 s" >&2; exit 1; }

kubectl --kubeconfig .testenv/kubeconfig apply -f config/ >/dev/null
echo "config/ applied; kubectl --kubeconfig .testenv/kubeconfig reaches the API server" >&2
SYSTEM_NAMESPACE={{namespace}} "${target_dir}/debug/controller" --kubeconfig .testenv/kubeconfig --disable-ha
