#!/usr/bin/env bash
# README command 1: run a query locally. No cluster, no broker for the default.
#   hack/run.sh                      the embedded default: rate -> console, continuous mode
#   hack/run.sh my-query.yaml        any StreamingQuery file
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/hack/bootstrap.sh"
spec="${1:-$ROOT/examples/rate-to-console.yaml}"
if grep -q "kafka:" "$spec" 2>/dev/null; then
  "$ROOT/hack/install-jars.sh" >&2
fi
exec "${STREAMQ_VENV:-$ROOT/.venv}/bin/streamq" run "$spec" "${@:2}"
