#!/usr/bin/env bash
# Builds the streamq image from the Dockerfile at the repository root into an
# image archive under the cache (never in the repository):
#
#   ${STREAMQ_CACHE:-$HOME/.cache/streamq}/images/
#     streamq-<version>.tar          the image, docker-archive format (default),
#                                    tagged streamq:<version>
#     streamq-<version>.oci.tar      the same in oci-archive format (STREAMQ_IMAGE_FORMAT=oci-archive)
#     <archive>.inputs               hash of what went in; the build is skipped when it matches
#     <archive>.context              the files that went in (--check names the changed ones)
#     base/debian-<suite>-minbase.tar  the debootstrap base rootfs (buildah builds only)
#     context/                       the last build context
#
# Load it into a node or a cluster, then use imagePullPolicy: IfNotPresent
# (or Never) with the versioned tag, never :latest (which means Always):
#   ctr -n k8s.io images import "$(hack/build-image.sh --print-archive)"
#   kind load image-archive "$(hack/build-image.sh --print-archive)"
#
# Usage: hack/build-image.sh [--print-archive | --print-ref | --check | --force | --prune]
#   --print-archive  print the archive path and exit (builds nothing)
#   --print-ref      print the image's name:tag (what the chart expects by default) and exit
#   --check          exit 0 if the archive exists and is up to date with the
#                    inputs, 1 otherwise (builds nothing)
#   --force          build even if the archive is up to date
#   --prune          free buildah's storage of earlier builds' layers (its build cache)
#
# Builders (STREAMQ_IMAGE_BUILDER=auto|docker|buildah, default auto):
#   docker   `docker build` (BuildKit), used when a Docker engine answers
#   buildah  no Docker engine: debootstrap a Debian base rootfs, import it into
#            buildah's storage as localhost/streamq-base:<suite>-<hash>, then
#            `buildah bud --isolation chroot --network host --pull-never`
#            with BASE_IMAGE pointing at it. Needs root, debootstrap and buildah
#            (installed with apt-get when missing).
#
# Inputs hashed: Dockerfile, .dockerignore, docker/, pyproject.toml, contract/, app/,
# controller/ (sources, not caches), the Kafka connector, S3A, fence, reader and broker jars, the base image,
# the builder, the tag and the format.
#
# Environment:
#   STREAMQ_CACHE            cache root (default $HOME/.cache/streamq)
#   STREAMQ_IMAGE_NAME       image name (default streamq)
#   STREAMQ_IMAGE_TAG        tag (default: the version in pyproject.toml)
#   STREAMQ_IMAGE_FORMAT     docker-archive (default) | oci-archive
#   STREAMQ_DEBIAN_SUITE     Debian suite of the base (default bookworm)
#   STREAMQ_DEBIAN_MIRROR    Debian mirror for debootstrap (default: the host's apt sources)
#   STREAMQ_BUILD_CA_BUNDLE  CA bundle the build's pip trusts (default: the host's bundle);
#                            handed in as a build secret, not stored in the image
#   BASE_IMAGE               with the docker builder: the base (default: the Dockerfile's)
set -euo pipefail
{ # bash reads this whole block before running it: the script is safe to edit while a build runs


ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${STREAMQ_CACHE:-$HOME/.cache/streamq}"
IMAGES="$CACHE/images"
JARS="$CACHE/jars/spark-kafka"
S3A_JARS="$CACHE/jars/s3a"  # hadoop-aws and the AWS SDK modules S3A loads (s3a:// checkpoints)
# The Kafka broker's jars (the quick start's in-cluster broker runs the image as `kafka`): the version
# hack/install-jars.sh installs, read from the same POM.
KAFKA_VERSION="${KAFKA_VERSION:-$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$ROOT/hack/maven/kafka-broker/pom.xml" | head -n1)}"
KAFKA_DIR="$CACHE/kafka/$KAFKA_VERSION"
FENCE_JARS="$CACHE/jars/fence"  # the driver's write fence (jvm/fence)
READER_JARS="$CACHE/jars/reader"  # the streamq-kafka continuous source (jvm/reader)

NAME="${STREAMQ_IMAGE_NAME:-streamq}"
VERSION="$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -n1)"
TAG="${STREAMQ_IMAGE_TAG:-$VERSION}"
FORMAT="${STREAMQ_IMAGE_FORMAT:-docker-archive}"
SUITE="${STREAMQ_DEBIAN_SUITE:-bookworm}"
BUILDER="${STREAMQ_IMAGE_BUILDER:-auto}"

