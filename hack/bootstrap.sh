#!/usr/bin/env bash
# The Python side of a fresh machine: checks Python and Java, creates .venv and
# installs the project with its pinned dependencies. Idempotent and quick when
# nothing changed (keyed on pyproject.toml).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${STREAMQ_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

die() { echo "bootstrap: $*" >&2; exit 1; }

"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || die "Python 3.11+ is needed ($("$PYTHON" --version 2>&1) found); set PYTHON=/path/to/python3.11"

command -v java >/dev/null || die "Java 17+ is needed for Spark and Kafka (Debian: apt-get install openjdk-17-jre-headless)"
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
[ "${java_major:-0}" -ge 17 ] || die "Java 17+ is needed for Spark and Kafka; found Java ${java_major:-unknown}"

stamp="$VENV/.streamq-installed"
want=$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)
if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
echo "bootstrap: installing Python dependencies into $VENV (pyspark is large: a minute or two the first time)" >&2
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[dev,objectstore]"
echo "$want" > "$stamp"
