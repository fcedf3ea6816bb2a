#!/usr/bin/env bash
# Installs the JVM pieces the tests and the Spark job need, from Maven, into a
# cache outside the repository (never commit them):
#
#   ${STREAMQ_CACHE:-$HOME/.cache/streamq}/
#     jars/spark-kafka/*.jar          Spark's Kafka connector + the runtime deps
#                                     that the pyspark wheel does not ship
#                                     (put every *.jar there on spark.jars)
#     jars/spark-kafka/.complete      marker: versions + fingerprint
#     jars/s3a/*.jar                  Hadoop's S3A filesystem (hadoop-aws) and the few
#                                     AWS SDK v2 modules it loads (not the 686 MB
#                                     bundle), for s3a:// checkpoints (also on spark.jars)
#     jars/s3a/.complete              marker
#     jars/fence/streamq-fence.jar    the driver's write fence (jvm/fence: a Kafka partitioner that
#                                     refuses records past the driver's Lease deadline), compiled
#                                     here with javac against the connector's kafka-clients
#     jars/reader/streamq-reader.jar  the continuous-mode Kafka source `streamq-kafka` (jvm/reader,
#                                     source.kafka.reader: streamq), compiled here with javac against
#                                     pyspark's jars and the connector's kafka-clients
#     kafka/<version>/libs/*.jar      a Kafka broker (KRaft) with log4j2 logging
#     kafka/<version>/config/log4j2.properties
#     kafka/<version>/.complete       marker
#
# Idempotent: a folder whose marker matches the wanted versions and POM is
# left alone. The versions live in the POMs under hack/maven/ and can be
# overridden with env vars:
#   SPARK_KAFKA_VERSION, SPARK_TOKEN_PROVIDER_VERSION, KAFKA_CLIENTS_VERSION,
#   COMMONS_POOL2_VERSION, KAFKA_VERSION, LOG4J_VERSION, HADOOP_AWS_VERSION,
#   AWS_SDK_VERSION
# Other knobs:
#   STREAMQ_CACHE   cache root (default $HOME/.cache/streamq)
#   STREAMQ_M2_REPO Maven local repository to use (default: Maven's own, ~/.m2)
#   PYTHON          python with pyspark, to find pyspark/jars (default .venv/bin/python)
#   FORCE=1         reinstall even if the markers say complete
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${STREAMQ_CACHE:-$HOME/.cache/streamq}"
MAVEN_DIR="$ROOT/hack/maven"
FORCE="${FORCE:-0}"

log() { printf '[install-jars] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
command -v java >/dev/null || die "java not found (Java 17+ needed)"

# Default of a <property> in one of our POMs (the POM is the source of truth).
pom_prop() { # pom_prop <pom> <property>
  sed -n "s:.*<$2>\(.*\)</$2>.*:\1:p" "$1" | head -n1
}

MVN_ARGS=(-B -q --no-transfer-progress -Dstyle.color=never)
if [[ -n "${STREAMQ_M2_REPO:-}" ]]; then
  MVN_ARGS+=("-Dmaven.repo.local=$STREAMQ_M2_REPO")
fi

# Resolve the runtime closure of a POM into a directory.
copy_deps() { # copy_deps <pom> <outdir> [-Dprop=value ...]
  local pom="$1" out="$2"; shift 2
  local mlog="$out/../.mvn-$(basename "$(dirname "$pom")").log"
  if ! mvn "${MVN_ARGS[@]}" -f "$pom" "$@" \
      org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$out" >"$mlog" 2>&1; then
    sed 's/\x1b\[[0-9;]*m//g' "$mlog" | grep -v '^\s*$' >&2 || true
    die "Maven could not resolve $pom ($*); log: $mlog"
  fi
  rm -f "$mlog"
}

# Artifact name of a jar file: kafka-clients-3.9.2.jar -> kafka-clients,
# spark-sql-kafka-0-10_2.13-4.2.0.jar -> spark-sql-kafka-0-10_2.13.
artifact_of() {
  basename "$1" | sed -E 's/-[0-9]+(\.[0-9]+)+([.-][A-Za-z0-9]+)*\.jar$//'
}

fingerprint() { # fingerprint <pom> <extra...>
  local pom="$1"; shift
  printf '%s\n' "$@" "pom-sha256=$(sha256sum "$pom" | cut -d' ' -f1)"
}

is_complete() { # is_complete <dir> <fingerprint>
  [[ "$FORCE" != 1 && -f "$1/.complete" ]] && [[ "$(cat "$1/.complete")" == "$2" ]]
}

list_jars() {
  local d="$1"
  (cd "$d" && for j in *.jar; do printf '  %-60s %8s KiB\n' "$j" "$(( $(stat -c %s "$j") / 1024 ))"; done) >&2
}

find_pyspark_jars() {
  if [[ -n "${PYSPARK_JARS:-}" ]]; then echo "$PYSPARK_JARS"; return; fi
  local py="${PYTHON:-}"
  if [[ -z "$py" ]]; then
    if [[ -x "$ROOT/.venv/bin/python" ]]; then py="$ROOT/.venv/bin/python"; else py=python3; fi
  fi
  "$py" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))' 2>/dev/null || true
}

