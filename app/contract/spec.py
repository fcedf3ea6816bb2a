"""The StreamingQuery spec: the one model the job reads, the controller validates
with, and the CRD schema is generated from.

Field names are camelCase on the wire (YAML, the Kubernetes resource) and
snake_case in Python. Unknown fields are refused everywhere, so a typo never
silently turns into a default.

Rules that involve one field live here as field constraints; rules that tie
several fields together live in ``app.contract.rules`` so they can report every
problem at once, with a path the user can find in their YAML.
"""

from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from kubernetes.utils import parse_duration
from pydantic.alias_generators import to_camel

from app.contract.modes import Mode, OutputMode

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
# cores, memory a query may use) are the platform's policy: app.contract.policy.
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
    def _exactly_one(self):
        chosen = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(chosen) != 1:
            choices = ", ".join(to_camel(n) for n in type(self).model_fields)
            raise ValueError(f"set exactly one of: {choices} (got {len(chosen)})")
        return self

    @property
    def kind(self) -> str:
        return next(to_camel(n) for n in type(self).model_fields if getattr(self, n) is not None)

    @property
    def value(self):
        return getattr(self, next(n for n in type(self).model_fields if getattr(self, n) is not None))


# --- credentials -------------------------------------------------------------


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


class SecurityProtocol(StrEnum):
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SecretKeyRef(Model):
    """A Kubernetes Secret, mounted as files into the driver; never copied into the spec."""

    name: K8sName
    username_key: SecretKey = "username"
    password_key: SecretKey = "password"


class KafkaAuth(Model):
    mechanism: SaslMechanism = SaslMechanism.PLAIN
    security_protocol: SecurityProtocol = SecurityProtocol.SASL_PLAINTEXT
    secret_ref: SecretKeyRef


# --- source ------------------------------------------------------------------


class KafkaSource(Model):
    bootstrap_servers: BootstrapServers
    topics: list[Name] | None = Field(default=None, min_length=1, max_length=MAX_LIST)
    pattern: Annotated[str, StringConstraints(min_length=1, max_length=MAX_VALUE)] | None = None
    starting_offsets: Annotated[str, StringConstraints(min_length=1, max_length=MAX_SQL)] = Field(
        default="latest",
        description='"earliest", "latest", or Spark\'s JSON form {"topic":{"0":42}}',
    )
    options: dict[Name, Value] = Field(
        default_factory=dict, max_length=MAX_OPTIONS, description="Extra Spark Kafka source options."
    )
    auth: KafkaAuth | None = None


class RateSource(Model):
    rows_per_second: int = Field(default=10, ge=1, le=10_000_000)
    num_partitions: int = Field(default=1, ge=1, le=1024)


class Source(OneOf):
    kafka: KafkaSource | None = None
    rate: RateSource | None = None


# --- transforms --------------------------------------------------------------


class WithColumn(Model):
    name: Name
    expr: Expression


class Transform(OneOf):
    """One step of the pipeline, applied in order."""

    where: Expression | None = Field(default=None, description="A SQL boolean expression.")
    select: list[Expression] | None = Field(
        default=None, min_length=1, max_length=MAX_LIST, description="SQL expressions."
    )
    with_column: WithColumn | None = None
    drop: list[Name] | None = Field(default=None, min_length=1, max_length=MAX_LIST)
    sql: Annotated[str, StringConstraints(min_length=1, max_length=MAX_SQL)] | None = Field(
        default=None, description="A SELECT over the previous step, a view named `input`."
    )


# --- sink --------------------------------------------------------------------


class Delivery(StrEnum):
    AT_LEAST_ONCE = "atLeastOnce"  # Spark's own Kafka writer: a replayed batch writes its records again
    EXACTLY_ONCE = "exactlyOnce"  # app.pipeline.exactly_once: Kafka transactions, one per batch and producer


class KafkaTransactions(Model):
    """How an exactlyOnce sink writes (docs/architecture.md, "Exactly-once Kafka output")."""

    producers: int = Field(
        default=2, ge=1, le=256,
        description="Transactional producers per batch: the batch's rows are hashed over this many writers. "
        "Change it only after the query stopped cleanly (a batch half written under one count is not "
        "recognised under another).",
    )
    timeout: Duration = Field(
        default="60s",
        description="transaction.timeout.ms: a transaction left open by a crashed writer is aborted by the broker "
        "after this long at the latest (a restarted query aborts it sooner). Longer than the trigger interval, "
        "at most 15m (the broker's transaction.max.timeout.ms default).",
    )


class KafkaSink(Model):
    bootstrap_servers: BootstrapServers
    topic: Name
    options: dict[Name, Value] = Field(
        default_factory=dict, max_length=MAX_OPTIONS, description="Extra Spark Kafka sink options."
    )
    auth: KafkaAuth | None = None
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


class ConsoleSink(Model):
    num_rows: int = Field(default=20, ge=1, le=100_000)
    truncate: bool = False


class MemorySink(Model):
    """For tests: rows land in a table named after the query, inside the driver."""

    table: Name


class Sink(OneOf):
    kafka: KafkaSink | None = None
    console: ConsoleSink | None = None
    memory: MemorySink | None = None


# --- trigger -----------------------------------------------------------------


class ContinuousTrigger(Model):
    checkpoint_interval: Duration = "1s"


class RealTimeTrigger(Model):
    batch_duration: Duration = "5m"


