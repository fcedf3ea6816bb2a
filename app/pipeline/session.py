"""The SparkSession a query runs in: slots, connector jars and the user's conf."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path

from app.pipeline.credentials import s3a_hadoop_secrets
from contract import FENCE_JARS_DIR_ENV, JARS_DIR_ENV, POD_IP_ENV, READER_JARS_DIR_ENV, S3A_JARS_DIR_ENV, SPARK_UI_PORT
from contract.checkpoint import local_path
from contract.spec import QuerySpec

log = logging.getLogger("streamq.session")


# Defaults tuned for streaming on small machines; the user's sparkConf wins.
BASE_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.streaming.stopTimeout": "30s",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{Path(__file__).with_name('log4j2.properties')}",
}


# On a local filesystem (a path, a PVC) rename is atomic, and a checkpoint file can be written without
# the chmod/readlink processes Hadoop's FileContext forks for each one. Spark's FileSystem-based manager
# cut them 25 -> 5 a second in continuous mode (docs/latency-attribution.md, cause 3 and its A/B);
# streamq's own (jvm/reader) forks none, which took about 3 ms off the engine's p99 at 10k/s ("The
# epoch boundary by thread"). Ours needs the reader's jar: without it (`make run` on the rate example
# installs no jars), Spark's.
CHECKPOINT_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"
STREAMQ_LOCAL_CHECKPOINT_MANAGER = "io.streamq.checkpoint.LocalCheckpointFileManager"
SPARK_FS_CHECKPOINT_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


def local_checkpoint_conf(with_reader_jar: bool) -> dict[str, str]:
    return {CHECKPOINT_MANAGER_KEY: STREAMQ_LOCAL_CHECKPOINT_MANAGER if with_reader_jar else SPARK_FS_CHECKPOINT_MANAGER}


# spec.runtime.sparkUI: the web UI on 4040 (the operator's <query>-ui Service points there), and
# Spark's own metrics in Prometheus' text format on the same port: /metrics/prometheus (driver and
# streaming query metrics, PrometheusServlet) and /metrics/executors/prometheus. The namespace
# replaces the application id (a new one every start) in the metric names, so a series survives a
# restart; the query's own name stays in them (spark.streaming.<queryName>.*): the chart's
# PodMonitor turns it into a `query` label (charts/streamq/files/driver-relabelings.yaml).
METRICS_NAMESPACE = "streamq"
SPARK_UI_CONF = {
    "spark.ui.enabled": "true",
    "spark.ui.port": str(SPARK_UI_PORT),
    "spark.port.maxRetries": "0",  # the Service targets 4040: fail loudly rather than serve on 4041
    "spark.ui.prometheus.enabled": "true",
    "spark.sql.streaming.metricsEnabled": "true",
    "spark.metrics.namespace": METRICS_NAMESPACE,
    "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
    "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
    # a small UI: a long-running query's job and stage lists otherwise grow for hours
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.sql.ui.retainedExecutions": "50",
    "spark.sql.streaming.ui.retainedQueries": "10",
    "spark.sql.streaming.ui.retainedProgressUpdates": "100",
}


JAR_FOLDERS = (  # (the env var that overrides it, its folder under the cache's jars/)
    (JARS_DIR_ENV, "spark-kafka"),
    (S3A_JARS_DIR_ENV, "s3a"),
    (FENCE_JARS_DIR_ENV, "fence"),
    (READER_JARS_DIR_ENV, "reader"),
)


def _jars_in(env: str, default: str) -> list[str]:
    cache = Path(os.environ.get("STREAMQ_CACHE") or Path.home() / ".cache" / "streamq")
    folder = Path(os.environ.get(env) or cache / "jars" / default)
    return sorted(str(p) for p in folder.glob("*.jar")) if folder.is_dir() else []


def connector_jars() -> list[str]:
    """Spark's Kafka connector jars, Hadoop's S3A filesystem with the AWS SDK modules it loads, the
    driver's write fence and streamq's own continuous Kafka source (``streamq-kafka``, jvm/reader, with
    the local checkpoint manager), installed by hack/install-jars.sh (baked into the image)."""
    return [jar for env, default in JAR_FOLDERS for jar in _jars_in(env, default)]


def has_reader_jar() -> bool:
    return bool(_jars_in(READER_JARS_DIR_ENV, "reader"))


def s3a_conf(spec: QuerySpec) -> dict[str, str]:
    """Where the s3a:// checkpoint's store is (no secrets: these reach spark-submit's command line)."""
    s3 = spec.checkpoint.s3
    if s3 is None:
        return {}
    conf = {"spark.hadoop.fs.s3a.path.style.access": str(s3.path_style_access).lower()}
    if s3.endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = s3.endpoint
        if s3.endpoint.startswith("http://"):
            conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false"
    if s3.region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = s3.region
    return conf


def needs_kafka(spec: QuerySpec) -> bool:
    return spec.source.kafka is not None or spec.sink.kafka is not None


def spark_conf(spec: QuerySpec, slots: int | None = None) -> dict[str, str]:
    """``slots``: local[N] as sized for the source's partitions (the job knows them at start)."""
    conf = dict(BASE_CONF)
    if local_path(spec.checkpoint.location) is not None:
        conf.update(local_checkpoint_conf(has_reader_jar()))
    if spec.runtime.spark_ui:
        conf.update(SPARK_UI_CONF)
    conf.update(s3a_conf(spec))
    conf["spark.master"] = f"local[{slots or spec.runtime.task_slots(spec.mode)}]"
    jars = connector_jars()
    if jars:
        conf["spark.jars"] = ",".join(jars)
    conf.update(spec.runtime.spark_conf)
    pod_ip = os.environ.get(POD_IP_ENV)
    if pod_ip and conf["spark.master"].startswith("k8s://"):
        # The operator's headless Service selects every driver pod of the query: with a standby it
        # resolves to two, and an executor could dial the one that does not run the query.
        conf["spark.driver.host"] = pod_ip
    return conf