log() { printf '[build-image] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ -n "$TAG" ]] || die "no version in pyproject.toml and STREAMQ_IMAGE_TAG unset"
[[ "$TAG" != latest ]] || die "refusing the tag 'latest' (it makes Kubernetes pull): use a version"
case "$FORMAT" in
  docker-archive) ARCHIVE="$IMAGES/$NAME-$TAG.tar" ;;
  oci-archive) ARCHIVE="$IMAGES/$NAME-$TAG.oci.tar" ;;
  *) die "STREAMQ_IMAGE_FORMAT must be docker-archive or oci-archive, not $FORMAT" ;;
esac
REF="$NAME:$TAG"

MODE=build
case "${1:-}" in
  "") ;;
  --print-archive) echo "$ARCHIVE"; exit 0 ;;
  --print-ref) echo "$REF"; exit 0 ;;
  --check) MODE=check ;;
  --force) MODE=force ;;
  --prune)
    # Layers of earlier builds stay in buildah's storage as the cache of later ones.
    command -v buildah >/dev/null || die "buildah not found"
    buildah rmi --prune >/dev/null && log "removed dangling images from buildah's storage (the next build starts cold)"
    exit 0
    ;;
  -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument: $1 (see --help)" ;;
esac

docker_works() { command -v docker >/dev/null && docker info >/dev/null 2>&1; }

if [[ "$BUILDER" == auto ]]; then
  if docker_works; then BUILDER=docker; else BUILDER=buildah; fi
fi
case "$BUILDER" in
  docker) docker_works || die "STREAMQ_IMAGE_BUILDER=docker but no Docker engine answers" ;;
  buildah) ;;
  *) die "STREAMQ_IMAGE_BUILDER must be auto, docker or buildah, not $BUILDER" ;;
esac

# ------------------------------------------------------------------ context
# The context holds only what the Dockerfile copies: the sources (without
# bytecode caches) and the connector jars, so its hash is the inputs' hash.
SOURCES=(Dockerfile .dockerignore docker pyproject.toml contract app controller)

