#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (an S3-compatible object store) from source through
# the Go module proxy and caches it outside the repository (never commit it):
#
#   ${STREAMQ_CACHE:-$HOME/.cache/streamq}/seaweedfs/<version>/
#     bin/weed        `weed server -dir=D -ip=127.0.0.1 -s3 -s3.port=P`: the
#                     S3 server of tests/support/seaweedfs.py (s3a:// checkpoints)
#     src/            the wrapper module it is built from
#     .complete       marker: the version built
#   ${STREAMQ_CACHE:-$HOME/.cache/streamq}/seaweedfs/go/{mod,build}   GOMODCACHE, GOCACHE
#
# `go install github.com/seaweedfs/seaweedfs/weed@v` is refused (the module's
# go.mod has a replace directive), so this script writes a small wrapper module
# that requires seaweedfs at the pinned version, copies its one replace and
# imports the weed package from a tools file, then `go build`s it.
#
# Usage: hack/install-seaweedfs.sh [--print-bin]
# Idempotent: with the marker and the binary present it does nothing. Cold it
# takes about 4 minutes on 2 cores (the sources come from the module proxy).
# Knobs:
#   STREAMQ_CACHE               cache root (default $HOME/.cache/streamq)
#   STREAMQ_SEAWEEDFS_VERSION   module version (default below; `weed version` 4.53)
#   STREAMQ_GOTOOLCHAIN         GOTOOLCHAIN for the build (default: local)
#   FORCE=1                     build again even if cached
set -euo pipefail
{ # bash reads the whole block first: editing the script during a build is safe

VERSION="${STREAMQ_SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"
ROOT_CACHE="${STREAMQ_CACHE:-$HOME/.cache/streamq}/seaweedfs"
DEST="$ROOT_CACHE/$VERSION"
BIN="$DEST/bin/weed"
FORCE="${FORCE:-0}"

log() { printf '[install-seaweedfs] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [[ "${1:-}" == --print-bin ]]; then
  printf '%s\n' "$BIN"
  exit 0
fi

if [[ "$FORCE" != 1 && -x "$BIN" && -f "$DEST/.complete" && "$(cat "$DEST/.complete")" == "$VERSION" ]]; then
  log "weed $VERSION: cached, nothing to do ($BIN)"
  exit 0
fi

command -v go >/dev/null || die "go not found (the Go toolchain builds weed from the module proxy)"

# shellcheck source=hack/lib/go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go-build.sh"
go_build_env "$ROOT_CACHE"
start=$SECONDS

src="$DEST/src"
rm -rf "$src"; mkdir -p "$src" "$DEST/bin"
cat >"$src/go.mod" <<EOF
module streamq.local/seaweedfs-build

go 1.26

require github.com/seaweedfs/seaweedfs $VERSION

// seaweedfs' own go.mod carries this replace; a dependent module must repeat it.
replace github.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0
EOF
cat >"$src/tools.go" <<'EOF'
//go:build tools

package tools

import _ "github.com/seaweedfs/seaweedfs/weed"
EOF

log "building weed from github.com/seaweedfs/seaweedfs@$VERSION ($(go version))"
(cd "$src" && go mod tidy -e >"$DEST/build.log" 2>&1 && go mod download github.com/seaweedfs/seaweedfs >>"$DEST/build.log" 2>&1) || {
  tail -n 40 "$DEST/build.log" >&2; die "go mod tidy failed (log: $DEST/build.log)"
}
(cd "$src" && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags='-s -w' -o "$BIN.new" github.com/seaweedfs/seaweedfs/weed >>"$DEST/build.log" 2>&1) || {
  tail -n 40 "$DEST/build.log" >&2; die "go build failed (log: $DEST/build.log)"
}
mv "$BIN.new" "$BIN"
"$BIN" version >&2 || die "the built weed does not run"
printf '%s\n' "$VERSION" >"$DEST/.complete"
log "weed $VERSION built in $((SECONDS - start)) s: $BIN ($(( $(stat -c %s "$BIN") / 1048576 )) MiB)"
exit 0
}
