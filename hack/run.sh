#!/usr/bin/env bash
# README command 1: run a query locally. No cluster, no broker for the default.
#   hack/run.sh                      the embedded default: rate -> console, continuous mode
#   hack/run.sh my-query.yaml        any StreamingQuery file
#   hack/run.sh --dev [--mode M]     the next step: the fraud filter on a Kafka broker on loopback
#                                    (python -m devtools: broker, payment feed, flagged payments, latency)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/hack/bootstrap.sh"
STREAMQ="${STREAMQ_VENV:-$ROOT/.venv}/bin/streamq"
if [[ "${1:-}" == "--dev" ]]; then
  "$ROOT/hack/install-jars.sh" >&2
  cd "$ROOT"  # devtools/ and testbed/ live in the checkout, not in the installed package
  exec "${STREAMQ_VENV:-$ROOT/.venv}/bin/python" -m devtools "${@:2}"
fi
spec="${1:-$ROOT/examples/rate-to-console.yaml}"
if grep -q "kafka:" "$spec" 2>/dev/null; then
  "$ROOT/hack/install-jars.sh" >&2
fi
exec "$STREAMQ" run "$spec" "${@:2}"
