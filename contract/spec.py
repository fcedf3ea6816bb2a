"""The StreamingQuery spec: the one model the job reads, the controller validates
with, and the CRD schema is generated from.

Field names are camelCase on the wire (YAML, the Kubernetes resource) and
snake_case in Python. Unknown fields are refused everywhere, so a typo never
silently turns into a default.

Rules that involve one field live here as field constraints; rules that tie
several fields together live in ``contract.rules`` so they can report every
problem at once, with a path the user can find in their YAML.
"""

from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import Annotated, Any, Self

from kubernetes.utils import parse_duration, parse_quantity
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

from contract.modes import Mode, OutputMode

DURATION_PATTERN = r"^[0-9]+(ms|s|m|h)$"

Duration = Annotated[str, StringConstraints(pattern=DURATION_PATTERN)]
NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]
# host:port pairs, comma-separated: what Kafka clients accept.
BOOTSTRAP_PATTERN = r"^[A-Za-z0-9._\-\[\]:]+:[0-9]{1,5}(,[A-Za-z0-9._\-\[\]:]+:[0-9]{1,5})*$"
BootstrapServers = Annotated[str, StringConstraints(pattern=BOOTSTRAP_PATTERN, max_length=4096)]
# Kubernetes object names (RFC 1123 subdomain).
K8S_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
K8sName = Annotated[str, StringConstraints(pattern=K8S_NAME_PATTERN, max_length=253)]
# A key of a Kubernetes Secret's data (what the API server accepts as one).
# At least one character that is not a dot: "." and ".." would name the directory above the key.
SECRET_KEY_PATTERN = r"^[-._a-zA-Z0-9]*[-_a-zA-Z0-9][-._a-zA-Z0-9]*$"
SecretKey = Annotated[str, StringConstraints(pattern=SECRET_KEY_PATTERN, min_length=1, max_length=253)]

# Static limits: the API server refuses anything larger, before the operator sees it
# (they also bound the cost of the CRD's CEL rules). Cluster-specific caps (executors,
# cores, memory a query may use) are the platform's policy: contract.policy.
MAX_SQL = 65_536  # characters of one sql step
MAX_EXPRESSION = 8_192  # characters of a where / select item / withColumn expression
MAX_NAME = 256  # column, topic, table names
MAX_LIST = 256  # select and drop items, topics
MAX_OPTIONS = 64  # entries of a Kafka options map
MAX_SPARK_CONF = 128  # entries of runtime.sparkConf
MAX_VALUE = 4_096  # an option's or a Spark setting's value, a path, an URI
MAX_EXECUTORS = 1_000
MAX_CORES = 64  # per driver or executor pod

Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME)]
Expression = Annotated[str, StringConstraints(min_length=1, max_length=MAX_EXPRESSION)]
Value = Annotated[str, StringConstraints(max_length=MAX_VALUE)]
LongStr = Annotated[str, StringConstraints(min_length=1, max_length=MAX_VALUE)]


def duration_ms(value: str) -> int:
    """'500ms' -> 500, '2s' -> 2000 (Go's duration syntax, as Kubernetes reads it)."""
    try:
        return int(parse_duration(value).total_seconds() * 1000)
    except ValueError:
        raise ValueError(f"not a duration: {value!r} (use e.g. 500ms, 1s, 5m, 1h)") from None


def spark_interval(value: str) -> str:
    """Our compact duration as the interval string Spark's trigger() accepts."""
    return f"{duration_ms(value)} milliseconds"


class Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )


class OneOf(Model):
    """A union written as an object with exactly one key set, as Kubernetes APIs do."""

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        chosen = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(chosen) != 1:
            choices = ", ".join(to_camel(n) for n in type(self).model_fields)
            raise ValueError(f"set exactly one of: {choices} (got {len(chosen)})")
        return self

    @property
    def kind(self) -> str:
        return next(to_camel(n) for n in type(self).model_fields if getattr(self, n) is not None)

    @property
    def value(self) -> Any:  # what the set key holds: a model, a text or a list, by subclass and key
        return getattr(self, next(n for n in type(self).model_fields if getattr(self, n) is not None))


# --- credentials -------------------------------------------------------------

SECRET_POLICY = "which Secrets a query may mount is the platform's policy (allowedSecrets; by default streamq-*)"


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


class SecurityProtocol(StrEnum):
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SecretKeyRef(Model):
    """The Secret with the SASL username and password, in the query's namespace: mounted as files into
    the driver and read at start, never copied into the spec, status or logs."""

    name: K8sName = Field(description=f"Name of the Secret; {SECRET_POLICY}.")
    username_key: SecretKey = Field(default="username", description="Key of the Secret that holds the username.")
    password_key: SecretKey = Field(default="password", description="Key of the Secret that holds the password.")


class KafkaAuth(Model):
    """SASL authentication to the brokers, with the credentials from a Secret. Unset: none (PLAINTEXT).
    Credentials never go in options."""

    mechanism: SaslMechanism = Field(default=SaslMechanism.PLAIN, description="The SASL mechanism.")
    security_protocol: SecurityProtocol = Field(
        default=SecurityProtocol.SASL_PLAINTEXT,
        description="SASL_PLAINTEXT: SASL without TLS; SASL_SSL: SASL over TLS to the brokers (the one allowed "
        "beside tls, which then gives the CA). TLS without SASL (SSL): tls alone, no auth.",
    )
    secret_ref: SecretKeyRef


class CaSecretRef(Model):
    """The Secret with the brokers' CA certificate (PEM), in the query's namespace: mounted as a file into the
    driver and executor pods, never copied into the spec, Spark's settings or logs."""

    name: K8sName = Field(description=f"Name of the Secret; {SECRET_POLICY}.")
    key: SecretKey = Field(
        default="ca.crt",
        description="Key of the Secret that holds the CA certificate(s), PEM (Strimzi's <cluster>-cluster-ca-cert "
        "and cert-manager use ca.crt).",
    )


class ClientCertificateRef(Model):
    """The Secret with the query's client certificate and its private key (PEM, the key unencrypted PKCS#8),
    for brokers that require mutual TLS; mounted as files like the CA."""

    name: K8sName = Field(description=f"Name of the Secret; {SECRET_POLICY}.")
    certificate_key: SecretKey = Field(
        default="tls.crt",
        description="Key of the Secret that holds the client certificate chain, PEM (a Strimzi KafkaUser's: user.crt).",
    )
    key_key: SecretKey = Field(
        default="tls.key",
        description="Key of the Secret that holds the certificate's private key, PEM PKCS#8 unencrypted "
        "(-----BEGIN PRIVATE KEY-----; a Strimzi KafkaUser's: user.key).",
    )