pyspark_version() {
  local py="${PYTHON:-}"
  if [[ -z "$py" ]]; then
    if [[ -x "$ROOT/.venv/bin/python" ]]; then py="$ROOT/.venv/bin/python"; else py=python3; fi
  fi
  "$py" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null || echo unknown
}

# ---------------------------------------------------------------- spark-kafka
install_spark_kafka() {
  local pom="$MAVEN_DIR/spark-kafka/pom.xml"
  local v_conn="${SPARK_KAFKA_VERSION:-$(pom_prop "$pom" spark.kafka.version)}"
  local v_tok="${SPARK_TOKEN_PROVIDER_VERSION:-$(pom_prop "$pom" spark.token.provider.version)}"
  local v_cli="${KAFKA_CLIENTS_VERSION:-$(pom_prop "$pom" kafka.clients.version)}"
  local v_pool="${COMMONS_POOL2_VERSION:-$(pom_prop "$pom" commons.pool2.version)}"
  local dest="$CACHE/jars/spark-kafka"
  local pyjars; pyjars="$(find_pyspark_jars)"
  local pyver; pyver="$(pyspark_version)"
  local fp; fp="$(fingerprint "$pom" "spark-sql-kafka=$v_conn" "spark-token-provider-kafka=$v_tok" \
    "kafka-clients=$v_cli" "commons-pool2=$v_pool" "pyspark=$pyver")"

  if is_complete "$dest" "$fp"; then
    log "spark-kafka: complete, nothing to do ($dest)"
    return
  fi
  if [[ "$pyver" != unknown && "$pyver" != "$v_conn" ]]; then
    log "NOTE: pyspark is $pyver but the Kafka connector is $v_conn (the newest the Maven repository serves; see $pom)"
  fi

  local stage="$CACHE/jars/.spark-kafka.new"
  rm -rf "$stage"; mkdir -p "$stage"
  log "spark-kafka: resolving spark-sql-kafka-0-10_2.13:$v_conn (token provider $v_tok, kafka-clients $v_cli, commons-pool2 $v_pool)"
  copy_deps "$pom" "$stage" \
    -Dspark.kafka.version="$v_conn" -Dspark.token.provider.version="$v_tok" \
    -Dkafka.clients.version="$v_cli" -Dcommons.pool2.version="$v_pool"

  # Safety net on top of the POM's exclusions: anything the pyspark wheel already
  # ships (any version) must not be on spark.jars twice.
  if [[ -n "$pyjars" && -d "$pyjars" ]]; then
    local j a
    for j in "$stage"/*.jar; do
      a="$(artifact_of "$j")"
      if compgen -G "$pyjars/$a-[0-9]*.jar" >/dev/null; then
        log "spark-kafka: dropping $(basename "$j"): pyspark already ships $(basename "$(compgen -G "$pyjars/$a-[0-9]*.jar" | head -n1)")"
        rm -f "$j"
      fi
    done
  else
    log "WARNING: pyspark not found (set PYTHON or PYSPARK_JARS); could not check for duplicates of pyspark's jars"
  fi
  for a in spark-sql-kafka-0-10_2.13 spark-token-provider-kafka-0-10_2.13 kafka-clients commons-pool2; do
    compgen -G "$stage/$a-[0-9]*.jar" >/dev/null \
      || { [[ -n "$pyjars" ]] && compgen -G "$pyjars/$a-[0-9]*.jar" >/dev/null; } \
      || die "spark-kafka: $a missing after resolution"
  done

  printf '%s\n' "$fp" > "$stage/.complete"
  rm -rf "$dest"; mkdir -p "$(dirname "$dest")"; mv "$stage" "$dest"
  log "spark-kafka: installed into $dest:"
  list_jars "$dest"
}

# ------------------------------------------------------------------------ s3a
install_s3a() {
  local pom="$MAVEN_DIR/s3a/pom.xml"
  local v_aws="${HADOOP_AWS_VERSION:-$(pom_prop "$pom" hadoop.aws.version)}"
  local v_sdk="${AWS_SDK_VERSION:-$(pom_prop "$pom" aws.sdk.version)}"
  local dest="$CACHE/jars/s3a"
  local pyjars; pyjars="$(find_pyspark_jars)"
  local fp; fp="$(fingerprint "$pom" "hadoop-aws=$v_aws" "aws-sdk=$v_sdk" "pyspark=$(pyspark_version)")"

  if is_complete "$dest" "$fp"; then
    log "s3a: complete, nothing to do ($dest)"
    return
  fi
  if [[ -n "$pyjars" ]] && ! compgen -G "$pyjars/hadoop-client-api-$v_aws.jar" >/dev/null; then
    log "NOTE: pyspark's Hadoop is $(basename "$(compgen -G "$pyjars/hadoop-client-api-*.jar" | head -n1)"), hadoop-aws is $v_aws: they should be one release"
  fi
  local stage="$CACHE/jars/.s3a.new"
  rm -rf "$stage"; mkdir -p "$stage"
  log "s3a: resolving hadoop-aws:$v_aws + AWS SDK v2 $v_sdk modules (s3, s3-transfer-manager, analyticsaccelerator-s3; not the bundle)"
  copy_deps "$pom" "$stage" -Dhadoop.aws.version="$v_aws" -Daws.sdk.version="$v_sdk"
  if [[ -n "$pyjars" && -d "$pyjars" ]]; then
    local j a
    for j in "$stage"/*.jar; do
      a="$(artifact_of "$j")"
      if compgen -G "$pyjars/$a-[0-9]*.jar" >/dev/null; then
        log "s3a: dropping $(basename "$j"): pyspark already ships $(basename "$(compgen -G "$pyjars/$a-[0-9]*.jar" | head -n1)")"
        rm -f "$j"
      fi
    done
  fi
  for a in hadoop-aws analyticsaccelerator-s3 s3 s3-transfer-manager sdk-core apache-client; do
    compgen -G "$stage/$a-[0-9]*.jar" >/dev/null || die "s3a: $a missing after resolution"
  done
  compgen -G "$stage/bundle-*.jar" >/dev/null && die "s3a: the AWS SDK bundle came in (see the exclusions in $pom)"
  printf '%s\n' "$fp" > "$stage/.complete"
  rm -rf "$dest"; mkdir -p "$(dirname "$dest")"; mv "$stage" "$dest"
  log "s3a: installed into $dest ($(du -sh "$dest" | cut -f1)):"
  list_jars "$dest"
}

# --------------------------------------------------------------- kafka broker
install_kafka() {
  local pom="$MAVEN_DIR/kafka-broker/pom.xml"
  local conf="$ROOT/hack/kafka/log4j2.properties"
  local v_kafka="${KAFKA_VERSION:-$(pom_prop "$pom" kafka.version)}"
  local v_log4j="${LOG4J_VERSION:-$(pom_prop "$pom" log4j.version)}"
  local dest="$CACHE/kafka/$v_kafka"
  local fp; fp="$(fingerprint "$pom" "kafka=$v_kafka" "log4j=$v_log4j" \
    "log4j2-config-sha256=$(sha256sum "$conf" | cut -d' ' -f1)")"

  if is_complete "$dest" "$fp"; then
    log "kafka $v_kafka: complete, nothing to do ($dest)"
    return
  fi
  local stage="$CACHE/kafka/.$v_kafka.new"
  rm -rf "$stage"; mkdir -p "$stage/libs" "$stage/config"
  log "kafka: resolving kafka_2.13:$v_kafka + log4j $v_log4j"
  copy_deps "$pom" "$stage/libs" -Dkafka.version="$v_kafka" -Dlog4j.version="$v_log4j"
  for a in kafka_2.13 kafka-server kafka-raft kafka-metadata log4j-core log4j-slf4j-impl slf4j-api; do
    compgen -G "$stage/libs/$a-[0-9]*.jar" >/dev/null || die "kafka: $a missing after resolution"
  done
  # log4j-slf4j-impl binds slf4j 1.x; make sure nothing pulled slf4j 2 in.
  if compgen -G "$stage/libs/slf4j-api-2.*.jar" >/dev/null; then
    die "kafka: slf4j-api 2.x on the broker classpath; log4j-slf4j-impl (slf4j 1.x binding) would log nothing"
  fi
  cp "$conf" "$stage/config/log4j2.properties"
  printf '%s\n' "$fp" > "$stage/.complete"
  rm -rf "$dest"; mv "$stage" "$dest"
  log "kafka $v_kafka: installed into $dest/libs:"
  list_jars "$dest/libs"
}

# ------------------------------------------------------------ fence, reader
# javac_jar <name> <fingerprint> <classpath> <sources> [<resources>]: $CACHE/jars/<name>/streamq-<name>.jar,
# unless it is complete for <fingerprint>. --release 17: the image's Java; the classes load in the driver's JVM.
javac_jar() {
  local name=$1 fp=$2 classpath=$3 src=$4 resources=${5:-} dest="$CACHE/jars/$1"
  if is_complete "$dest" "$fp"; then
    log "$name: complete, nothing to do ($dest)"
    return
  fi
  local stage="$CACHE/jars/.$name.new"
  rm -rf "$stage"; mkdir -p "$stage/classes"
  javac --release 17 -nowarn -cp "$classpath" -d "$stage/classes" $(find "$src" -name '*.java')
  [[ -z "$resources" ]] || cp -r "$resources/." "$stage/classes/"
  jar --create --file "$stage/streamq-$name.jar" -C "$stage/classes" .
  rm -rf "$stage/classes"
  printf '%s\n' "$fp" > "$stage/.complete"
  rm -rf "$dest"; mv "$stage" "$dest"
  log "$name: built $dest/streamq-$name.jar"
}

kafka_clients_jar() { # the kafka-clients jar the connector came with (both jars compile against it)
  local clients; clients="$(compgen -G "$CACHE/jars/spark-kafka/kafka-clients-*.jar" | head -n1)"
  [[ -n "$clients" ]] || die "$1: no kafka-clients jar in $CACHE/jars/spark-kafka"
  command -v javac >/dev/null || die "$1: javac not found (a JDK 17 is needed, not only a JRE)"
  printf '%s\n' "$clients"
}

install_fence() { # the driver's write fence: a Kafka partitioner
  local src="$ROOT/jvm/fence/src" clients; clients="$(kafka_clients_jar fence)"
  javac_jar fence "$(fingerprint /dev/null "clients=$(basename "$clients")" \
    "sources=$(cd "$src" && find . -name '*.java' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)")" \
    "$clients" "$src"
}

install_reader() { # streamq-kafka, the continuous-mode source
  local src="$ROOT/jvm/reader" clients; clients="$(kafka_clients_jar reader)"
  local pyjars; pyjars="$(find_pyspark_jars)"
  [[ -n "$pyjars" && -d "$pyjars" ]] || die "reader: pyspark's jars not found (set PYTHON or PYSPARK_JARS): the reader compiles against them"
  # Rebuilt when a source or resource changes, or the Spark or Kafka client it is compiled against;
  # pyspark's jars are the Spark the job runs (4.3.0): the DataSource V2 API.
  javac_jar reader "$(fingerprint /dev/null "clients=$(basename "$clients")" "pyspark=$(pyspark_version)" \
    "sources=$(cd "$src" && find src resources -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)")" \
    "$pyjars/*:$clients" "$src/src" "$src/resources"
}

start=$SECONDS
mkdir -p "$CACHE"
install_spark_kafka
install_s3a
install_fence
install_reader
install_kafka
log "done in $((SECONDS - start)) s; cache: $CACHE"
