"""What the job and the controller agree on: names, labels, paths and exit codes.

Both sides import these; neither spells them out again.
"""

from __future__ import annotations

import re as _re
from enum import IntEnum

GROUP = "streamq.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "StreamingQuery"
PLURAL = "streamingqueries"
SHORT_NAME = "sq"

# A query's name is the stem of every child's name (`<query>-<suffix>`) and of the names it has outside
# Kubernetes (Kafka transactional ids, control topics): a DNS-1035 label, so it holds no dot and
# `fraud.filter` cannot map onto `fraud-filter`; short enough that every child name (the longest,
# `<query>-driver-<attempt>`, is also Spark's executor pod name prefix) stays a valid label. The
# CRD refuses other names (a CEL rule, controller.crd) and so do `streamq validate` and the operator.
QUERY_NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
MAX_QUERY_NAME = 40


def query_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a StreamingQuery, None when it can."""
    if len(name) > MAX_QUERY_NAME:
        return f"{name!r} is {len(name)} characters long; a StreamingQuery's name has at most {MAX_QUERY_NAME}"
    if not _re.fullmatch(QUERY_NAME_PATTERN, name):  # match() would take "q\n" ($ matches before a newline)
        return (
            f"{name!r} is not a DNS-1035 label (lower-case letters, digits and '-', starting with a letter, "
            "ending with a letter or digit; no dots): the operator names the query's pods, Services and "
            "Kafka transactional ids after it"
        )
    return None


# Labels on everything the operator creates for a query.
LABEL_QUERY = f"{GROUP}/query"
LABEL_COMPONENT = f"{GROUP}/component"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "streamq"
# On a Secret the namespace's owners made for queries' credentials (auth.secretRef,
# checkpoint.s3.credentials.secretRef): with the value "true" and of type Opaque, a query may mount it.
LABEL_CREDENTIALS = f"{GROUP}/credentials"
CREDENTIALS_SECRET_TYPE = "Opaque"

# The chart's defaults: what the operator and `streamq validate` assume when told nothing else.
DEFAULT_JOB_IMAGE = "streamq:0.1.0"
DEFAULT_DRIVER_SERVICE_ACCOUNT = "streamq-driver"
DEFAULT_OPERATOR_SERVICE_ACCOUNT = "streamq-operator"

# Paths inside the driver pod.
APP_DIR = "/opt/streamq"  # the image's virtualenv, Spark and the job's main file
SPEC_MOUNT_DIR = "/etc/streamq"
SPEC_FILE_NAME = "query.json"
SECRETS_MOUNT_DIR = "/var/run/secrets/streamq"
TERMINATION_LOG = "/dev/termination-log"
PROGRESS_FILE_ENV = "STREAMQ_PROGRESS_FILE"
# The port the driver serves its newest progress record on (GET PROGRESS_PATH), the operator's progress channel
# (app.monitoring.endpoint, controller.progress_read): the pod's container port named PROGRESS_PORT_NAME.
PROGRESS_PORT_ENV = "STREAMQ_PROGRESS_PORT"
PROGRESS_PORT_NAME = "progress"
PROGRESS_PATH = "/progress"
# The largest record the operator reads from a driver; a larger answer is refused, not parsed (a record is ~1-4 KiB).
MAX_PROGRESS_BYTES = 64 * 1024
# The file the job creates once it is worth handing the query to (app.driver.ready): a standby warmed up, or
# a query started. The driver pod's readiness probe tests it, so a pod's Ready says "warm".
READY_FILE_ENV = "STREAMQ_READY_FILE"
READY_FILE = "/tmp/streamq/ready"
QUERY_ENV = "STREAMQ_QUERY"  # the query's name, in its driver pod
# The driver pod's own IP (the downward API): executors dial the driver there, never through a name
# that could also resolve to the query's other driver (a standby).
POD_IP_ENV = "STREAMQ_POD_IP"
SECRETS_DIR_ENV = "STREAMQ_SECRETS_DIR"
JARS_DIR_ENV = "STREAMQ_JARS_DIR"
S3A_JARS_DIR_ENV = "STREAMQ_S3A_JARS_DIR"  # hadoop-aws and the AWS SDK modules S3A loads (s3a:// checkpoints)
WRITER_HEADER = "streamq.writer"  # a header on every record of a Kafka sink: the driver (pod) that wrote it
FENCE_JARS_DIR_ENV = "STREAMQ_FENCE_JARS_DIR"  # the driver's write fence (jvm/fence, app/driver/write_fence.py)
READER_JARS_DIR_ENV = "STREAMQ_READER_JARS_DIR"  # the streamq-kafka continuous source (jvm/reader, source.kafka.reader)
# spec.runtime.sparkUI: the port the driver serves Spark's UI and metrics on (app.pipeline.session),
# which the operator's <query>-ui Service and the driver container's spark-ui port point at.
SPARK_UI_PORT = 4040
# autoscaling.recommendOnly false (controller.decide.autoscale, app.driver.executors): the operator writes the
# executors a running micro-batch driver is to have on its pod, the downward API shows the driver that
# annotation as a file, and the driver asks Spark's scheduler backend for them. The pod is the operator's and
# the file is the kubelet's: nothing the driver listens on, no token the driver needs.
EXECUTORS_ANNOTATION = f"{GROUP}/executors"
EXECUTORS_FILE_ENV = "STREAMQ_EXECUTORS_FILE"
EXECUTORS_MOUNT_DIR = "/etc/streamq-scale"  # not under SPEC_MOUNT_DIR: that mount is read-only
EXECUTORS_FILE_NAME = "executors"
# On the query document: where the previous run had committed, for a lost checkpoint (app.driver.starting_offsets).
RESUME_ANNOTATION = f"{GROUP}/resume-from"
# On the query document of a blue/green upgrade's green driver: blue's checkpoint location. Green
# starts its fresh checkpoint at the offsets blue committed last, read once blue has stopped (app.driver.bluegreen).
HANDOVER_ANNOTATION = f"{GROUP}/handover-from"


class ExitCode(IntEnum):
    """How the job ended. The controller retries only what retrying can fix."""

    OK = 0  # stopped on request, or an availableNow run finished
    INVALID_SPEC = 64  # the spec breaks a rule: fix the resource
    QUERY_REFUSED = 65  # Spark's analyser refused the query: fix the resource
    SOURCE_UNAVAILABLE = 69  # broker unreachable or topic missing at start: retry
    QUERY_FAILED = 70  # the query died while running: restart from the checkpoint
    CHECKPOINT_UNWRITABLE = 73  # the checkpoint location cannot be written (permissions): retry after a fix
    STALLED = 75  # no commit while input waited (spec.health): restart from the checkpoint
    PARTITIONS_CHANGED = 76  # the source gained partitions the slots cannot hold: restart, sized again
    LEASE_LOST = 77  # a standby query's driver could not renew its lease and stopped: another may run it
    INTERRUPTED = 130  # SIGINT

    @property
    def retryable(self) -> bool:
        return self not in (ExitCode.OK, ExitCode.INVALID_SPEC, ExitCode.QUERY_REFUSED)