class KafkaTls(Model):
    """TLS to the brokers. Alone: security protocol SSL (mutual TLS with clientCertificate); with auth: SASL over
    TLS (auth.securityProtocol SASL_SSL). Unset fields fall back to the clients' defaults: the JVM's and the
    system's public CAs, no client certificate."""

    ca_secret_ref: CaSecretRef | None = Field(
        default=None, description="The brokers' CA (a private CA, e.g. Strimzi's cluster CA); unset: public CAs."
    )
    client_certificate: ClientCertificateRef | None = Field(
        default=None, description="The client certificate and key for mutual TLS; unset: none is presented."
    )

    def secret_refs(self) -> tuple[tuple[str, str], ...]:
        """(path below tls, Secret name) of the Secrets it mounts."""
        found = []
        if self.ca_secret_ref is not None:
            found.append((".caSecretRef.name", self.ca_secret_ref.name))
        if self.client_certificate is not None:
            found.append((".clientCertificate.name", self.client_certificate.name))
        return tuple(found)


TLS_DESCRIPTION = (
    "TLS to the brokers, with a private CA and a client certificate from Secrets (mutual TLS). "
    "Unset: no TLS unless auth.securityProtocol is SASL_SSL (then with public CAs)."
)


# --- source ------------------------------------------------------------------


BOOTSTRAP_DESCRIPTION = (
    "The brokers, as comma-separated host:port pairs (kafka-0.kafka:9092,kafka-1.kafka:9092). "
    "Which hosts are allowed is the platform's policy (deniedHosts, allowedHosts)."
)


class KafkaReader(StrEnum):
    """Which implementation reads the topics: Spark's Kafka source, or streamq's own continuous-mode one."""

    SPARK = "spark"
    STREAMQ = "streamq"


class KafkaSource(Model):
    """Read Kafka topics (Spark's Kafka source). Each row has key and value (binary), topic, partition,
    offset, timestamp and timestampType; set exactly one of topics and pattern."""

    bootstrap_servers: BootstrapServers = Field(description=BOOTSTRAP_DESCRIPTION)
    topics: list[Name] | None = Field(
        default=None, min_length=1, max_length=MAX_LIST,
        description=f"The topics to read, 1 to {MAX_LIST}. Set exactly one of topics and pattern.",
    )  # fmt: skip
    pattern: Annotated[str, StringConstraints(min_length=1, max_length=MAX_VALUE)] | None = Field(
        default=None,
        description="A Java regular expression: every topic whose name matches is read, topics created later "
        "included. Set exactly one of topics and pattern.",
    )
    starting_offsets: Annotated[str, StringConstraints(min_length=1, max_length=MAX_SQL)] = Field(
        default="latest",
        description='Where a query without a checkpoint starts reading: "earliest", "latest", or Spark\'s JSON '
        'form {"topic":{"0":42,"1":-2}} (-2: earliest, -1: latest, per partition). Once the checkpoint holds a '
        "commit, the query resumes after it and this is not read.",
    )
    options: dict[Name, Value] = Field(
        default_factory=dict, max_length=MAX_OPTIONS,
        description=f"Extra options of Spark's Kafka source (at most {MAX_OPTIONS}): Spark's own "
        "(maxOffsetsPerTrigger, failOnDataLoss, includeHeaders, ...) and Kafka consumer settings prefixed kafka. "
        "(kafka.fetch.max.wait.ms). "
        "What the other fields set (servers, topics, offsets, credentials) is refused here; which kafka. settings "
        "are allowed is the platform's policy (allowedKafkaOptions).",
    )  # fmt: skip
    auth: KafkaAuth | None = None
    tls: KafkaTls | None = Field(default=None, description=TLS_DESCRIPTION)
    # None, not "spark", when unset: the stored form (and hash) of a spec written before this field existed stays the same.
    reader: KafkaReader | None = Field(
        default=None,
        description="Which source reads the topics; unset: spark (Spark's Kafka source). streamq: streamq's own "
        "continuous-mode source (jvm/reader), one consumer per partition that seeks once and then only polls; "
        "continuous trigger only. Same rows, options and checkpoint offsets as Spark's, so a checkpoint moves "
        "between the two; startingOffsetsByTimestamp and startingTimestamp are Spark's only.",
    )

    @property
    def effective_reader(self) -> KafkaReader:
        return self.reader or KafkaReader.SPARK


class RateSource(Model):
    """Spark's rate source, for tests and demos without a broker: rows of (timestamp, value), value counting
    up from 0."""

    rows_per_second: int = Field(default=10, ge=1, le=10_000_000, description="Rows made per second, 1 to 10,000,000.")
    num_partitions: int = Field(
        default=1, ge=1, le=1024,
        description="Partitions the rows are spread over, 1 to 1024. In continuous mode each holds a task slot "
        "for the query's life: the query needs more task slots than partitions (runtime.parallelism).",
    )  # fmt: skip


class Source(OneOf):
    """Where the rows come from: set exactly one of kafka, rate. A change of the source's kind, topics or
    pattern is one the checkpoint cannot take (checkpoint.onIncompatibleChange)."""

    kafka: KafkaSource | None = None
    rate: RateSource | None = None


# --- transforms --------------------------------------------------------------


class WithColumn(Model):
    """Add a column computed by a SQL expression, or replace the column of that name."""

    name: Name = Field(description="The column's name.")
    expr: Expression = Field(description="A Spark SQL expression over the row, e.g. CAST(value AS STRING); no subquery.")


class Transform(OneOf):
    """One step of the pipeline, applied to the rows of the step before: set exactly one of where, select,
    withColumn, drop, sql."""

    where: Expression | None = Field(
        default=None,
        description="Keep the rows for which this Spark SQL boolean expression is true, e.g. amount > 1000.",
    )
    select: list[Expression] | None = Field(
        default=None, min_length=1, max_length=MAX_LIST,
        description="Spark SQL expressions that make the output columns (selectExpr), e.g. CAST(key AS STRING) AS key.",
    )  # fmt: skip
    with_column: WithColumn | None = None
    drop: list[Name] | None = Field(
        default=None, min_length=1, max_length=MAX_LIST, description="Names of the columns to remove."
    )
    sql: Annotated[str, StringConstraints(min_length=1, max_length=MAX_SQL)] | None = Field(
        default=None,
        description="One Spark SQL SELECT (UNION and CTEs allowed) over the previous step's rows, the view `input`, "
        "e.g. SELECT key, upper(value) AS value FROM input. No other statement, table or file.",
    )


# --- sink --------------------------------------------------------------------


class Delivery(StrEnum):
    AT_LEAST_ONCE = "atLeastOnce"  # Spark's own Kafka writer: a replayed batch writes its records again
    EXACTLY_ONCE = "exactlyOnce"  # app.pipeline.exactly_once: Kafka transactions, one per batch and producer