class MicroBatchTrigger(Model):
    interval: Duration = "0s"


class AvailableNowTrigger(Model):
    pass


class Trigger(OneOf):
    continuous: ContinuousTrigger | None = None
    real_time: RealTimeTrigger | None = None
    micro_batch: MicroBatchTrigger | None = None
    available_now: AvailableNowTrigger | None = None


# --- checkpoint, runtime, lifecycle -------------------------------------------


class IncompatibleChange(StrEnum):
    REFUSE = "refuse"
    NEW_CHECKPOINT = "newCheckpoint"


class PvcVolume(Model):
    claim_name: K8sName


class CheckpointVolume(Model):
    persistent_volume_claim: PvcVolume | None = None
    empty_dir: dict[Name, Value] | None = Field(
        default=None, max_length=8, description="Test clusters only: lost with the pod."
    )
    host_path: LongStr | None = Field(default=None, description="Single-node clusters only.")


# An S3 endpoint: a host[:port], or a URL with http:// or https:// (Hadoop's fs.s3a.endpoint).
S3_ENDPOINT_PATTERN = r"^(https?://)?[A-Za-z0-9._\-\[\]:]+(/[^\s]*)?$"
S3_REGION_PATTERN = r"^[a-z0-9-]+$"


class S3SecretRef(Model):
    """A Secret with the access key pair, mounted into the driver and read at start; never copied anywhere."""

    name: K8sName
    access_key_id_key: SecretKey = "accessKeyId"
    secret_access_key_key: SecretKey = "secretAccessKey"


class S3Credentials(Model):
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
    location: LongStr = Field(description="A path or URI Spark can write; mounted from `volume` in the driver.")
    volume: CheckpointVolume | None = None
    s3: S3Checkpoint | None = Field(default=None, description="Settings of the store behind an s3a:// location.")
    on_incompatible_change: IncompatibleChange = IncompatibleChange.REFUSE

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


CORE_REQUEST_DESCRIPTION = (
    "CPU the pod requests from the scheduler, a quantity such as 500m; unset: `cores`. "
    "Lower it to pack pods onto small nodes; Spark still runs `cores` tasks at once."
)


class DriverResources(Model):
    cores: int = Field(default=1, ge=1, le=MAX_CORES)
    core_request: Quantity | None = Field(default=None, description=CORE_REQUEST_DESCRIPTION)
    memory: Quantity = "1Gi"

    @property
    def cpu_request(self) -> str:
        return self.core_request or str(self.cores)


class ExecutorResources(Model):
    instances: int = Field(
        default=0, ge=0, le=MAX_EXECUTORS, description="0 runs Spark local[parallelism] inside the driver pod."
    )
    cores: int = Field(default=1, ge=1, le=MAX_CORES)
    core_request: Quantity | None = Field(default=None, description=CORE_REQUEST_DESCRIPTION)
    memory: Quantity = "1Gi"


class Runtime(Model):
    backend: Backend = Backend.POD
    image: Annotated[str, StringConstraints(min_length=1, max_length=1024)] | None = Field(
        default=None, description="Defaults to the operator's configured job image."
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
    service_account_name: K8sName | None = None
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
    initial: Duration = "5s"
    max: Duration = "5m"


NODE_LOST_AFTER = "30s"  # restartPolicy.nodeLostAfter when unset
# ... for a driver that holds the query's Lease: fenced (app/driver/write_fence.py), it writes nothing once its hold
# lapses, so its replacement may start as soon as Kubernetes gives up on the node.
NODE_LOST_AFTER_FENCED = "5s"


class RestartPolicy(Model):
    type: RestartType = RestartType.ALWAYS
    # -1 rather than null for "unlimited": kubectl apply reads null as "remove the field".
    max_restarts: int = Field(
        default=10, ge=-1, description="Consecutive failed runs before Failed; -1: unlimited."
    )
    backoff: Backoff = Field(default_factory=Backoff)
    stable_after: Duration = Field(default="10m", description="Running this long resets the restart counter.")
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
    """How a running query takes a spec change its checkpoint can take (controller.decide.upgrade)."""

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


class QuerySpec(Model):
    """spec of a StreamingQuery."""

    source: Source
    transforms: list[Transform] = Field(default_factory=list, max_length=64)
    sink: Sink
    trigger: Trigger
    output_mode: OutputMode | None = Field(default=None, description="Defaults to append (update in realTime).")
    checkpoint: Checkpoint
    runtime: Runtime = Field(default_factory=Runtime)
    restart_policy: RestartPolicy = Field(default_factory=RestartPolicy)
    health: Health = Field(default_factory=Health)
    # None when unset: the stored form of a spec written before this field existed stays the same.
    upgrade: Upgrade | None = Field(default=None, description="How a spec change reaches a running query.")
    suspend: bool = False
    restart_nonce: Annotated[str, StringConstraints(max_length=MAX_NAME)] | None = Field(
        default=None, description="Change it to force a restart."
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
        (spark-operator submits the driver itself), and no executors: they find their driver through
        the query's one driver Service, which would name both drivers during a hand-over), and a
        checkpoint the next driver pod reaches too."""
        return (self.upgrade_policy.strategy is not UpgradeStrategy.RESTART and self.runtime.backend is Backend.POD
                and self.runtime.executors.instances == 0 and self.checkpoint.shared)  # fmt: skip

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
