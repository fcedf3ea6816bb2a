#!/usr/bin/env bash
# The Docker engine kind runs on. When a Docker engine already answers (`docker
# info`), that one is used and this script starts nothing. Otherwise it runs one
# of its own, separate from any other on the machine:
#
#   dockerd from Debian's docker.io (apt-get install when missing)
#   socket, exec root, pid file   /run/streamq-docker/ (STREAMQ_DOCKER_RUN)
#   data root (images, kept)      ${STREAMQ_CACHE:-~/.cache/streamq}/kind/docker
#   --iptables=false --ip-forward=false --ip-masq=false --bridge=none
#                                 no rule, no sysctl and no FORWARD policy of the
#                                 host changes; containers reach each other on
#                                 kind's bridge and this machine reaches them,
#                                 published ports go through docker-proxy
#   --cgroup-parent=/streamq-docker, --oom-score-adjust=0, its own (empty) daemon.json
#   default runtime "capshim"     hack/kind/capshim: runc minus the capabilities
#                                 this machine's bounding set lacks, so privileged
#                                 containers (kind's nodes) start on VMs without
#                                 CAP_SYS_RESOURCE
#
# Usage: hack/kind-docker.sh up|down|status|env
#   up      start it (idempotent) and print DOCKER_HOST=...
#   down    stop it, if this script started it (containers die with it);
#           down --if-idle: only when no container is left in it
#   status  exit 0 when an engine answers
#   env     print `export DOCKER_HOST=...` for the engine in use (eval it)
#
# Environment: STREAMQ_KIND_OWN_DOCKER=1 (always use our own engine, even when
# another answers), STREAMQ_CACHE, STREAMQ_DOCKER_RUN.
set -euo pipefail
_kind_log_tag=kind-docker
source "$(dirname "${BASH_SOURCE[0]}")/kind/lib.sh"

PIDFILE="$OWN_DOCKER_RUN/docker.pid"
LOGFILE="$KIND_CACHE/dockerd.log"

own_pid() { # prints the pid of our dockerd when it runs
  local pid
  pid="$(cat "$PIDFILE" 2>/dev/null)" || return 1
  [[ -n "$pid" && -d "/proc/$pid" ]] || return 1
  [[ "$(cat /proc/"$pid"/comm 2>/dev/null)" == dockerd ]] || return 1
  echo "$pid"
}

forward_policy() { iptables -w -S FORWARD 2>/dev/null | sed -n 's/^-P FORWARD //p'; }

install_docker() {
  command -v dockerd >/dev/null && return
  [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null || die "dockerd not found: install Docker (Debian: apt-get install docker.io)"
  log "apt-get install docker.io (its service is not started: policy-rc.d)"
  local guard=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; guard=1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io >/dev/null || {
    ((guard)) && rm -f /usr/sbin/policy-rc.d; die "apt-get install docker.io failed"; }
  ((guard)) && rm -f /usr/sbin/policy-rc.d
  command -v dockerd >/dev/null || die "no dockerd after installing docker.io"
}

up() {
  if [[ "${STREAMQ_KIND_OWN_DOCKER:-0}" != 1 ]] && docker_answers; then
    log "using the Docker engine that answers (${DOCKER_HOST:-default socket})"
    echo "DOCKER_HOST=${DOCKER_HOST:-}"
    return
  fi
  if own_pid >/dev/null && docker_answers "$OWN_DOCKER_HOST"; then
    echo "DOCKER_HOST=$OWN_DOCKER_HOST"
    return
  fi
  [[ $EUID -eq 0 ]] || die "starting a Docker engine needs root (or start Docker yourself)"
  install_docker
  command -v docker >/dev/null || die "the docker client is missing (Debian: apt-get install docker.io)"
  local shim policy_before
  shim="$(ensure_capshim)"
  mkdir -p "$OWN_DOCKER_RUN/exec" "$OWN_DOCKER_DATA" "$KIND_CACHE"
  echo '{}' > "$OWN_DOCKER_RUN/daemon.json"
  policy_before="$(forward_policy)"
  log "starting dockerd (socket $OWN_DOCKER_HOST, data $OWN_DOCKER_DATA, log $LOGFILE)"
  # setsid: not in the caller's process group (a ^C there must not kill it half-way)
  setsid dockerd \
    --host "$OWN_DOCKER_HOST" --exec-root "$OWN_DOCKER_RUN/exec" --pidfile "$PIDFILE" \
    --data-root "$OWN_DOCKER_DATA" --config-file "$OWN_DOCKER_RUN/daemon.json" \
    --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
    --cgroup-parent=/streamq-docker --oom-score-adjust=0 \
    --exec-opt native.cgroupdriver=cgroupfs --storage-driver=overlay2 \
    --add-runtime "capshim=$shim" --default-runtime capshim \
    --log-level=warn </dev/null >>"$LOGFILE" 2>&1 &
  local i
  for ((i = 0; i < 120; i++)); do
    docker_answers "$OWN_DOCKER_HOST" && break
    kill -0 $! 2>/dev/null || die "dockerd exited; last lines of $LOGFILE:
$(tail -n 20 "$LOGFILE")"
    sleep 0.5
  done
  docker_answers "$OWN_DOCKER_HOST" || die "dockerd did not answer in 60 s; see $LOGFILE"
  if [[ -n "$policy_before" && "$(forward_policy)" != "$policy_before" ]]; then
    die "the FORWARD policy changed ($policy_before -> $(forward_policy)) while dockerd started"
  fi
  log "dockerd up (pid $(own_pid))"
  echo "DOCKER_HOST=$OWN_DOCKER_HOST"
}

down() { # down [--if-idle]: --if-idle leaves it running while it has containers
  local pid
  if ! pid="$(own_pid)"; then
    log "no Docker engine of ours runs"
    return
  fi
  if [[ "${1:-}" == --if-idle ]] && [[ -n "$(DOCKER_HOST=$OWN_DOCKER_HOST docker ps -aq 2>/dev/null)" ]]; then
    log "our dockerd still has containers: left running (hack/kind-docker.sh down stops it)"
    return
  fi
  log "stopping dockerd (pid $pid)"
  kill -TERM "$pid"
  local i
  for ((i = 0; i < 60; i++)); do [[ -d /proc/$pid ]] || break; sleep 0.5; done
  if [[ -d /proc/$pid ]]; then
    log "dockerd still runs after 30 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # what dockerd mounted under its roots (netns files, overlay mounts of killed containers)
  local m
  for m in $(awk -v a="$OWN_DOCKER_RUN" -v b="$OWN_DOCKER_DATA" '$5 ~ "^"a || $5 ~ "^"b {print $5}' /proc/self/mountinfo | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  rm -f "$PIDFILE"
  log "dockerd stopped"
}

case "${1:-}" in
  up) up ;;
  down) down "${2:-}" ;;
  status) use_docker ;;
  env)
    use_docker || die "no Docker engine answers (hack/kind-docker.sh up)"
    echo "export DOCKER_HOST=${DOCKER_HOST:-}"
    ;;
  -h | --help | "") sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; [[ -n "${1:-}" ]] ;;
  *) die "unknown command: $1 (up|down|status|env)" ;;
esac