class TransactionWriter(StrEnum):
    TASKS = "tasks"  # each of the producers writes its share of the batch in a Spark task
    DRIVER = "driver"  # the driver collects the batch's rows and writes them with the one producer it keeps


class KafkaTransactions(Model):
    """How an exactlyOnce sink writes (docs/architecture.md, "Exactly-once Kafka output")."""

    producers: int = Field(
        default=1,
        ge=1,
        le=256,
        description="Transactional producers per batch: the batch's rows are hashed over this many writers. "
        "1 (the default): one producer, the driver's unless writer says tasks; the lowest latency, one producer's "
        "throughput. More: each writes its share in a Spark task. A batch left half written when the count "
        "changes across a restart is finished under the count it was begun with.",
    )
    # None when unset: the spec hash of a driver started before this field stays the same.
    writer: TransactionWriter | None = Field(
        default=None,
        description="Who writes: driver (the default with producers 1) collects each batch's rows and writes them "
        "with one producer it keeps while it runs: no Python worker and no second job per batch, the lowest latency; "
        "each batch's output must fit in the driver's memory (bound a catch-up with the source's "
        "maxOffsetsPerTrigger). tasks (the default with producers above 1): each producer writes its share of a "
        "batch in a Spark task, in a Python worker. tasks and driver with producers 1 share their transactional id "
        "and marker: a query can move between them across a restart.",
    )
    timeout: Duration = Field(
        default="60s",
        description="transaction.timeout.ms: a transaction left open by a crashed writer is aborted by the broker "
        "after this long at the latest (a restarted query aborts it sooner). Longer than the trigger interval, "
        "at most 15m (the broker's transaction.max.timeout.ms default).",
    )


class KafkaSink(Model):
    """Write to a Kafka topic (Spark's Kafka sink): the rows need a value column (string or binary) and may
    have key, headers and partition columns."""

    bootstrap_servers: BootstrapServers = Field(description=BOOTSTRAP_DESCRIPTION)
    topic: Name = Field(description="The topic every row is written to.")
    options: dict[Name, Value] = Field(
        default_factory=dict, max_length=MAX_OPTIONS,
        description=f"Extra options of Spark's Kafka sink (at most {MAX_OPTIONS}): includeHeaders and Kafka producer "
        "settings prefixed kafka. (kafka.compression.type). Servers, topic and credentials come from their own "
        "fields; which kafka. settings are allowed is the platform's policy (allowedKafkaOptions).",
    )  # fmt: skip
    auth: KafkaAuth | None = None
    tls: KafkaTls | None = Field(default=None, description=TLS_DESCRIPTION)
    # None, not atLeastOnce, when unset: the spec hash of a driver started before this field stays the same.
    delivery: Delivery | None = Field(
        default=None,
        description="atLeastOnce (unset): Spark's Kafka writer; a batch replayed after a failure is written again. "
        "exactlyOnce (microBatch and availableNow only): each batch is written in Kafka transactions with a "
        "marker per writer in the query's control topic, so readers with isolation.level=read_committed see "
        "every record once.",
    )
    transactions: KafkaTransactions | None = Field(
        default=None, description="Settings of an exactlyOnce sink; unset: the defaults."
    )

    @property
    def exactly_once(self) -> bool:
        return self.delivery is Delivery.EXACTLY_ONCE

    @property
    def transaction_settings(self) -> KafkaTransactions:
        return self.transactions or KafkaTransactions()

    @property
    def writes_from_driver(self) -> bool:
        """The driver writes unless told tasks, or given more producers than its one."""
        settings = self.transaction_settings
        writer = settings.writer or (TransactionWriter.DRIVER if settings.producers == 1 else TransactionWriter.TASKS)
        return self.exactly_once and writer is TransactionWriter.DRIVER


class ConsoleSink(Model):
    """Print each batch (or epoch) as a table in the driver's log (kubectl logs): for trying a query out."""

    num_rows: int = Field(default=20, ge=1, le=100_000, description="Rows printed per batch, 1 to 100,000.")
    truncate: bool = Field(default=False, description="Cut values longer than 20 characters.")


class MemorySink(Model):
    """For tests: rows land in an in-memory table inside the driver, gone when it stops."""

    table: Name = Field(description="Name of the table; it names the query inside Spark too.")


class Sink(OneOf):
    """Where the rows go: set exactly one of kafka, console, memory."""

    kafka: KafkaSink | None = None
    console: ConsoleSink | None = None
    memory: MemorySink | None = None


# --- trigger -----------------------------------------------------------------


class ContinuousTrigger(Model):
    """Continuous processing: long-running tasks, one per source partition, millisecond latency. Map-like
    transforms only (no aggregation, join or ordering), append output, and more task slots than source
    partitions."""

    checkpoint_interval: Duration = Field(
        default="1s",
        description="How often an epoch commits (its offsets written to the checkpoint), above 0, e.g. 500ms, 1s, 1m: "
        "shorter means less to replay after a failure and more checkpoint writes.",
    )


class RealTimeTrigger(Model):
    """Real-time mode (Spark 4.1+): long-running tasks process each record as it arrives, in batches that
    commit every batchDuration. Kafka source only, update output."""

    batch_duration: Duration = Field(
        default="5m", description="How long one batch runs before it commits, above 0, e.g. 30s, 5m."
    )


class MicroBatchTrigger(Model):
    """Micro-batches: every Spark operation (aggregations, joins, watermarks), latency from about 100 ms."""

    interval: Duration = Field(
        default="0s",
        description="Time between the starts of batches, e.g. 500ms, 10s, 1m; 0s: each batch starts as soon as the "
        "previous one ends. A batch that takes longer delays the next.",
    )


class AvailableNowTrigger(Model):
    """Process what the source holds when the query starts, in micro-batches, then stop: the query completes
    (phase Completed) and is not restarted."""


class Trigger(OneOf):
    """How the query runs and commits: set exactly one of continuous, realTime, microBatch, availableNow
    (status.mode)."""

    continuous: ContinuousTrigger | None = None
    real_time: RealTimeTrigger | None = None
    micro_batch: MicroBatchTrigger | None = None
    available_now: AvailableNowTrigger | None = None


# --- checkpoint, runtime, lifecycle -------------------------------------------


class IncompatibleChange(StrEnum):
    REFUSE = "refuse"
    NEW_CHECKPOINT = "newCheckpoint"


class PvcVolume(Model):
    """A PersistentVolumeClaim of the query's namespace. A standby query's second driver may run on another
    node: its claim must be ReadWriteMany."""

    claim_name: K8sName = Field(
        description="Name of the claim; which claims a query may mount is the platform's policy "
        "(allowedClaims; by default streamq-*)."
    )


