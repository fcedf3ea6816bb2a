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
