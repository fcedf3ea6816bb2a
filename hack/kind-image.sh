#!/usr/bin/env bash
# The kind node image, built on this machine without any registry, and cached:
#
#   streamq-kind/base:<hash>          what kind's base image holds (images/base of
#                                     kind's module): a debootstrap Debian with systemd,
#                                     containerd, runc, CNI plugins, iptables..., kind's
#                                     entrypoint and files, runc behind hack/kind/capshim
#                                     (containerd's BinaryName) and restrict_oom_score_adj
#   streamq-kind/node:<k8s>-<hash>    the base plus what `kind build node-image` adds:
#                                     kubeadm, kubelet, kubectl in /usr/bin, /kind/version,
#                                     /kind/manifests/default-{cni,storage}.yaml, and the
#                                     images kubeadm and the manifests name, imported
#                                     (not unpacked) into the node's containerd:
#       registry.k8s.io/kube-{apiserver,controller-manager,scheduler,proxy}:<k8s>
#                                     the cached source-built binaries (hack/install-kube.sh)
#       registry.k8s.io/etcd:<tag>    the cached etcd
#       registry.k8s.io/coredns/coredns:<tag>   CoreDNS from source, kubeadm's plugins
#       registry.k8s.io/pause:<tag>   testbed/cluster/images/pause.c, static
#       streamq-kind/kindnet:<hash>   the pod network (hack/kind/kindnet)
#
# `kind build node-image` is not used: it pulls etcd, CoreDNS, pause, kindnetd and
# the storage images from registries and has no way to be handed them. This
# script does what it does (a build container from the base, docker cp, a
# containerd in it to import the images, docker commit) with images built here.
#
# Cached in ${STREAMQ_CACHE:-~/.cache/streamq}/kind/: the rootfs tarballs, the
# component images archive, CoreDNS, kubeadm; the images themselves live in
# the Docker engine's storage (hack/kind-docker.sh keeps its data root there).
# Each image's tag is a hash of what went in: a change rebuilds what it touches.
#
# Usage: hack/kind-image.sh [--print-image | --check | --force]
#   (none)         build what is missing; print the node image's name
#   --print-image  print the node image's name (builds nothing)
#   --check        exit 0 when the node image is in the Docker engine
#   --force        rebuild the base and node images (the rootfs tarballs stay)
#
# Needs root (debootstrap, chroot), a Docker engine (hack/kind-docker.sh up),
# Go, gcc. Environment: STREAMQ_CACHE, STREAMQ_KUBE_VERSION, STREAMQ_KIND_VERSION,
# STREAMQ_DEBIAN_SUITE (bookworm), STREAMQ_DEBIAN_MIRROR, STREAMQ_COREDNS_VERSION.
set -euo pipefail
{ # read whole before running: safe to edit during a build
_kind_log_tag=kind-image
source "$(dirname "${BASH_SOURCE[0]}")/kind/lib.sh"

SUITE="${STREAMQ_DEBIAN_SUITE:-bookworm}"
COREDNS_VERSION="${STREAMQ_COREDNS_VERSION:-v1.12.4}"
BIN_DIR="$CACHE/kube/$KUBE_VERSION/bin"
WORK="$KIND_CACHE/work"
PAUSE_SRC="$ROOT/testbed/cluster/images/pause.c"
BASE_PACKAGES=systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,jq,procps,containerd,runc,containernetworking-plugins
NET_PACKAGES=iptables,conntrack,iproute2
export DOCKER_BUILDKIT=0  # the classic builder: FROM local images only, no BuildKit frontend to fetch

mode=build
case "${1:-}" in
  "") ;;
  --print-image) mode=print ;;
  --check) mode=check ;;
  --force) mode=force ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument: $1 (see --help)" ;;
esac

kind_module_dir() {
  (go_env; cd "$ROOT" && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | jq -r .Dir)
}

host_mirror() { # the host's Debian mirror (main, not security), from its apt sources
  { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{for (i=2;i<=NF;i++) print $i}'
    grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      sed -E 's/^deb +(\[[^]]*\] +)?//' | awk '{print $1}'; } | grep -E '^https?://' | grep -v security | head -n1 || true
}