class CheckpointVolume(Model):
    """The volume a local checkpoint location is written to, mounted in the driver at the location's parent
    directory: set one of persistentVolumeClaim, emptyDir, hostPath. Which kinds a query may use is the
    platform's policy (allowedVolumes)."""

    persistent_volume_claim: PvcVolume | None = None
    empty_dir: dict[Name, Value] | None = Field(
        default=None, max_length=8,
        description="Test clusters only: an emptyDir with these settings (medium, sizeLimit), lost with the pod.",
    )  # fmt: skip
    host_path: LongStr | None = Field(
        default=None,
        description="Single-node clusters only: a directory of the node, made if missing, below the platform's hostPathPrefixes.",
    )


# An S3 endpoint: a host[:port], or a URL with http:// or https:// (Hadoop's fs.s3a.endpoint).
S3_ENDPOINT_PATTERN = r"^(https?://)?[A-Za-z0-9._\-\[\]:]+(/[^\s]*)?$"
S3_REGION_PATTERN = r"^[a-z0-9-]+$"


class S3SecretRef(Model):
    """A Secret with the access key pair, mounted into the driver and read at start; never copied anywhere."""

    name: K8sName = Field(description=f"Name of the Secret, in the query's namespace; {SECRET_POLICY}.")
    access_key_id_key: SecretKey = Field(default="accessKeyId", description="Key of the Secret that holds the access key id.")
    secret_access_key_key: SecretKey = Field(
        default="secretAccessKey", description="Key of the Secret that holds the secret access key."
    )


class S3Credentials(Model):
    """The S3 access key pair, by Secret reference."""

    secret_ref: S3SecretRef


class S3Checkpoint(Model):
    """An S3-compatible object store for an ``s3a://bucket/path`` checkpoint (Hadoop's S3A)."""

    endpoint: Annotated[str, StringConstraints(pattern=S3_ENDPOINT_PATTERN, max_length=1024)] | None = Field(
        default=None, description="Unset: AWS S3 of `region`. For other stores e.g. http://seaweedfs.storage:8333."
    )
    region: Annotated[str, StringConstraints(pattern=S3_REGION_PATTERN, max_length=64)] | None = Field(
        default=None, description="The signing region (e.g. us-east-1); unset: S3A's own lookup."
    )
    path_style_access: bool = Field(
        default=False, description="http://endpoint/bucket/key instead of http://bucket.endpoint/key (most non-AWS stores)."
    )
    credentials: S3Credentials | None = Field(
        default=None,
        description="The access key pair, by Secret reference only. Unset: S3A's default credential chain "
        "(environment, web identity, instance profile).",
    )


class Checkpoint(Model):
    """Where the query keeps its offsets, commits and state: a restarted driver resumes from it."""

    location: LongStr = Field(
        description="Where Spark writes the checkpoint: an absolute path of the driver (/checkpoints/<query>, on "
        "`volume`; without a volume, below /tmp and lost with the pod) or an object store URI (s3a://, gs://, "
        "abfss://, hdfs://). Give each query a folder of its own; which places are allowed is the platform's "
        "policy (checkpointRoots, remoteCheckpointPrefixes)."
    )
    volume: CheckpointVolume | None = None
    s3: S3Checkpoint | None = Field(default=None, description="Settings of the store behind an s3a:// location.")
    on_incompatible_change: IncompatibleChange = Field(
        default=IncompatibleChange.REFUSE,
        description="A spec change the checkpoint cannot take (the source's kind, topics or pattern; state the new "
        "spec would not keep). refuse: the previous spec keeps running, condition Degraded and an event say why. "
        "newCheckpoint: the new spec starts on a fresh checkpoint next to this one (<location>-reset-N); the old "
        "one is kept.",
    )

    @property
    def shared(self) -> bool:
        """A second driver pod reaches it too (a standby, a warm upgrade's driver): an object store,
        a persistentVolumeClaim or a hostPath; not an emptyDir or the pod's own filesystem."""
        volume = self.volume
        mounted = volume is not None and (volume.persistent_volume_claim is not None or volume.host_path is not None)
        return mounted or bool(OBJECT_STORE.match(self.location))


OBJECT_STORE = re.compile(r"^(?!file:)[a-z][a-z0-9+.-]*://")  # a URI Spark writes through a filesystem client

DEFAULT_PARALLELISM = 4
SLOT_HEADROOM = 2  # slots beyond one per partition: Spark's own jobs and a partition or two added later


class Backend(StrEnum):
    POD = "pod"
    SPARK_APPLICATION = "sparkApplication"


QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|M|G|T)?$"
Quantity = Annotated[str, StringConstraints(pattern=QUANTITY_PATTERN, max_length=32)]


# What a driver waiting on the Lease requests: its JVM idles once warm (a few millicores); its warm-up
# runs on CPU nobody else uses (no CPU limit). 50m: a standby adds a fifth to a 250m driver's request.
WAITING_CORE_REQUEST = "50m"
CORE_REQUEST_DESCRIPTION = (
    "CPU the pod requests from the scheduler, a quantity such as 500m; unset: `cores`. "
    "Lower it to pack pods onto small nodes; Spark still runs `cores` tasks at once."
)


# --- pod placement and metadata -----------------------------------------------------
# Kubernetes' own shapes (a subset: no namespaces or namespaceSelector in pod affinity terms,
# so a query's affinity only ever counts pods of its own namespace; no matchFields), checked
# here as the API server would, so a spec it would refuse never reaches a pod. Which keys,
# taints and priority classes a query may use is the platform's policy (contract.placement).

# A label or annotation key, node label key, taint key: [prefix/]name (a qualified name).
QUALIFIED_NAME_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
QualifiedName = Annotated[str, StringConstraints(pattern=QUALIFIED_NAME_PATTERN, max_length=317)]


def _qualified_name(key: str) -> str:
    if not re.match(QUALIFIED_NAME_PATTERN, key) or len(key.partition("/")[0]) > 253:
        raise ValueError(f"{key!r} is not a Kubernetes label key: [prefix/]name, prefix a DNS subdomain, name up to "
                         "63 letters, digits, '-', '_' or '.'")  # fmt: skip
    return key


# The same as a map's key: checked by the model, not by a pattern (a structural schema, so the CRD,
# has no patterns for keys; the values' patterns are in it).
MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=317), AfterValidator(_qualified_name)]
LABEL_VALUE_PATTERN = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE_PATTERN, max_length=63)]
MAX_METADATA = 32  # entries of a nodeSelector, labels or annotations map
MAX_TOLERATIONS = 16
MAX_TERMS = 8  # affinity terms of one kind, expressions of one term
MAX_VALUES = 64  # values of one expression