EXECUTOR_INSTANCES = "spark.executor.instances"
SPARK_DEFAULT_EXECUTORS = 2  # what Spark on Kubernetes starts when spark.executor.instances is not set


def held_back(conf: Mapping[str, str]) -> int:
    """The executor pods a driver starts with ``conf``: what one waiting on the query's Lease holds
    back until it holds it (app.driver.executors). 0 for local[N], where the driver runs every task."""
    if not conf.get("spark.master", "").startswith("k8s://"):
        return 0
    try:
        return max(0, int(conf.get(EXECUTOR_INSTANCES, SPARK_DEFAULT_EXECUTORS)))
    except ValueError:  # Spark refuses it itself
        return 0


def waiting_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` for a driver that waits on the Lease: no executor pods until it holds it."""
    return {**conf, EXECUTOR_INSTANCES: "0"} if held_back(conf) else dict(conf)


def _launch_jvm_without_executors(conf: Mapping[str, str]) -> None:
    """spark-submit refuses spark.executor.instances 0 ("Number of executors must be a positive
    number"; the SparkContext takes it): the JVM is launched without the key, which the builder then
    sets on the SparkContext's own conf."""
    from pyspark import SparkConf, SparkContext

    if SparkContext._gateway is None:
        launch = [(key, value) for key, value in conf.items() if key != EXECUTOR_INSTANCES]
        SparkContext._ensure_initialized(conf=SparkConf(loadDefaults=False).setAll(launch))


def get_session(spec: QuerySpec, app_name: str, slots: int | None = None, with_secrets: bool = True,
                waiting: bool = False):  # fmt: skip
    """``with_secrets=False``: no store credentials (Spark's analyser needs none, and runs where the Secret is not mounted).
    ``waiting``: a driver about to wait on the query's Lease starts no executors (``waiting_conf``)."""
    from pyspark.sql import SparkSession

    conf = waiting_conf(spark_conf(spec, slots)) if waiting else spark_conf(spec, slots)
    builder = SparkSession.builder.appName(f"streamq-{app_name}")
    for key, value in conf.items():
        builder = builder.config(key, value)
    silence_query_context_loggers()
    # Python workers run the exactlyOnce sink's writers: this interpreter has their packages
    # (the image sets PYSPARK_PYTHON to its venv; a local run would start whatever python3 is first on PATH).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    secrets = (
        s3a_hadoop_secrets(spec.checkpoint.s3) if with_secrets else {}
    )  # read before the JVM starts: a missing file fails fast
    if with_secrets and not secrets and spec.checkpoint.location.startswith("s3a://"):
        # only a policy with allowNodeIdentity lets such a spec through (contract.policy._node_identity)
        log.warning("checkpoint %s has no checkpoint.s3.credentials: S3A signs with its default chain (environment, "
                    "web identity, the node's instance profile)", spec.checkpoint.location)  # fmt: skip
    if conf.get(EXECUTOR_INSTANCES) == "0":
        _launch_jvm_without_executors(conf)
    spark = builder.getOrCreate()
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in secrets.items():  # on the running JVM, never on spark-submit's command line
        hadoop.set(key, value)
    spark.sparkContext.setLogLevel(os.environ.get("STREAMQ_SPARK_LOG_LEVEL", "WARN"))
    return spark


# PySpark logs every AnalysisException it builds, as a multi-kilobyte JSON record with the
# JVM's stack trace, before the caller has even seen it. streamq reports refusals itself,
# in one line naming the spec field (app.pipeline.analyser, app.pipeline.failures.one_line).
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def silence_query_context_loggers() -> None:
    from pyspark.logger import PySparkLogger

    for name in QUERY_CONTEXT_LOGGERS:
        PySparkLogger.getLogger(name).disabled = True


@contextmanager
def jvm_output_discarded():
    """Start the JVM inside this block and it writes to /dev/null (fds 1 and 2 are inherited at
    its launch); the Python side keeps its own streams. For `streamq validate --spark`, whose
    answers come back through Py4J: the JVM's start-up notes would only bury them."""
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in saved:
            os.dup2(devnull, fd)
        yield
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        os.close(devnull)


# Stopping a continuous query kills its never-ending tasks, and Spark logs each kill as a
# failure: "Aborting task ... Epoch marker generation failed" with a stack trace, "Writer for
# partition 0 is aborting", "Lost task ... TaskKilled". Once a stop was asked for, these
# say nothing; the checkpoint (read after the stop) says what was committed.
STOP_NOISE = {
    "org.apache.spark.util.Utils": "OFF",
    "org.apache.spark.executor.Executor": "OFF",
    "org.apache.spark.sql.execution.streaming.continuous": "OFF",
    "org.apache.spark.scheduler.TaskSetManager": "ERROR",
    # micro-batch and real-time modes: the batch in flight is cancelled, its write "aborted"
    "org.apache.spark.sql.execution.datasources.v2": "OFF",
    "org.apache.spark.scheduler.DAGScheduler": "ERROR",
}


def quiet_for_stop(spark) -> None:
    jvm = spark.sparkContext._jvm
    for logger, level in STOP_NOISE.items():
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(logger, jvm.org.apache.logging.log4j.Level.toLevel(level))
