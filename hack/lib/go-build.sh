# Sourced by the hack/install-*.sh scripts that build Go programs from the Go module proxy.

# go_build_env DIR: the module and build caches under DIR (kept between runs, outside the
# repository), this machine's own Go unless STREAMQ_GOTOOLCHAIN names another, no VCS stamping
# (the sources are module zips), and GOGC=400 (faster compiles, as hack/install-kube.sh explains).
go_build_env() {
  export GOMODCACHE="$1/go/mod"
  export GOCACHE="$1/go/build"
  export GOTOOLCHAIN="${STREAMQ_GOTOOLCHAIN:-local}"
  export GOFLAGS=-buildvcs=false
  export GOGC=${STREAMQ_GO_GOGC:-400}
}

# go_module_dir MODULE@VERSION: the module's extracted source in GOMODCACHE (downloaded if missing).
# Call it in an assignment (dir=$(go_module_dir m@v)), never inside an argument: set -e then stops
# the caller when the download fails, where "$(...)/." would expand to "/.".
go_module_dir() {
  local found
  found=$(go mod download -json "$1") || { echo "go mod download $1 failed: $found" >&2; return 1; }
  python3 -c 'import json, sys; d = json.loads(sys.argv[1]); print(d.get("Dir") or sys.exit(d.get("Error", "no Dir")))' "$found"
}

# go_install_begin WHAT ROOT_CACHE DEST VERSION [--print-dir]: the start every install script that
# builds into DEST shares. --print-dir prints DEST and exits; a DEST marked complete for VERSION
# exits (FORCE=1 builds again); else it checks for go, sets the build environment and unmarks DEST.
go_install_begin() {
  local what=$1 root=$2 dest=$3 version=$4
  if [[ "${5:-}" == --print-dir ]]; then
    printf '%s\n' "$dest"
    exit 0
  fi
  if [[ "${FORCE:-0}" != 1 && -f "$dest/.complete" && "$(cat "$dest/.complete")" == "$version" ]]; then
    log "$what $version: cached, nothing to do ($dest/bin)"
    exit 0
  fi
  command -v go >/dev/null || die "go not found (the Go toolchain builds $what from the module proxy)"
  go_build_env "$root"
  mkdir -p "$dest/bin"
  rm -f "$dest/.complete"
}

# go_module_source MODULE VERSION NESTED PATH DIR: MODULE@VERSION's source, writable, in DIR, with the
# version of its nested module NESTED that it requires put at DIR/PATH (the module's go.mod replaces
# NESTED with ./PATH, and a module's zip leaves nested modules out). Prints that version; call it
# in an assignment, so that a failure stops the caller.
go_module_source() {
  local module=$1 version=$2 nested=$3 path=$4 dir=$5 src nested_version nested_src
  src=$(go_module_dir "$module@$version") || return 1
  [[ -f "$src/go.mod" ]] || { echo "no module source for $module@$version (got '$src')" >&2; return 1; }
  rm -rf "$dir" && mkdir -p "$dir" && cp -a "$src/." "$dir/" && chmod -R u+w "$dir" || return 1
  nested_version=$(awk -v m="$nested" '$1 == m && $2 ~ /^v/ {print $2; exit}' "$dir/go.mod")
  [[ -n "$nested_version" ]] || { echo "$module@$version requires no $nested version" >&2; return 1; }
  nested_src=$(go_module_dir "$nested@$nested_version") || return 1
  [[ -f "$nested_src/go.mod" ]] || { echo "no module source for $nested@$nested_version (got '$nested_src')" >&2; return 1; }
  rm -rf "${dir:?}/$path" && cp -a "$nested_src" "$dir/$path" && chmod -R u+w "$dir/$path" || return 1
  printf '%s\n' "$nested_version"
}