class TolerationOperator(StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Toleration(Model):
    """A taint the pod tolerates (Kubernetes' toleration); the platform's policy lists the keys (allowedTolerationKeys)."""

    key: QualifiedName | None = Field(default=None, description="The taint's key. Unset (with Exists): every taint.")
    operator: TolerationOperator = Field(
        default=TolerationOperator.EQUAL, description="Equal: the taint's value is `value`. Exists: any value."
    )
    value: LabelValue | None = Field(default=None, description="The taint's value, with operator Equal.")
    effect: TaintEffect | None = Field(default=None, description="The taint effect tolerated. Unset: every effect.")
    toleration_seconds: int | None = Field(
        default=None, ge=0, le=86_400 * 365,
        description="With effect NoExecute: how long the pod stays on a node that gets the taint. Unset: for ever.",
    )  # fmt: skip

    @model_validator(mode="after")
    def _as_kubernetes_reads_it(self) -> Self:
        if self.key is None and self.operator is not TolerationOperator.EXISTS:
            raise ValueError("a toleration without a key needs operator Exists")
        if self.operator is TolerationOperator.EXISTS and self.value:
            raise ValueError("a toleration with operator Exists takes no value")
        if self.toleration_seconds is not None and self.effect is not TaintEffect.NO_EXECUTE:
            raise ValueError("tolerationSeconds needs effect NoExecute")
        return self


class SelectorOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"  # node selectors only
    LT = "Lt"


def _values_fit(operator: SelectorOperator, values: list[str]) -> None:
    if operator in (SelectorOperator.IN, SelectorOperator.NOT_IN) and not values:
        raise ValueError(f"operator {operator} needs values")
    if operator in (SelectorOperator.EXISTS, SelectorOperator.DOES_NOT_EXIST) and values:
        raise ValueError(f"operator {operator} takes no values")
    if operator in (SelectorOperator.GT, SelectorOperator.LT) and (len(values) != 1 or not values[0].isdigit()):
        raise ValueError(f"operator {operator} takes one integer value")


class NodeSelectorRequirement(Model):
    """A node label's key, an operator and values; the policy lists the keys (allowedNodeLabels)."""

    key: QualifiedName = Field(description="The node label's key.")
    operator: SelectorOperator = Field(description="In, NotIn, Exists, DoesNotExist, Gt or Lt.")
    values: list[LabelValue] = Field(
        default_factory=list,
        max_length=MAX_VALUES,
        description="The values: none for Exists and DoesNotExist, one for Gt and Lt.",
    )

    @model_validator(mode="after")
    def _values(self) -> Self:
        _values_fit(self.operator, self.values)
        return self


class NodeSelectorTerm(Model):
    """Nodes whose labels meet every expression."""

    match_expressions: list[NodeSelectorRequirement] = Field(
        min_length=1, max_length=MAX_TERMS, description="Expressions over the node's labels, all of which must hold."
    )


class RequiredNodes(Model):
    """Nodes the pod may run on: those that match any of the terms."""

    node_selector_terms: list[NodeSelectorTerm] = Field(
        min_length=1, max_length=MAX_TERMS, description="Terms, any of which a node must match."
    )


class PreferredNodes(Model):
    """Nodes the scheduler prefers, by weight."""

    weight: int = Field(ge=1, le=100, description="1 to 100: added to a node's score when it matches.")
    preference: NodeSelectorTerm = Field(description="The nodes preferred.")


class NodeAffinity(Model):
    """Which nodes the pod runs on, by their labels (Kubernetes' nodeAffinity)."""

    required_during_scheduling_ignored_during_execution: RequiredNodes | None = Field(
        default=None, description="Nodes the pod may only run on."
    )
    preferred_during_scheduling_ignored_during_execution: list[PreferredNodes] | None = Field(
        default=None, max_length=MAX_TERMS, description="Nodes the scheduler prefers."
    )


class LabelSelectorRequirement(Model):
    """A pod label's key, an operator and values."""

    key: QualifiedName = Field(description="The pod label's key.")
    operator: SelectorOperator = Field(description="In, NotIn, Exists or DoesNotExist.")
    values: list[LabelValue] = Field(
        default_factory=list, max_length=MAX_VALUES, description="The values: none for Exists and DoesNotExist."
    )

    @model_validator(mode="after")
    def _values(self) -> Self:
        if self.operator in (SelectorOperator.GT, SelectorOperator.LT):
            raise ValueError(f"operator {self.operator} is for node selectors only")
        _values_fit(self.operator, self.values)
        return self


class LabelSelector(Model):
    """Pods of the query's namespace, by their labels."""

    match_labels: dict[MetadataKey, LabelValue] | None = Field(
        default=None, max_length=MAX_METADATA, description="Labels the pods carry, all of them."
    )
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        default=None, max_length=MAX_TERMS, description="Expressions over the pods' labels, all of which must hold."
    )


class PodAffinityTerm(Model):
    """Pods of the query's own namespace (no other: a term never reaches another tenant's pods), and the
    topology (a node label such as kubernetes.io/hostname) the pod shares or avoids with them."""

    label_selector: LabelSelector = Field(description="The pods, in the query's namespace.")
    topology_key: QualifiedName = Field(description="A node label: nodes with the same value are one domain.")


class WeightedPodAffinityTerm(Model):
    """A preferred pod affinity term, by weight."""

    weight: int = Field(ge=1, le=100, description="1 to 100: added to a node's score when the term holds.")
    pod_affinity_term: PodAffinityTerm = Field(description="The term.")


class PodAffinity(Model):
    """Pods of the query's namespace to run near (podAffinity) or away from (podAntiAffinity)."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = Field(
        default=None, max_length=MAX_TERMS, description="Terms that must hold."
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = Field(
        default=None, max_length=MAX_TERMS, description="Terms the scheduler prefers."
    )


class Affinity(Model):
    """Kubernetes' affinity, without namespaces: pod terms count the query's own namespace's pods only.
    The operator adds its own preferred anti-affinity between a standby query's two drivers."""

    node_affinity: NodeAffinity | None = Field(default=None, description="Which nodes, by their labels.")
    pod_affinity: PodAffinity | None = Field(default=None, description="Near which pods of the namespace.")
    pod_anti_affinity: PodAffinity | None = Field(default=None, description="Away from which pods of the namespace.")


# One description per field, said of the driver pod or of every executor pod.
_THIS_ROLE = "the pods of this role (the driver, or every executor)"


def _node_selector(pods: str) -> Any:
    return Field(default=None, max_length=MAX_METADATA,
                 description=f"Node labels {pods} must run on (nodeSelector); the keys the platform's policy "
                 "lists (allowedNodeLabels).")  # fmt: skip


def _tolerations(pods: str) -> Any:
    return Field(default=None, max_length=MAX_TOLERATIONS,
                 description=f"Taints {pods} tolerate, besides the operator's own (node not-ready or unreachable: "
                 "restartPolicy.nodeLostAfter); the keys the platform's policy lists (allowedTolerationKeys).")  # fmt: skip