stage_context() { # stage_context <dir>
  local ctx="$1" p
  for p in "${SOURCES[@]}"; do
    [[ -e "$ROOT/$p" ]] || die "$p missing in $ROOT"
  done
  rm -rf "$ctx"; mkdir -p "$ctx/jars/spark-kafka" "$ctx/jars/s3a" "$ctx/jars/fence" "$ctx/jars/reader" "$ctx/jars/kafka/libs" "$ctx/jars/kafka/config"
  tar -C "$ROOT" --exclude='__pycache__' --exclude='*.pyc' --exclude='.pytest_cache' --exclude='docker/*.md' \
    -cf - "${SOURCES[@]}" | tar -C "$ctx" -xf -
  cp -p "$JARS"/*.jar "$ctx/jars/spark-kafka/"
  cp -p "$S3A_JARS"/*.jar "$ctx/jars/s3a/"
  cp -p "$KAFKA_DIR"/libs/*.jar "$ctx/jars/kafka/libs/"
  cp -p "$KAFKA_DIR"/config/log4j2.properties "$ctx/jars/kafka/config/"
  cp -p "$FENCE_JARS"/*.jar "$ctx/jars/fence/"
  cp -p "$READER_JARS"/*.jar "$ctx/jars/reader/"
}

context_manifest() { # context_manifest <dir>: one line per file: path, executable bit, sha256
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z |
    xargs -0 sh -c 'for f; do printf "%s %s " "$f" "$(test -x "$f" && echo x || echo -)"; sha256sum < "$f"; done' sh)
}

ensure_jars() {
  if ! compgen -G "$JARS/spark-sql-kafka-0-10_*.jar" >/dev/null || [[ ! -f "$JARS/.complete" ]] ||
     ! compgen -G "$S3A_JARS/hadoop-aws-*.jar" >/dev/null || [[ ! -f "$S3A_JARS/.complete" ]] ||
     [[ ! -f "$KAFKA_DIR/.complete" ]] || [[ ! -f "$FENCE_JARS/streamq-fence.jar" ]] ||
     [[ ! -f "$READER_JARS/streamq-reader.jar" ]]; then
    [[ "$MODE" != check ]] || { log "Kafka connector, S3A, fence, reader or broker jars missing in $JARS, $S3A_JARS, $FENCE_JARS, $READER_JARS, $KAFKA_DIR"; exit 1; }
    log "Kafka connector, S3A, fence, reader or broker jars missing in $JARS, $S3A_JARS, $FENCE_JARS, $READER_JARS, $KAFKA_DIR: running hack/install-jars.sh"
    "$ROOT/hack/install-jars.sh"
  fi
  compgen -G "$JARS/spark-sql-kafka-0-10_*.jar" >/dev/null || die "no connector jars in $JARS after hack/install-jars.sh"
  compgen -G "$S3A_JARS/hadoop-aws-*.jar" >/dev/null || die "no hadoop-aws jar in $S3A_JARS after hack/install-jars.sh"
  compgen -G "$KAFKA_DIR/libs/kafka_2.13-*.jar" >/dev/null || die "no Kafka broker in $KAFKA_DIR after hack/install-jars.sh"
}

# A fresh Debian machine has neither: install them (root only), as the rest of
# hack/ installs what it needs.
ensure_buildah_tools() {
  local missing=() tool
  for tool in buildah debootstrap; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  ((${#missing[@]} == 0)) && return
  [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null ||
    die "not installed: ${missing[*]} (Debian: apt-get install ${missing[*]}); or use STREAMQ_IMAGE_BUILDER=docker"
  log "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# ------------------------------------------------------------- buildah base
# The host's Debian mirror, read from its apt sources (so nothing is hard-coded).
host_mirror() { # host_mirror <regex the URI must (not) match: main|security>
  local want="$1" uri
  while read -r uri; do
    if [[ "$want" == security ]]; then
      [[ "$uri" == *security* ]] && { echo "$uri"; return; }
    else
      [[ "$uri" != *security* ]] && { echo "$uri"; return; }
    fi
  done < <(
    { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{for (i=2;i<=NF;i++) print $i}'
      grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        sed -E 's/^deb +(\[[^]]*\] +)?//' | awk '{print $1}'; } | grep -E '^https?://' || true
  )
}

BASE_TAR="$IMAGES/base/debian-$SUITE-minbase.tar"

make_base_tar() {
  [[ -s "$BASE_TAR" ]] && return
  command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"
  [[ $EUID -eq 0 ]] || die "debootstrap needs root"
  local mirror="${STREAMQ_DEBIAN_MIRROR:-$(host_mirror main)}"
  local security="${STREAMQ_DEBIAN_SECURITY_MIRROR:-$(host_mirror security)}"
  [[ -n "$mirror" ]] || die "no Debian mirror in the host's apt sources: set STREAMQ_DEBIAN_MIRROR"
  local t0=$SECONDS rootfs="$IMAGES/base/.rootfs.new"
  rm -rf "$rootfs"; mkdir -p "$rootfs"
  log "debootstrap $SUITE (minbase) into $rootfs"
  debootstrap --variant=minbase --components=main "$SUITE" "$rootfs" "$mirror" \
    > "$IMAGES/base/debootstrap.log" 2>&1 || die "debootstrap failed: see $IMAGES/base/debootstrap.log"

  # What a slim Debian image has: updates and security sources, no docs or
  # man pages or translations from later installs, no recommends, no apt caches.
  {
    echo "deb $mirror $SUITE main"
    echo "deb $mirror $SUITE-updates main"
    [[ -z "$security" ]] || echo "deb $security $SUITE-security main"
  } > "$rootfs/etc/apt/sources.list"
  cat > "$rootfs/etc/dpkg/dpkg.cfg.d/slim-excludes" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
EOF
  cat > "$rootfs/etc/apt/apt.conf.d/90slim" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
EOF
  find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
  rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/var/log/* "$rootfs"/tmp/* "$rootfs"/etc/hostname "$rootfs"/etc/resolv.conf
  : > "$rootfs/etc/resolv.conf"
  (cd "$rootfs" && tar --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
    -cf "$BASE_TAR.new" .)
  mv "$BASE_TAR.new" "$BASE_TAR"
  rm -rf "$rootfs"
  log "base rootfs: $BASE_TAR ($(du -h "$BASE_TAR" | cut -f1), $((SECONDS - t0)) s)"
}

# The name of the local base image: the rootfs tarball's hash is in its tag.
buildah_base_name() {
  echo "localhost/streamq-base:$SUITE-$(sha256sum "$BASE_TAR" | cut -c1-12)"
}

# Prints the name of the local base image, importing the rootfs if needed.
ensure_buildah_base() {
  command -v buildah >/dev/null || die "buildah not found (apt-get install buildah)"
  mkdir -p "$IMAGES/base"
  make_base_tar
  local base; base="$(buildah_base_name)"
  if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
    log "importing $BASE_TAR as $base"
    local ctr; ctr="$(buildah from --pull-never scratch)"
    buildah add --quiet "$ctr" "$BASE_TAR" / >/dev/null
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --cmd /bin/bash --os linux --arch "$(dpkg --print-architecture 2>/dev/null || echo amd64)" "$ctr"
    buildah commit --quiet --rm "$ctr" "$base" >/dev/null
  fi
  echo "$base"
}

# ------------------------------------------------------------------- build
ca_bundle() {
  local f="${STREAMQ_BUILD_CA_BUNDLE:-${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}}"
  if [[ -s "$f" ]]; then echo "$f"; else
    : > "$IMAGES/.empty-ca"; echo "$IMAGES/.empty-ca"
  fi
}

# The fully qualified name a container runtime gives a short one (streamq:0.1.0
# -> docker.io/library/streamq:0.1.0). ctr names an image from an OCI archive
# exactly as its ref.name annotation says, so that one must be qualified for
# `image: streamq:0.1.0` in a pod to find it; docker archives are normalized by ctr.
qualified_ref() {
  local ref="$1" first="${1%%/*}"
  if [[ "$ref" != */* ]]; then
    echo "docker.io/library/$ref"
  elif [[ "$first" != *.* && "$first" != *:* && "$first" != localhost ]]; then
    echo "docker.io/$ref"
  else
    echo "$ref"
  fi
}

