# One image for everything streamq runs in a cluster (see docker/entrypoint.sh):
#   (no args) | job ARGS    the PySpark job: python -m app [/etc/streamq/query.json]
#   controller ARGS         the operator:    python -m controller ...
#   executor                a Spark executor started by Spark's Kubernetes scheduler
#   driver ARGS             a cluster-mode Spark driver (SparkApplication backend);
#                           its main file is /opt/streamq/app/__main__.py
#
# Build it with hack/build-image.sh. It prepares the build context: this file,
# docker/, pyproject.toml, contract/, app/, controller/, Spark's Kafka connector jars in
# jars/spark-kafka/, Hadoop's S3A filesystem with the AWS SDK modules it loads
# in jars/s3a/ and a Kafka broker in jars/kafka/ (resolved on the host by
# hack/install-jars.sh; the build has no Maven), then runs `docker build` where Docker
# works and buildah on a local debootstrap base elsewhere. From a fresh clone: `make image`
# (a bare `docker build .` lacks jars/).

ARG BASE_IMAGE=debian:bookworm-slim

# ---------------------------------------------------------------------------
# python: the build stages' base (Python, venv, pip; never in the runtime image)
# ---------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS python

ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-pip ca-certificates \
 && rm -rf /var/lib/apt/lists/*
ENV VENV=/opt/streamq/venv \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1 \
    PIP_DEFAULT_TIMEOUT=180
WORKDIR /src

# The runtime dependencies named in pyproject.toml, alone: a change elsewhere in
# pyproject.toml (version, optional groups, tool settings) leaves the deps cached.
FROM python AS requirements
COPY pyproject.toml /src/
RUN python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
      > /requirements.txt

# ---------------------------------------------------------------------------
# deps: a venv with the pinned dependencies (no pip inside: Debian's pip
# installs into it from outside). Rebuilt only when the dependencies or the
# constraints change, so the big layer it gives the runtime image is reused.
# ---------------------------------------------------------------------------
FROM python AS deps

RUN python3 -m venv --without-pip "$VENV"
COPY docker/constraints.txt /src/docker/constraints.txt
COPY --from=requirements /requirements.txt /src/requirements.txt

# A TLS-intercepting proxy between the build and the package index needs its CA:
# the build script hands the host's bundle in as the optional secret "cacert"
# (a secret, so it never lands in a layer).
RUN --mount=type=secret,id=cacert \
    --mount=type=cache,target=/root/.cache/pip,id=streamq-pip \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert; fi \
 && pip --python "$VENV/bin/python" install --constraint docker/constraints.txt --requirement requirements.txt \
 && SPARK_DIR="$("$VENV/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" \
 && test -x "$SPARK_DIR/bin/spark-submit" \
 && ln -s "$SPARK_DIR" /opt/streamq/spark

# ---------------------------------------------------------------------------
# build: streamq itself, installed into /stage as a small overlay of the venv
# ---------------------------------------------------------------------------
FROM deps AS build

COPY pyproject.toml /src/
COPY contract/ /src/contract/
COPY app/ /src/app/
COPY controller/ /src/controller/
RUN --mount=type=secret,id=cacert \
    --mount=type=cache,target=/root/.cache/pip,id=streamq-pip \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert; fi \
 && pip --python "$VENV/bin/python" install --no-deps --root /stage . \
 && cp -a /stage/. / \
 && pip --python "$VENV/bin/python" check

# ---------------------------------------------------------------------------
# runtime: Java 17, Python, the venv, the jars; no compilers, no pip
# ---------------------------------------------------------------------------
FROM ${BASE_IMAGE}

ARG DEBIAN_FRONTEND=noninteractive
# openjdk's postinst wants the man1 folder that slim bases strip.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
      openjdk-17-jre-headless python3 bash tini procps ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log \
 && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /opt/java

# The operator runs drivers as this uid (controller/config.py run_as_user).
ARG STREAMQ_UID=1000
RUN groupadd --gid "$STREAMQ_UID" streamq \
 && useradd --uid "$STREAMQ_UID" --gid "$STREAMQ_UID" --home-dir /home/streamq --create-home \
      --shell /usr/sbin/nologin streamq

COPY --from=deps /opt/streamq/ /opt/streamq/
COPY --from=build /stage/ /
# Spark's Kafka connector and the runtime dependencies the pyspark wheel lacks.
COPY jars/spark-kafka/*.jar /opt/streamq/jars/spark-kafka/
# s3a:// checkpoints: hadoop-aws (the Hadoop release of pyspark's jars) and the AWS SDK v2
# modules S3A loads, not the SDK's 686 MB bundle (hack/maven/s3a/pom.xml).
COPY jars/s3a/*.jar /opt/streamq/jars/s3a/
# A single-node Kafka broker (KRaft), for the quick start's in-cluster broker and the tests
# (manifests/quickstart/kafka.yaml runs it): 44 MB of jars, so that no other image is needed
# where no registry serves one. Production brokers are the platform's own.
COPY jars/kafka/libs/*.jar /opt/kafka/libs/
COPY jars/kafka/config/log4j2.properties /opt/kafka/config/log4j2.properties
# The driver's write fence (jvm/fence): its Kafka records stop at its Lease deadline.
COPY jars/fence/*.jar /opt/streamq/jars/fence/
# streamq's continuous-mode Kafka source (jvm/reader): spec.source.kafka.reader: streamq.
COPY jars/reader/*.jar /opt/streamq/jars/reader/
COPY docker/entrypoint.sh /opt/streamq/bin/entrypoint

ENV JAVA_HOME=/opt/java \
    SPARK_HOME=/opt/streamq/spark \
    STREAMQ_JARS_DIR=/opt/streamq/jars/spark-kafka \
    STREAMQ_S3A_JARS_DIR=/opt/streamq/jars/s3a \
    STREAMQ_FENCE_JARS_DIR=/opt/streamq/jars/fence \
    STREAMQ_READER_JARS_DIR=/opt/streamq/jars/reader \
    PYSPARK_PYTHON=/opt/streamq/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/streamq/venv/bin/python \
    PATH=/opt/streamq/venv/bin:/opt/java/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    LANG=C.UTF-8 \
    HOME=/home/streamq

# Fail the build, not the first pod, when a piece is missing.
RUN chmod 0755 /opt/streamq/bin/entrypoint \
 && ln -s "$(python -c 'import app, os; print(os.path.dirname(app.__file__))')" /opt/streamq/app \
 && ls /opt/streamq/jars/spark-kafka/spark-sql-kafka-0-10_*.jar /opt/streamq/jars/spark-kafka/kafka-clients-*.jar \
      /opt/streamq/jars/s3a/hadoop-aws-*.jar /opt/streamq/jars/s3a/s3-2*.jar /opt/kafka/libs/kafka_2.13-*.jar \
      /opt/streamq/jars/fence/streamq-fence.jar /opt/streamq/jars/reader/streamq-reader.jar \
 && python -c 'import app, pyspark, kopf, kubernetes, confluent_kafka, obstore; print("pyspark", pyspark.__version__)' \
 && java -version \
 && test -x "$SPARK_HOME/bin/spark-class"

WORKDIR /home/streamq
USER ${STREAMQ_UID}:${STREAMQ_UID}

LABEL org.opencontainers.image.title="streamq" \
      org.opencontainers.image.description="Spark Structured Streaming queries on Kubernetes: the operator, the PySpark job and Spark executors"

ENTRYPOINT ["/usr/bin/tini", "--", "/opt/streamq/bin/entrypoint"]
CMD ["job"]