def _affinity(pods: str) -> Any:
    return Field(default=None, description=f"Node and pod affinity of {pods}; node label keys as the platform's "
                 "policy lists them (allowedNodeLabels).")  # fmt: skip


def _priority_class(pods: str) -> Any:
    return Field(default=None, description=f"PriorityClass of {pods}; one the platform's policy lists "
                 "(allowedPriorityClasses). Unset: the cluster's default.")  # fmt: skip


def _labels(pods: str) -> Any:
    return Field(default=None, max_length=MAX_METADATA,
                 description=f"Labels added to {pods}: keys below the platform's allowedLabelPrefixes, never the "
                 "operator's (streamq.io/...), the selector labels app.kubernetes.io/... or Spark's spark-....")  # fmt: skip


def _annotations(pods: str) -> Any:
    return Field(default=None, max_length=MAX_METADATA,
                 description=f"Annotations added to {pods}: keys below the platform's allowedAnnotationPrefixes, "
                 "never the operator's (streamq.io/...).")  # fmt: skip


class PodPlacement(Model):
    """Where a role's pods run and what they carry besides the operator's own: the same six fields for the
    driver and for the executors, each checked against the platform's policy (contract.placement)."""

    node_selector: dict[MetadataKey, LabelValue] | None = _node_selector(_THIS_ROLE)
    tolerations: list[Toleration] | None = _tolerations(_THIS_ROLE)
    affinity: Affinity | None = _affinity(_THIS_ROLE)
    priority_class_name: K8sName | None = _priority_class(_THIS_ROLE)
    labels: dict[MetadataKey, LabelValue] | None = _labels(_THIS_ROLE)
    annotations: dict[MetadataKey, Value] | None = _annotations(_THIS_ROLE)


class DriverResources(PodPlacement):
    """CPU and memory of the driver pod; the platform's policy caps a query's total (maxCores, maxMemory)."""

    cores: int = Field(
        default=1, ge=1, le=MAX_CORES,
        description=f"CPU cores of the driver, 1 to {MAX_CORES}: its pod's CPU request unless coreRequest is set "
        "(no CPU limit). Task slots without executors come from parallelism.",
    )  # fmt: skip
    core_request: Quantity | None = Field(default=None, description=CORE_REQUEST_DESCRIPTION)
    waiting_core_request: Quantity = Field(
        default=WAITING_CORE_REQUEST,
        description="CPU a driver requests while it waits on the query's Lease (a standby, a warm upgrade's new "
        "driver), at most coreRequest: waiting needs little, and with no CPU limit it warms up on idle CPU. "
        "Once it runs the query the operator resizes it in place to coreRequest (Kubernetes 1.33+; "
        "docs/operations.md#warm-drivers-that-cost-little).",
    )  # fmt: skip
    memory: Quantity = Field(
        default="1Gi",
        description="Memory of the driver, a quantity such as 2Gi. Backend pod: the pod's request and limit, "
        "of which the JVM heap gets 60% (at least 256Mi), the rest Python and off-heap memory.",
    )

    @property
    def cpu_request(self) -> str:
        return self.core_request or str(self.cores)

    @property
    def waiting_cpu_request(self) -> str:
        """What a driver waiting on the Lease requests: waitingCoreRequest, never more than it runs with."""
        if parse_quantity(self.waiting_core_request) >= parse_quantity(self.cpu_request):
            return self.cpu_request
        return self.waiting_core_request


class ExecutorResources(PodPlacement):
    """Executor pods the driver starts (Spark on Kubernetes). None by default: every task runs in the driver."""

    instances: int = Field(
        default=0, ge=0, le=MAX_EXECUTORS,
        description="Executor pods, up to the platform's maxExecutors. 0 runs Spark local[parallelism] inside the "
        "driver pod. With executors the task slots are instances x cores, and a spec change is a plain restart "
        "(no warm upgrade).",
    )  # fmt: skip
    cores: int = Field(
        default=1, ge=1, le=MAX_CORES,
        description=f"Cores of each executor, 1 to {MAX_CORES}: its task slots, and its pod's CPU request unless "
        "coreRequest is set.",
    )  # fmt: skip
    core_request: Quantity | None = Field(default=None, description=CORE_REQUEST_DESCRIPTION)
    core_limit: Quantity | None = Field(
        default=None,
        description="CPU limit of each executor pod (spark.kubernetes.executor.limit.cores), a quantity such as "
        "500m, at least its CPU request. Unset: no limit, an executor also uses CPU nobody else does. A limit "
        "makes an executor's rate what its limit buys, whatever runs beside it: what autoscaling sizes by.",
    )
    memory: Quantity = Field(
        default="1Gi",
        description="Memory of each executor's JVM (spark.executor.memory), a quantity such as 2Gi; its pod gets "
        "10% more for overhead, at least 384Mi more.",
    )

    @property
    def cpu_request(self) -> str:
        return self.core_request or str(self.cores)


class Runtime(Model):
    """Where and with what the query runs: image, backend, driver and executor resources, Spark settings."""

    backend: Backend = Field(
        default=Backend.POD,
        description="pod: the operator runs the driver as a Pod. sparkApplication: it submits a SparkApplication to "
        "kubeflow's Spark operator, which must be installed; standby drivers and warm upgrades need pod.",
    )
    image: Annotated[str, StringConstraints(min_length=1, max_length=1024)] | None = Field(
        default=None,
        description="Image of the driver and executors. Unset: the operator's job image (the chart's jobs.image); "
        "others must be allowed by the platform's policy (allowedImages).",
    )
    parallelism: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description=(
            "Task slots: local[N] when no executors run. Unset: sized when the job starts, "
            f"source partitions + {SLOT_HEADROOM} (at least {DEFAULT_PARALLELISM}) in continuous and realTime mode, "
            f"{DEFAULT_PARALLELISM} otherwise."
        ),
    )
    driver: DriverResources = Field(default_factory=DriverResources)
    executors: ExecutorResources = Field(default_factory=ExecutorResources)
    service_account_name: K8sName | None = Field(
        default=None,
        description="The driver's service account, in the query's namespace; a driver that starts executors needs "
        "one that may create pods. Unset: the chart's driver account when executors run, the "
        "query's own <query>-lease account when its driver holds the query's Lease (standby, warm upgrades), "
        "otherwise none (no API token). Which accounts are allowed is the platform's policy "
        "(allowedServiceAccounts).",
    )
    # None, not False, when unset: the spec hash of a driver started before this field stays the same.
    standby: bool | None = Field(
        default=None,
        description=(
            "Keep a second driver pod with its JVM and SparkSession started, waiting to take over from the "
            "checkpoint when the running one fails (seconds instead of a new pod's start). A Lease decides which "
            "driver runs; the checkpoint must be shared: an object store, a persistentVolumeClaim or a hostPath."
        ),
    )
    # None, not False, when unset: the driver's spec hash (controller.run) of a spec written before
    # this field existed stays the same, so an operator upgrade restarts no driver.
    spark_ui: bool | None = Field(
        default=None,
        alias="sparkUI",
        description=(
            "Serve Spark's web UI and its Prometheus metrics (/metrics/prometheus) on port 4040 of the driver, "
            "behind a Service named <query>-ui that selects the current driver; its address is in status.sparkUI. "
            "It costs the driver some CPU and memory (the UI's listeners), which is why it is off unless true."
        ),
    )
    spark_conf: dict[Name, Value] = Field(
        default_factory=dict,
        max_length=MAX_SPARK_CONF,
        description="Spark settings; which keys a query may set is the platform's policy (docs/security.md).",
    )

    @property
    def auto_sized(self) -> bool:
        """local[N] with N chosen from the source's partitions."""
        return self.executors.instances == 0 and self.parallelism is None

    def task_slots(self, mode: Mode | str, partitions: int = 0) -> int:
        """Slots the query gets when its source has ``partitions`` partitions."""
        if self.executors.instances > 0:
            return self.executors.instances * self.executors.cores
        if self.parallelism is not None:
            return self.parallelism
        if Mode(mode).long_running:
            return max(DEFAULT_PARALLELISM, partitions + SLOT_HEADROOM)
        return DEFAULT_PARALLELISM