build_buildah() { # build_buildah <ctx> <base>
  local ctx="$1" base="$2" dest="$REF"
  [[ "$FORMAT" != oci-archive ]] || dest="$(qualified_ref "$REF")"
  buildah bud --isolation chroot --network host --pull-never --layers \
    --build-arg BASE_IMAGE="$base" \
    --secret id=cacert,src="$(ca_bundle)" \
    -f "$ctx/Dockerfile" -t "localhost/$REF" "$ctx"
  rm -f "$ARCHIVE.new"
  buildah push --quiet "localhost/$REF" "$FORMAT:$ARCHIVE.new:$dest"
}

build_docker() { # build_docker <ctx>
  local ctx="$1" args=()
  [[ -z "${BASE_IMAGE:-}" ]] || args+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
  [[ "$FORMAT" == docker-archive ]] || die "the docker builder writes docker-archive only"
  DOCKER_BUILDKIT=1 docker build "${args[@]}" --secret id=cacert,src="$(ca_bundle)" \
    -f "$ctx/Dockerfile" -t "$REF" "$ctx"
  rm -f "$ARCHIVE.new"
  docker save -o "$ARCHIVE.new" "$REF"
}

mkdir -p "$IMAGES"
exec 9> "$IMAGES/.build.lock"
flock 9

ensure_jars
CTX="$IMAGES/context"
stage_context "$CTX"
if [[ "$BUILDER" == buildah ]]; then
  if [[ "$MODE" == check ]]; then
    [[ -s "$BASE_TAR" ]] || { log "no base rootfs yet ($BASE_TAR)"; exit 1; }
    BASE="$(buildah_base_name)"
  else
    ensure_buildah_tools
    BASE="$(ensure_buildah_base)"
  fi
else
  BASE="${BASE_IMAGE:-Dockerfile default}"
fi
MANIFEST="$(context_manifest "$CTX")"
INPUTS="$(printf '%s\n' "context=$(sha256sum <<<"$MANIFEST" | cut -d' ' -f1)" "builder=$BUILDER" "base=$BASE" \
  "ref=$REF" "format=$FORMAT" | sha256sum | cut -d' ' -f1)"

if [[ -s "$ARCHIVE" && -f "$ARCHIVE.inputs" && "$(cat "$ARCHIVE.inputs")" == "$INPUTS" ]]; then
  [[ "$MODE" == check ]] && exit 0
  if [[ "$MODE" != force ]]; then
    log "up to date: $ARCHIVE ($REF, $(du -h "$ARCHIVE" | cut -f1))"
    echo "$ARCHIVE"
    exit 0
  fi
fi
if [[ "$MODE" == check ]]; then
  if [[ ! -s "$ARCHIVE" ]]; then
    log "missing: $ARCHIVE"
  elif [[ -f "$ARCHIVE.context" ]]; then
    changed="$(diff <(cat "$ARCHIVE.context") <(echo "$MANIFEST") | sed -n 's/^[<>] \.\/\([^ ]*\) .*/\1/p' | sort -u | head -n 20 | tr '\n' ' ' || true)"
    log "stale: $ARCHIVE (changed since it was built: ${changed:-the base, builder, tag or format})"
  else
    log "stale: $ARCHIVE"
  fi
  exit 1
fi

t0=$SECONDS
log "building $REF with $BUILDER (base: $BASE)"
if [[ "$BUILDER" == buildah ]]; then build_buildah "$CTX" "$BASE"; else build_docker "$CTX"; fi
mv "$ARCHIVE.new" "$ARCHIVE"
echo "$INPUTS" > "$ARCHIVE.inputs"
echo "$MANIFEST" > "$ARCHIVE.context"
log "built $REF in $((SECONDS - t0)) s: $ARCHIVE ($FORMAT, $(du -h "$ARCHIVE" | cut -f1))"
log "load it: ctr -n k8s.io images import $ARCHIVE   (or: kind load image-archive $ARCHIVE)"
log "then use image: $REF with imagePullPolicy: IfNotPresent"
echo "$ARCHIVE"
exit 0
}
