#!/bin/bash
# Entrypoint of the streamq image (runs under tini, which forwards signals).
#
#   (no arguments)          the PySpark job on the mounted spec: python -m app
#   job|app [ARGS...]       the PySpark job: python -m app ARGS
#   controller|operator [ARGS...]
#                           the operator: python -m controller ARGS
#   executor                a Spark executor, as Spark's Kubernetes scheduler starts
#                           it: the single argument "executor" and SPARK_* variables
#   driver ARGS...          a cluster-mode Spark driver, as spark-submit (e.g. the
#                           SparkApplication backend) starts it: spark-submit in
#                           client mode inside the pod, main file
#                           local:///opt/streamq/app/__main__.py
#   CMD [ARGS...]           any program on PATH (python, bash, java...) runs as is
#   anything else           arguments for the job (e.g. /etc/streamq/query.json)
#
# STREAMQ_ENTRYPOINT_DRY_RUN=1 prints the command instead of running it.
set -euo pipefail

run() {
  if [[ "${STREAMQ_ENTRYPOINT_DRY_RUN:-0}" == 1 ]]; then
    printf '%q ' "$@"; printf '\n'
    exit 0
  fi
  exec "$@"
}

die() { printf 'entrypoint: %s\n' "$*" >&2; exit 64; }

# Hadoop's login code wants a user name for the process's uid. Kubernetes may run
# the image with a uid the image does not know (runAsUser, OpenShift): say so
# early instead of failing deep inside Spark.
check_user() {
  if ! getent passwd "$(id -u)" >/dev/null 2>&1; then
    if [[ -w /etc/passwd ]]; then
      echo "$(id -u):x:$(id -u):$(id -g):${SPARK_USER_NAME:-anonymous uid}:${HOME:-/tmp}:/usr/sbin/nologin" >> /etc/passwd
    else
      printf 'entrypoint: uid %s has no passwd entry; set SPARK_USER if Spark complains about the user name\n' "$(id -u)" >&2
      export SPARK_USER="${SPARK_USER:-${SPARK_USER_NAME:-streamq}}"
    fi
  fi
}

# The classpath of an executor: Spark (the pyspark wheel's jars), the Kafka
# connector and the S3A jars baked into the image, then whatever the pod adds.
executor_classpath() {
  local cp="${SPARK_CLASSPATH:-}"
  if [[ -n "${SPARK_CONF_DIR:-}" ]]; then
    cp="${SPARK_CONF_DIR}${cp:+:$cp}"
  elif [[ -d "${SPARK_HOME}/conf" ]]; then
    cp="${SPARK_HOME}/conf${cp:+:$cp}"
  fi
  cp="${cp:+$cp:}${SPARK_HOME}/jars/*"
  if [[ -n "${STREAMQ_JARS_DIR:-}" && -d "${STREAMQ_JARS_DIR}" ]]; then
    cp="$cp:${STREAMQ_JARS_DIR}/*"
  fi
  if [[ -n "${STREAMQ_S3A_JARS_DIR:-}" && -d "${STREAMQ_S3A_JARS_DIR}" ]]; then
    cp="$cp:${STREAMQ_S3A_JARS_DIR}/*"  # s3a:// checkpoints: state stores write them from executors
  fi
  if [[ -n "${SPARK_EXTRA_CLASSPATH:-}" ]]; then
    cp="$cp:${SPARK_EXTRA_CLASSPATH}"
  fi
  if [[ -n "${SPARK_DIST_CLASSPATH:-}" ]]; then
    cp="$cp:${SPARK_DIST_CLASSPATH}"
  fi
  printf '%s' "$cp"
}

run_executor() {
  local missing=() var
  for var in SPARK_DRIVER_URL SPARK_EXECUTOR_ID SPARK_EXECUTOR_CORES SPARK_APPLICATION_ID \
             SPARK_EXECUTOR_POD_IP SPARK_RESOURCE_PROFILE_ID SPARK_EXECUTOR_POD_NAME; do
    [[ -n "${!var:-}" ]] || missing+=("$var")
  done
  ((${#missing[@]} == 0)) || die "executor: not set: ${missing[*]} (these come from Spark's Kubernetes scheduler)"

  # The driver passes JVM options as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in order.
  local java_opts=() name
  while IFS= read -r name; do
    java_opts+=("${!name}")
  done < <(compgen -e | grep -E '^SPARK_JAVA_OPT_[0-9]+$' | sort -t_ -k4 -n || true)

  local memory=()
  if [[ -n "${SPARK_EXECUTOR_MEMORY:-}" ]]; then
    memory=("-Xms${SPARK_EXECUTOR_MEMORY}" "-Xmx${SPARK_EXECUTOR_MEMORY}")
  fi

  check_user
  run "${JAVA_HOME:+$JAVA_HOME/bin/}java" \
    "${java_opts[@]}" \
    "${memory[@]}" \
    -cp "$(executor_classpath)" \
    org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    --driver-url "$SPARK_DRIVER_URL" \
    --executor-id "$SPARK_EXECUTOR_ID" \
    --cores "$SPARK_EXECUTOR_CORES" \
    --app-id "$SPARK_APPLICATION_ID" \
    --hostname "$SPARK_EXECUTOR_POD_IP" \
    --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
    --podName "$SPARK_EXECUTOR_POD_NAME"
}

: "${SPARK_HOME:?SPARK_HOME is not set (the image sets it)}"
PYTHON="${PYSPARK_PYTHON:-python3}"

if (($# == 0)); then
  set -- job
fi

case "$1" in
  job | app)
    shift
    check_user
    run "$PYTHON" -m app "$@"
    ;;
  controller | operator)
    shift
    run "$PYTHON" -m controller "$@"
    ;;
  executor)
    (($# == 1)) || die "executor takes no further arguments (got: ${*:2})"
    run_executor
    ;;
  driver)
    shift
    check_user
    bind=()
    if [[ -n "${SPARK_DRIVER_BIND_ADDRESS:-}" ]]; then
      bind=(--conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}")
    fi
    # The job puts the connector and S3A jars (STREAMQ_JARS_DIR, STREAMQ_S3A_JARS_DIR) on spark.jars itself.
    run "$SPARK_HOME/bin/spark-submit" "${bind[@]}" --deploy-mode client "$@"
    ;;
  -*)
    check_user
    run "$PYTHON" -m app "$@"
    ;;
  *)
    if [[ "$1" != */* ]] && command -v -- "$1" >/dev/null 2>&1; then
      run "$@"
    fi
    if [[ "$1" == */* && -x "$1" && ! -d "$1" ]]; then
      run "$@"
    fi
    check_user
    run "$PYTHON" -m app "$@"
    ;;
esac