unmount_under() { # what is mounted under a directory (deepest first)
  local m
  for m in $(awk -v d="$1" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m"
  done
}

debootstrap_tar() { # debootstrap_tar <out.tar> <packages>: a minbase rootfs with those packages
  local out="$1" packages="$2" rootfs="$1.rootfs" mirror
  [[ -s "$out" ]] && return
  unmount_under "$rootfs"
  command -v debootstrap >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  mirror="${STREAMQ_DEBIAN_MIRROR:-$(host_mirror)}"
  [[ -n "$mirror" ]] || die "no Debian mirror in the host's apt sources: set STREAMQ_DEBIAN_MIRROR"
  rm -rf "$rootfs"; mkdir -p "$rootfs"
  log "debootstrap $SUITE minbase + $packages"
  debootstrap --variant=minbase --include="$packages" "$SUITE" "$rootfs" "$mirror" >"$out.log" 2>&1 ||
    die "debootstrap failed: see $out.log"
  "${@:3}" "$rootfs"  # a finishing step, given as further arguments
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
    "$rootfs"/var/log/* "$rootfs"/tmp/* "$rootfs"/etc/hostname
  : >"$rootfs/etc/resolv.conf"
  unmount_under "$rootfs"  # debootstrap leaves /proc mounted when interrupted, and sometimes not
  (cd "$rootfs" && tar --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -cf "$out.new" .)
  mv "$out.new" "$out"
  rm -rf "$rootfs"
  log "rootfs $out ($(du -h "$out" | cut -f1))"
}

# ------------------------------------------------------------------ base image
# What kind's images/base/Dockerfile does, on a debootstrap rootfs.
finish_base_rootfs() { # finish_base_rootfs <rootfs>
  local r="$1" files="$KIND_MODULE/images/base/files" f
  install -m 0755 "$files"/usr/local/bin/* "$r/usr/local/bin/"
  mkdir -p "$r/kind/bin" "$r/LICENSES"
  cp -r "$files/kind/." "$r/kind/"
  find "$r/kind" -type f -exec chmod 0644 {} +
  chmod 0755 "$r/kind" "$r/kind/bin" "$r"/kind/bin/*
  install -m 0644 "$files"/LICENSES/* "$r/LICENSES/"
  install -m 0644 "$files/etc/crictl.yaml" "$r/etc/"
  mkdir -p "$r/etc/containerd" "$r/etc/default" "$r/etc/sysctl.d" "$r/etc/systemd/system/kubelet.service.d"
  install -m 0644 "$files"/etc/containerd/* "$r/etc/containerd/"
  install -m 0644 "$files"/etc/default/* "$r/etc/default/"
  install -m 0644 "$files"/etc/sysctl.d/* "$r/etc/sysctl.d/"
  for f in "$files"/etc/systemd/system/*; do [[ -f "$f" ]] && install -m 0644 "$f" "$r/etc/systemd/system/"; done
  install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$r/etc/systemd/system/kubelet.service.d/"
  find "$r/lib/systemd/system/sysinit.target.wants/" -name "systemd-tmpfiles-setup.service" -delete
  rm -f "$r"/lib/systemd/system/multi-user.target.wants/* "$r"/etc/systemd/system/*.wants/* \
    "$r"/lib/systemd/system/local-fs.target.wants/* "$r"/lib/systemd/system/sockets.target.wants/*udev* \
    "$r"/lib/systemd/system/sockets.target.wants/*initctl* "$r"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$r/etc/systemd/journald.conf"
  ln -sf /lib/systemd/systemd "$r/sbin/init"
  chroot "$r" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  chroot "$r" systemctl mask systemd-binfmt.service >/dev/null 2>&1
  mkdir -p "$r/etc/kubernetes/manifests"
  # containerd and runc are Debian's; kind's units and scripts expect them in /usr/local.
  for f in containerd ctr containerd-shim-runc-v2; do ln -sf "/usr/bin/$f" "$r/usr/local/bin/$f"; done
  install -m 0755 "$CAPSHIM" "$r/usr/local/bin/capshim"
  mkdir -p "$r/opt/cni/bin"
  for f in "$r"/usr/lib/cni/*; do ln -sf "/usr/lib/cni/$(basename "$f")" "$r/opt/cni/bin/"; done
  chroot "$r" ctr oci spec |
    jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
    jq 'del(.process.rlimits)' >"$r/etc/containerd/cri-base.json"
  # This machine: privileged containers through the capability shim, and no
  # negative oom_score_adj (refused without CAP_SYS_RESOURCE).
  sed -i -e 's/^\(\s*\)SystemdCgroup = true/&\n\1BinaryName = "\/usr\/local\/bin\/capshim"/' \
    -e 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$r/etc/containerd/config.toml"
  grep -q 'BinaryName = "/usr/local/bin/capshim"' "$r/etc/containerd/config.toml" || die "containerd config: no BinaryName"
  grep -q 'restrict_oom_score_adj = true' "$r/etc/containerd/config.toml" || die "containerd config: no restrict_oom_score_adj"
}

base_image() { # prints the base image's name, building it when missing
  local hash name tar
  hash="$( { declare -f finish_base_rootfs; echo "$BASE_PACKAGES $SUITE $KIND_VERSION";
    sha256sum "$CAPSHIM"; } | sha256sum | cut -c1-12)"
  name="streamq-kind/base:$hash"
  tar="$KIND_CACHE/base/base-$SUITE-$hash.tar"
  if [[ $mode != force ]] && docker image inspect "$name" >/dev/null 2>&1; then echo "$name"; return; fi
  mkdir -p "$KIND_CACHE/base"
  [[ $mode != force ]] || rm -f "$tar"
  debootstrap_tar "$tar" "$BASE_PACKAGES" finish_base_rootfs
  log "importing $tar as $name"
  docker import "$tar" "$name-rootfs" >/dev/null
  # what `docker import --change` cannot set (STOPSIGNAL): a metadata-only build on top
  mkdir -p "$WORK/base"
  printf '%s\n' "FROM $name-rootfs" 'ENV container=docker' 'STOPSIGNAL SIGRTMIN+3' \
    'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' >"$WORK/base/Dockerfile"
  docker_build "$name" "$WORK/base"
  docker rmi "$name-rootfs" >/dev/null
  rm -f "$KIND_CACHE"/base/base-"$SUITE"-*.tar.log
  find "$KIND_CACHE/base" -name "base-$SUITE-*.tar" ! -name "$(basename "$tar")" -delete
  echo "$name"
}

# ------------------------------------------------------------------ component images
build_coredns() { # CoreDNS with kubeadm's Corefile plugins; prints the binary
  local dir="$KIND_CACHE/coredns/$COREDNS_VERSION" main="$ROOT/hack/kind/coredns/main.go" inputs
  inputs="$COREDNS_VERSION $(sha256sum <"$main" | cut -c1-16)"
  if [[ ! -x "$dir/coredns" || "$(cat "$dir/coredns.inputs" 2>/dev/null)" != "$inputs" ]]; then
    log "building CoreDNS $COREDNS_VERSION from source"
    rm -rf "$dir/src"; mkdir -p "$dir/src"
    cp "$main" "$dir/src/main.go"
    printf 'module streamq.local/kind-coredns\n\ngo 1.24.0\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" >"$dir/src/go.mod"
    (go_env; cd "$dir/src" && go mod tidy && go build -trimpath -ldflags "-s -w" -o "$dir/coredns.new" .)
    "$dir/coredns.new" -plugins | grep -qx 'loop' || die "the CoreDNS build lacks the loop plugin"
    mv "$dir/coredns.new" "$dir/coredns"
    echo "$inputs" >"$dir/coredns.inputs"
  fi
  echo "$dir/coredns"
}

build_kindnet() {
  local out="$KIND_BIN/kindnet" src="$ROOT/hack/kind/kindnet" hash
  hash="$(cat "$src/go.mod" "$src/main.go" | sha256sum | cut -c1-16)"
  if [[ ! -x "$out" || "$(cat "$out.inputs" 2>/dev/null)" != "$hash" ]]; then
    (go_env; cd "$src" && go build -trimpath -ldflags "-s -w" -o "$out.new" .)
    mv "$out.new" "$out"; echo "$hash" >"$out.inputs"
  fi
  echo "$out"
}

build_pause() {
  local out="$KIND_BIN/pause" hash
  hash="$(sha256sum <"$PAUSE_SRC" | cut -c1-16)"
  if [[ ! -x "$out" || "$(cat "$out.inputs" 2>/dev/null)" != "$hash" ]]; then
    command -v gcc >/dev/null || die "gcc not found (apt-get install gcc libc6-dev)"
    gcc -static -Os -s -Wall -Wextra -Werror -o "$out.new" "$PAUSE_SRC"
    mv "$out.new" "$out"; echo "$hash" >"$out.inputs"
  fi
  echo "$out"
}

# iptables for kube-proxy: the node picks legacy or nft at boot (kind's entrypoint);
# this wrapper picks the mode whose tables hold the kubelet's chains, as upstream's
# iptables-wrapper does, then replaces itself with the chosen binaries.
IPTABLES_WRAPPER='#!/bin/sh
set -e
nft=$( (iptables-nft-save -t mangle; ip6tables-nft-save -t mangle) 2>/dev/null | grep -c "KUBE-IPTABLES-HINT\|KUBE-KUBELET-CANARY" || true)
legacy=$( (iptables-legacy-save -t mangle; ip6tables-legacy-save -t mangle) 2>/dev/null | grep -c "KUBE-IPTABLES-HINT\|KUBE-KUBELET-CANARY" || true)
if [ "$nft" -gt 0 ] && [ "$legacy" -eq 0 ]; then mode=nft
elif [ "$legacy" -gt 0 ]; then mode=legacy
else
  nft=$( (iptables-nft-save; ip6tables-nft-save) 2>/dev/null | grep -c "^-" || true)
  legacy=$( (iptables-legacy-save; ip6tables-legacy-save) 2>/dev/null | grep -c "^-" || true)
  if [ "$legacy" -ge "$nft" ]; then mode=legacy; else mode=nft; fi
fi
update-alternatives --set iptables "/usr/sbin/iptables-$mode" >/dev/null
update-alternatives --set ip6tables "/usr/sbin/ip6tables-$mode" >/dev/null
exec "$0" "$@"
'

docker_build() { # docker_build <tag> <context dir> (Dockerfile in it)
  docker build -q -t "$1" "$2" >/dev/null || die "docker build $1 failed"
}

component_images() { # builds the images the node imports; prints the archive
  local static_tar="$KIND_CACHE/images/static.tar" net_tar="$KIND_CACHE/images/net-$SUITE.tar" hash archive refs=()
  local etcd_tag coredns_tag pause_tag ctx="$WORK/images" coredns kindnet pause
  mkdir -p "$KIND_CACHE/images" "$ctx"
  coredns="$(build_coredns)"; kindnet="$KINDNET_BIN"; pause="$(build_pause)"
  mapfile -t wanted < <("$KUBEADM" config images list --kubernetes-version "$KUBE_VERSION")
  etcd_tag="$(printf '%s\n' "${wanted[@]}" | sed -n 's#^registry.k8s.io/etcd:##p')"
  coredns_tag="$(printf '%s\n' "${wanted[@]}" | sed -n 's#^registry.k8s.io/coredns/coredns:##p')"
  pause_tag="$(printf '%s\n' "${wanted[@]}" | sed -n 's#^registry.k8s.io/pause:##p')"
  [[ -n "$etcd_tag" && -n "$coredns_tag" && -n "$pause_tag" ]] || die "kubeadm config images list: ${wanted[*]}"
  [[ "$(grep -o 'sandbox_image = "[^"]*"' "$KIND_MODULE/images/base/files/etc/containerd/config.toml")" == \
     "sandbox_image = \"registry.k8s.io/pause:$pause_tag\"" ]] || die "containerd's sandbox image is not pause:$pause_tag"
  hash="$( { declare -f component_images; echo "$IPTABLES_WRAPPER $KUBE_VERSION ${wanted[*]} $KINDNET_IMAGE";
    sha256sum "$coredns" "$pause" "$BIN_DIR"/{kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy,etcd}; } |
    sha256sum | cut -c1-12)"
  archive="$KIND_CACHE/images/components-$hash.tar"
  if [[ -s "$archive" && $mode != force ]]; then echo "$archive"; return; fi
  log "building the component images (kube-*, etcd, CoreDNS, pause, kindnet)"
  # a static base: what distroless-static holds (users, /tmp, CA certificates)
  rm -rf "$ctx"; mkdir -p "$ctx/static/etc/ssl/certs" "$ctx/static/tmp"
  chmod 1777 "$ctx/static/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/static/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$ctx/static/etc/group"
  echo 'hosts: files dns' >"$ctx/static/etc/nsswitch.conf"
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/static/etc/ssl/certs/"
  (cd "$ctx/static" && tar --numeric-owner --owner=0 --group=0 --mtime=@0 -cf "$static_tar" .)
  docker import --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' "$static_tar" streamq-kind/static:1 >/dev/null
  debootstrap_tar "$net_tar" "$NET_PACKAGES" true
  docker image inspect streamq-kind/net:"$SUITE" >/dev/null 2>&1 && [[ ! "$net_tar" -nt "$KIND_CACHE/images/.net-imported" ]] ||
    { docker import "$net_tar" streamq-kind/net:"$SUITE" >/dev/null; touch "$KIND_CACHE/images/.net-imported"; }

  local c
  for c in kube-apiserver kube-controller-manager kube-scheduler etcd; do
    mkdir -p "$ctx/$c"; cp "$BIN_DIR/$c" "$ctx/$c/"
    printf 'FROM streamq-kind/static:1\nCOPY %s /usr/local/bin/%s\n' "$c" "$c" >"$ctx/$c/Dockerfile"
  done
  docker_build "registry.k8s.io/kube-apiserver:$KUBE_VERSION" "$ctx/kube-apiserver"
  docker_build "registry.k8s.io/kube-controller-manager:$KUBE_VERSION" "$ctx/kube-controller-manager"
  docker_build "registry.k8s.io/kube-scheduler:$KUBE_VERSION" "$ctx/kube-scheduler"
  docker_build "registry.k8s.io/etcd:$etcd_tag" "$ctx/etcd"
  mkdir -p "$ctx/kube-proxy"; cp "$BIN_DIR/kube-proxy" "$ctx/kube-proxy/"
  printf '%s' "$IPTABLES_WRAPPER" >"$ctx/kube-proxy/iptables-wrapper"
  cat >"$ctx/kube-proxy/Dockerfile" <<EOF
FROM streamq-kind/net:$SUITE
COPY kube-proxy /usr/local/bin/kube-proxy
COPY iptables-wrapper /usr/sbin/iptables-wrapper
RUN chmod 0755 /usr/sbin/iptables-wrapper && for b in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do ln -sf /usr/sbin/iptables-wrapper /usr/sbin/\$b; done
EOF
  docker_build "registry.k8s.io/kube-proxy:$KUBE_VERSION" "$ctx/kube-proxy"
  mkdir -p "$ctx/coredns"; cp "$coredns" "$ctx/coredns/coredns"
  printf 'FROM streamq-kind/static:1\nCOPY coredns /coredns\nEXPOSE 53 53/udp\nENTRYPOINT ["/coredns"]\n' >"$ctx/coredns/Dockerfile"
  docker_build "registry.k8s.io/coredns/coredns:$coredns_tag" "$ctx/coredns"
  mkdir -p "$ctx/pause"; cp "$pause" "$ctx/pause/pause"
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/pause/Dockerfile"
  docker_build "registry.k8s.io/pause:$pause_tag" "$ctx/pause"
  mkdir -p "$ctx/kindnet"; cp "$kindnet" "$ctx/kindnet/kindnet"
  printf 'FROM streamq-kind/net:%s\nCOPY kindnet /usr/local/bin/kindnet\nENTRYPOINT ["/usr/local/bin/kindnet"]\n' "$SUITE" >"$ctx/kindnet/Dockerfile"
  docker_build "$KINDNET_IMAGE" "$ctx/kindnet"
  refs=("registry.k8s.io/kube-apiserver:$KUBE_VERSION" "registry.k8s.io/kube-controller-manager:$KUBE_VERSION"
    "registry.k8s.io/kube-scheduler:$KUBE_VERSION" "registry.k8s.io/kube-proxy:$KUBE_VERSION"
    "registry.k8s.io/etcd:$etcd_tag" "registry.k8s.io/coredns/coredns:$coredns_tag" "registry.k8s.io/pause:$pause_tag"
    "$KINDNET_IMAGE")
  docker save -o "$archive.new" "${refs[@]}"  # one archive: the shared layers once
  mv "$archive.new" "$archive"
  find "$KIND_CACHE/images" -name 'components-*.tar' ! -name "$(basename "$archive")" -delete
  rm -rf "$ctx"
  echo "$archive"
}

# ------------------------------------------------------------------ node image
node_image_name() { # from every input's hash
  local base="$1" components="$2"
  echo "streamq-kind/node:$KUBE_VERSION-$( { echo "$base"; basename "$components"; declare -f assemble_node;
    cat "$ROOT"/hack/kind/manifests/*.yaml; sha256sum "$BIN_DIR/kubelet" "$BIN_DIR/kubectl" "$KUBEADM"; } |
    sha256sum | cut -c1-12)"
}

assemble_node() { # assemble_node <base> <components archive> <name>: what `kind build node-image` does
  local base="$1" archive="$2" name="$3" id f
  id="kind-build-$(date +%s)-$$"
  docker run -d --entrypoint=sleep --name "$id" --security-opt seccomp=unconfined "$base" infinity >/dev/null
  trap 'docker rm -f -v "$id" >/dev/null 2>&1 || true' EXIT
  for f in "$KUBEADM" "$BIN_DIR/kubelet" "$BIN_DIR/kubectl"; do
    docker cp "$f" "$id:/usr/bin/$(basename "$f")"
    docker exec "$id" chmod 0755 "/usr/bin/$(basename "$f")"
  done
  docker exec "$id" sh -c "echo $KUBE_VERSION > /kind/version && mkdir -p /kind/manifests"
  sed "s#image: IMAGE#image: $KINDNET_IMAGE#" "$ROOT/hack/kind/manifests/default-cni.yaml" |
    docker exec -i "$id" sh -c 'cat > /kind/manifests/default-cni.yaml'
  docker exec -i "$id" sh -c 'cat > /kind/manifests/default-storage.yaml' <"$ROOT/hack/kind/manifests/default-storage.yaml"
  docker exec -d "$id" sh -c 'containerd >/var/log/containerd-build.log 2>&1'
  local i
  for ((i = 0; i < 60; i++)); do docker exec "$id" ctr version >/dev/null 2>&1 && break; sleep 0.5; done
  log "importing $(basename "$archive") into the node's containerd"
  docker exec -i "$id" ctr --namespace=k8s.io images import --all-platforms --no-unpack --digests - <"$archive" >/dev/null
  # pinned: the kubelet's image GC never removes them (kind's build does the same)
  docker exec "$id" sh -c 'for i in $(ctr -n k8s.io images ls -q); do ctr -n k8s.io images label "$i" io.cri-containerd.pinned=pinned >/dev/null; done'
  docker exec "$id" ctr -n k8s.io images ls -q | grep -v '^sha256:' | sed 's/^/  /' >&2
  docker exec "$id" sh -c 'kill $(pidof containerd); while pidof containerd >/dev/null; do sleep 0.2; done; rm -f /var/log/containerd-build.log'
  docker commit --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' "$id" "$name" >/dev/null
  docker rm -f -v "$id" >/dev/null
  trap - EXIT
}

# ------------------------------------------------------------------ main
if [[ $mode == check || $mode == print ]]; then
  use_docker || { [[ $mode == print ]] || exit 1; }
fi
KUBEADM="$CACHE/kind/$KUBE_VERSION/kubeadm"
if [[ $mode == print || $mode == check ]]; then
  # the name needs every input: only answer from a build's record
  rec="$KIND_CACHE/node-image"
  [[ -s "$rec" ]] || { [[ $mode == print ]] && die "no node image built yet (hack/kind-image.sh)"; exit 1; }
  name="$(cat "$rec")"
  if [[ $mode == print ]]; then echo "$name"; exit 0; fi
  docker image inspect "$name" >/dev/null 2>&1
  exit
fi

[[ $EUID -eq 0 ]] || die "building the node image needs root (debootstrap, chroot)"
use_docker || die "no Docker engine answers: hack/kind-docker.sh up"
t0=$SECONDS
mkdir -p "$KIND_CACHE" "$WORK"
exec 9>"$KIND_CACHE/.image.lock"
flock 9
"$ROOT/hack/install-kube.sh" e2e >/dev/null
KUBEADM="$("$ROOT/hack/kind/build-kubeadm.sh")"
KIND_MODULE="$(kind_module_dir)"
[[ -d "$KIND_MODULE/images/base/files" ]] || die "no images/base/files in sigs.k8s.io/kind@$KIND_VERSION ($KIND_MODULE)"
CAPSHIM="$(ensure_capshim)"
KINDNET_BIN="$(build_kindnet)"
KINDNET_IMAGE="streamq-kind/kindnet:$(sha256sum "$KINDNET_BIN" | cut -c1-12)"
BASE="$(base_image)"
COMPONENTS="$(component_images)"
NODE="$(node_image_name "$BASE" "$COMPONENTS")"
if [[ $mode == force ]] || ! docker image inspect "$NODE" >/dev/null 2>&1; then
  log "assembling $NODE from $BASE"
  assemble_node "$BASE" "$COMPONENTS" "$NODE"
fi
echo "$NODE" >"$KIND_CACHE/node-image"
log "node image $NODE ready ($((SECONDS - t0)) s)"
echo "$NODE"
exit 0
}