class RestartType(StrEnum):
    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"


class Backoff(Model):
    """The wait before a restart after a failure: initial, doubled for each restart in a row, at most max."""

    initial: Duration = Field(
        default="5s",
        description="Wait before the first restart, e.g. 5s, 1m; at least the platform's minBackoff, at most max.",
    )
    max: Duration = Field(default="5m", description="The longest wait between restarts, e.g. 5m, 1h.")


NODE_LOST_AFTER = "30s"  # restartPolicy.nodeLostAfter when unset
# ... for a driver that holds the query's Lease: fenced (app/driver/write_fence.py), it writes nothing once its hold
# lapses, so its replacement may start as soon as Kubernetes gives up on the node.
NODE_LOST_AFTER_FENCED = "5s"


class RestartPolicy(Model):
    """When a driver that failed or ended is replaced; every restart resumes from the checkpoint. A change
    here applies without a new driver."""

    type: RestartType = Field(
        default=RestartType.ALWAYS,
        description="Always: restart after a failure, and after an exit 0 too (except availableNow, which "
        "completes). OnFailure: restart after a failure; exit 0 completes the query. Never: a failure is final "
        "(phase Failed).",
    )
    # -1 rather than null for "unlimited": kubectl apply reads null as "remove the field".
    max_restarts: int = Field(
        default=10, ge=-1,
        description="Consecutive failed runs before Failed; -1: unlimited. At most the platform's maxRestarts.",
    )  # fmt: skip
    backoff: Backoff = Field(default_factory=Backoff)
    stable_after: Duration = Field(
        default="10m",
        description="Running this long resets the restart counter (status.restarts); at least the platform's minStableAfter.",
    )
    force_delete_after: Duration = Field(
        default="5m",
        description=(
            "A driver pod still Terminating this long after its grace period ended (its node or kubelet is gone) is "
            "force-deleted so the next driver can start. A standby query's Lease keeps such a driver from writing if it "
            "still runs; without standby, choose a time after which the node is surely down."
        ),
    )
    # None, not "30s", when unset (NODE_LOST_AFTER): what a driver's ConfigMap and status record of a spec
    # written before this field existed stays the same.
    node_lost_after: Duration | None = Field(
        default=None,
        description=(
            f"How long a driver pod stays on a node that is not ready or unreachable (the NoExecute taints "
            f"node.kubernetes.io/not-ready and /unreachable) before Kubernetes evicts it; unset: {NODE_LOST_AFTER_FENCED} "
            f"for a driver that holds the query's Lease (a standby or warm-upgrade query), {NODE_LOST_AFTER} otherwise "
            "(Kubernetes' own default is 5m). An evicted driver that holds the Lease is then force-deleted once its "
            "hold has expired; one without, after forceDeleteAfter. Applies to drivers started after a change."
        ),
    )
    in_place_restarts: int = Field(
        default=3,
        ge=0,
        le=100,
        description=(
            "A query that fails for a transient reason (a task failing past Spark's retries, a broker that stopped "
            "answering) is restarted from its checkpoint inside the running driver, this many times in a row "
            "without a commit in between, before the driver exits for a new pod; 0: always a new pod."
        ),
    )

    def node_lost_after_s(self, fenced: bool) -> int:
        """nodeLostAfter in whole seconds (a toleration's tolerationSeconds); unset, the default for a
        driver that holds the query's Lease (``fenced``) or not."""
        default = NODE_LOST_AFTER_FENCED if fenced else NODE_LOST_AFTER
        return math.ceil(duration_ms(self.node_lost_after or default) / 1000)

    @property
    def restart_limit(self) -> int | None:
        """The limit, or None when unlimited."""
        return None if self.max_restarts < 0 else self.max_restarts


class OnStall(StrEnum):
    RESTART = "restart"  # the job exits (retryable); the restart policy decides what follows
    REPORT = "report"  # only reported: condition Degraded, reason Stalled


class Health(Model):
    """When a running query counts as stalled: no commit for a while although input waits."""

    stall_after_intervals: int = Field(
        default=10,
        ge=1,
        le=100_000,
        description=(
            "No commit for this many checkpoint intervals (continuous), trigger intervals (microBatch) "
            "or batch durations (realTime) while the source has unread records: Stalled."
        ),
    )
    min_stall_time: Duration = Field(
        default="60s",
        description="Never Stalled sooner than this (covers start-up, slow batches and microBatch interval 0s).",
    )
    on_stall: OnStall = Field(
        default=OnStall.RESTART,
        description="restart: the job exits (retryable) and restartPolicy decides; report: condition Degraded only.",
    )


class UpgradeStrategy(StrEnum):
    WARM = "warm"  # the new driver warms up beside the running one, then takes over from the same checkpoint
    RESTART = "restart"  # the running driver is stopped first, then the new one starts cold
    BLUE_GREEN = "blueGreen"  # warm, and a change the checkpoint cannot take runs on a fresh one from blue's last commit


UPGRADE_READY_WITHIN = "5m"  # upgrade.readyWithin when unset


class Upgrade(Model):
    """How a running query takes a spec change its checkpoint can take."""

    strategy: UpgradeStrategy = Field(
        default=UpgradeStrategy.WARM,
        description=(
            "warm: a driver of the new spec starts beside the running one, warms up (JVM, SparkSession, its plan) "
            "and waits on the query's Lease; once it is Ready the running driver stops at a commit and releases "
            "the Lease, and the new one takes over from the same checkpoint. If it cannot start, the running driver "
            "goes on and status says why; if the cluster or quota has no room for it, a plain restart follows. "
            "restart: stop the running driver, then start the new one. blueGreen: as warm, and a change the "
            "checkpoint cannot take (which warm refuses, see checkpoint.onIncompatibleChange) runs on a fresh "
            "checkpoint that starts at exactly the offsets the running driver (blue) committed last; the old "
            "checkpoint is kept."
        ),
    )
    ready_within: Duration = Field(
        default=UPGRADE_READY_WITHIN,
        description="A new driver not Ready (warm) this long after it was created aborts the upgrade.",
    )


AUTOSCALING_WINDOW = "1m"  # autoscaling.stabilizationWindow when unset
AUTOSCALING_COOL_DOWN = "5m"  # autoscaling.coolDown when unset


class Autoscaling(Model):
    """Lag-driven sizing of the executors (controller.decide.autoscale): from the input rate, the backlog and the
    rate the query processes per busy second, the executors it needs to keep up at targetUtilization and to work
    off its backlog within catchUpDuration. status.autoscaling says what it would do and why; with recommendOnly
    false a microBatch query's running driver is resized to it in place, and a continuous or realTime query moves
    to a driver of that size."""

    min_executors: int = Field(default=1, ge=1, le=MAX_EXECUTORS, description="The fewest executors it recommends, at least 1.")
    max_executors: int = Field(
        ge=1, le=MAX_EXECUTORS,
        description="The most executors it recommends: at least minExecutors, within the platform's maxExecutors, "
        "maxCores and maxMemory counted as if runtime.executors.instances were this.",
    )  # fmt: skip
    target_utilization: float = Field(
        default=0.7, gt=0, le=1,
        description="The share of its busy time a query may use at the current input rate, above 0, at most 1: "
        "0.7 leaves 30% for bursts and catching up. Micro-batch: the time batches run against the wall clock.",
    )  # fmt: skip
    catch_up_duration: Duration = Field(
        default="5m", description="A backlog is to be worked off within this, beside the input, e.g. 5m."
    )
    stabilization_window: Duration = Field(
        default=AUTOSCALING_WINDOW,
        description="Rates are averaged over this window, and the recommendation changes at most once per window.",
    )
    cool_down: Duration = Field(
        default=AUTOSCALING_COOL_DOWN,
        description="After a scale-up, no smaller size is recommended for this long: the added executors first work "
        "off the backlog.",
    )
    recommend_only: bool = Field(
        default=True,
        description="true: report the recommended size in status.autoscaling and change nothing. false (backend pod): "
        "resize a microBatch query's running driver in place; move a continuous or realTime query to a driver of "
        "the recommended size (a warm upgrade with runtime.standby, else a restart). Refused for availableNow.",
    )


class QuerySpec(Model):
    """spec of a StreamingQuery."""

    source: Source
    transforms: list[Transform] = Field(
        default_factory=list, max_length=64,
        description="The steps from source to sink, applied in order (at most 64); none: rows go to the sink as read. "
        "Continuous mode takes map-like steps only: no aggregation, join, ordering or current-time function.",
    )  # fmt: skip
    sink: Sink
    trigger: Trigger
    output_mode: OutputMode | None = Field(
        default=None,
        description="What a batch writes: append (new rows), update (rows that changed), complete (the whole "
        "result, for aggregations). Unset: append, update in realTime; continuous takes append only, realTime "
        "update only.",
    )
    checkpoint: Checkpoint
    runtime: Runtime = Field(default_factory=Runtime)
    restart_policy: RestartPolicy = Field(default_factory=RestartPolicy)
    health: Health = Field(default_factory=Health)
    # None when unset: the stored form of a spec written before this field existed stays the same.
    upgrade: Upgrade | None = Field(
        default=None,
        description="How a spec change reaches a running query; unset: strategy warm, readyWithin "
        f"{UPGRADE_READY_WITHIN}. Warm upgrades need backend pod, no executors or runtime.standby, and a checkpoint both drivers reach "
        "(an object store, a persistentVolumeClaim or a hostPath); otherwise a change is a plain restart. Changing "
        "suspend, restartPolicy or upgrade needs no new driver.",
    )
    # None when unset: the stored form of a spec written before this field existed stays the same.
    autoscaling: Autoscaling | None = Field(
        default=None,
        description="Recommend the executors the query needs from its input rate and backlog (status.autoscaling); "
        "runtime.executors.instances stays the size it runs with. Unset: no recommendation.",
    )
    suspend: bool = Field(
        default=False,
        description="true: the driver is stopped and deleted, the checkpoint kept (phase Suspended); false again: "
        "the query resumes from the checkpoint.",
    )
    restart_nonce: Annotated[str, StringConstraints(max_length=MAX_NAME)] | None = Field(
        default=None,
        description="Change it (any new value, e.g. a timestamp) to restart the driver with the same spec: a plain "
        "restart from the checkpoint.",
    )

    @property
    def mode(self) -> Mode:
        return Mode(self.trigger.kind)

    @property
    def upgrade_policy(self) -> Upgrade:
        return self.upgrade or Upgrade()

    @property
    def warm_upgrades(self) -> bool:
        """Spec changes reach it warm: its drivers are fenced by the query's Lease. Pod backend only
        (spark-operator submits the driver itself), a checkpoint the next driver pod reaches too, and no
        executors unless the query has a standby: the platform's caps count a second driver's executors
        (contract.capacity) only where a second driver runs anyway. Two drivers' executors never mix:
        each dials its own driver's pod IP (app.pipeline.session), and one waiting on the Lease starts none."""
        return (self.upgrade_policy.strategy is not UpgradeStrategy.RESTART and self.runtime.backend is Backend.POD
                and (self.runtime.executors.instances == 0 or bool(self.runtime.standby)) and self.checkpoint.shared)  # fmt: skip

    @property
    def commit_interval(self) -> str | None:
        """The trigger's duration (as written), None for availableNow."""
        field = self.mode.interval_field
        return None if field is None else self.trigger.value.model_dump(by_alias=True)[field]

    @property
    def commit_interval_ms(self) -> int:
        """How often the query commits when all is well (0: as fast as it can)."""
        interval = self.commit_interval
        return 0 if interval is None else duration_ms(interval)

    @property
    def stall_after_ms(self) -> int:
        """No commit for this long while input waits: the query is stalled."""
        return max(self.health.stall_after_intervals * self.commit_interval_ms, duration_ms(self.health.min_stall_time))

    @property
    def effective_output_mode(self) -> OutputMode:
        return self.output_mode if self.output_mode is not None else self.mode.default_output
