"""The exactly-once Kafka sink: each micro-batch written in Kafka transactions.

``foreachBatch`` hands the driver each batch with its id. The batch's rows are
hashed over ``transactions.producers`` writers (a shuffle: which writer writes a
row depends on the row only, never on how Spark ordered the source's ranges),
and each writer, in its own task:

1. makes a producer with the transactional id ``streamq.<namespace>.<query>.<writer>``
   and calls ``init_transactions``: this fences every earlier producer with that id
   (a killed driver's task, a failed or speculative attempt, a zombie executor) and
   aborts the transaction it left open. Fencing comes first: a check before it
   leaves a window in which a zombie commits after the check;
2. reads, ``read_committed``, the last marker in its partition of the query's
   control topic, and skips the batch when the marker says this batch (of this
   checkpoint) is already committed;
3. else writes its rows and the marker (checkpoint id, batch id, writer) in one
   transaction and commits it.

The decisions (names, marker, when to skip) are app.contract.exactly_once; the
argument is in docs/architecture.md ("Exactly-once Kafka output"). Credentials are
read on the driver from the mounted Secret and travel in the task closure to the
writers, as Spark's own Kafka writer ships its JAAS option; they are never logged.
"""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import time
from itertools import chain
from pathlib import Path

from app.checkpoints.reader import read_checkpoint
from app.contract import failpoints
from app.contract.exactly_once import (
    WRITER_SETTINGS,
    Marker,
    already_written,
    control_topic,
    query_prefix,
    reader_group,
)
from app.contract.failpoints import Failpoint
from app.contract.spec import Delivery, QuerySpec, duration_ms
from app.pipeline.credentials import librdkafka_auth_config, librdkafka_tls_config

log = logging.getLogger("streamq.exactly_once")
DEFAULT_NAMESPACE = "default"  # a job run outside Kubernetes (streamq dev, tests)
SEND_TIMEOUT_S = 60.0
MARKER_WINDOW = 64  # offsets read back from a control partition's end first (a marker + a commit marker per batch)
HASHED_COLUMNS = ("key", "value", "partition")  # what decides a row's writer: what Kafka gets of it


def namespace_of(namespace: str | None) -> str:
    return namespace or os.environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE


def connection_config(spec: QuerySpec) -> dict[str, str]:
    """How every client of the sink reaches the brokers, credentials included: never log it."""
    kafka = spec.sink.kafka
    return {"bootstrap.servers": kafka.bootstrap_servers, **librdkafka_auth_config(kafka.auth, "spec.sink.kafka.auth"),
            **librdkafka_tls_config(kafka.tls, kafka.auth, "spec.sink.kafka.tls")}  # fmt: skip


def producer_settings(spec: QuerySpec) -> dict[str, str]:
    """The producers' own settings: the sink's kafka.* options the rules let through."""
    settings = {"linger.ms": "5"}
    for key, value in spec.sink.kafka.options.items():
        setting = key[len("kafka.") :].lower()
        if setting in WRITER_SETTINGS:  # the rules refused every other option
            settings[setting] = value
    return settings


def at_least_once(spec: QuerySpec) -> QuerySpec:
    """The spec with Spark's own Kafka writer: what validation starts, so that `streamq validate`
    never runs a transactional writer that would fence the running query's."""
    kafka = spec.sink.kafka
    if kafka is None or not kafka.exactly_once:
        return spec
    plain = kafka.model_copy(update={"delivery": Delivery.AT_LEAST_ONCE, "transactions": None})
    return spec.model_copy(update={"sink": spec.sink.model_copy(update={"kafka": plain})})


class ExactlyOnceSink:
    """The ``foreachBatch`` function of one query start (driver side)."""

    def __init__(self, spec: QuerySpec, query: str, namespace: str | None, checkpoint_location: str | None = None):
        kafka = spec.sink.kafka
        self.location = checkpoint_location or spec.checkpoint.location
        settings = kafka.transaction_settings
        namespace = namespace_of(namespace)
        self.query = query
        self.config = connection_config(spec)
        self.producer_settings = producer_settings(spec)
        self.topic = kafka.topic
        self.control = control_topic(namespace, query)
        self.prefix = query_prefix(namespace, query)
        self.group = reader_group(namespace, query)
        self.writers = settings.producers
        self.timeout_ms = duration_ms(settings.timeout)
        self._checkpoint_id: str | None = None
        self._control_ready = False

    def __call__(self, df, batch_id: int) -> None:
        if not self._control_ready:
            ensure_control_topic(self.config, self.control, self.writers)
            self._control_ready = True
        checkpoint = self._checkpoint()
        columns = [c for c in HASHED_COLUMNS if c in df.columns]
        if "value" not in columns:
            raise ValueError(f"the Kafka sink needs a column named value (the query gives {', '.join(df.columns)})")
        readers = {**self.config, "group.id": self.group}
        task = WriteTask({**self.config, **self.producer_settings}, readers, self.topic, self.control, self.prefix,
                         self.writers, self.timeout_ms, checkpoint, batch_id, failpoints.armed())  # fmt: skip
        df.select(*columns).repartition(self.writers, *columns).foreachPartition(task)

    def _checkpoint(self) -> str:
        """The query id Spark keeps in the checkpoint's metadata (written when the query is created,
        before its first batch): the same for every run on this checkpoint, new with a new one."""
        if self._checkpoint_id is None:
            query_id = read_checkpoint(self.location).query_id
            if query_id is None:
                raise RuntimeError(f"the checkpoint {self.location} has no query id: exactlyOnce cannot name its batches")
            self._checkpoint_id = query_id
        return self._checkpoint_id


def ensure_control_topic(config: dict[str, str], topic: str, partitions: int) -> None:
    """The control topic, compacted (the last marker per writer is all that is read, and must outlive
    any retention), with a partition per writer."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient(config)
    found = admin.list_topics(topic, timeout=30).topics.get(topic)
    if found is None or found.error is not None:
        futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, config={"cleanup.policy": "compact"})])
        try:
            futures[topic].result(30)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    elif len(found.partitions) < partitions:
        admin.create_partitions([NewPartitions(topic, partitions)])[topic].result(30)
    # A topic just made has its partitions' leaders a moment later: the writers read them at once.
    deadline = time.monotonic() + 30
    while True:
        found = admin.list_topics(topic, timeout=30).topics.get(topic)
        ready = found is not None and found.error is None and len(found.partitions) >= partitions
        if ready and all(p.leader >= 0 for p in found.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the control topic {topic} has no leader for each of its {partitions} partitions")
        time.sleep(0.2)


class WriteTask:
    """One writer's part of one batch, in a Spark task (pickled to the executors)."""

    def __init__(self, producer_config, config, topic, control, prefix, writers, timeout_ms, checkpoint, batch, failpoint):
        self.producer_config, self.config, self.topic, self.control, self.prefix = producer_config, config, topic, control, prefix
        self.writers, self.timeout_ms, self.checkpoint, self.batch = writers, timeout_ms, checkpoint, batch
        self.failpoint = failpoint

    def __call__(self, rows) -> None:
        from confluent_kafka import Producer
        from pyspark import TaskContext

        rows = iter(rows)
        first = next(rows, None)
        if first is None:
            return  # this writer has no rows in this batch, and has none on any replay of it
        writer = TaskContext.get().partitionId()
        producer = Producer({**self.producer_config, "transactional.id": f"{self.prefix}{writer}",
                             "transaction.timeout.ms": str(self.timeout_ms)})  # fmt: skip
        producer.init_transactions(SEND_TIMEOUT_S)  # fence first, then look
        if already_written(last_marker(self.config, self.control, writer), self.checkpoint, self.batch, writer):
            return
        producer.begin_transaction()
        try:
            for row in chain([first], rows):
                _send(producer, self.topic, row)
            marker = Marker(self.checkpoint, self.batch, writer, self.writers)
            _send_raw(producer, self.control, str(writer).encode(), marker.encode(), writer)
            if self.failpoint is Failpoint.KILL_BEFORE_COMMIT and _first_time(self.prefix, self.checkpoint, self.batch, writer):
                producer.flush(SEND_TIMEOUT_S)  # the rows are on the broker, in a transaction left open
                os.kill(os.getpid(), signal.SIGKILL)
            producer.commit_transaction(SEND_TIMEOUT_S)
        except BaseException:
            try:
                producer.abort_transaction(SEND_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - fenced or broker gone: the next incarnation's init aborts it
                pass
            raise


def _send(producer, topic: str, row) -> None:
    fields = row.asDict()
    partition = fields.get("partition")
    _send_raw(producer, topic, _bytes(fields.get("key")), _bytes(fields["value"]), partition)


def _send_raw(producer, topic: str, key, value, partition) -> None:
    extra = {} if partition is None else {"partition": int(partition)}
    while True:
        try:
            producer.produce(topic, value=value, key=key, **extra)
            producer.poll(0)
            return
        except BufferError:  # the local queue is full: let it drain
            producer.poll(0.1)


def _bytes(value):
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray):
        return bytes(value)
    return str(value).encode()


def last_marker(config: dict[str, str], control: str, writer: int) -> Marker | None:
    """The last committed marker in the writer's control partition (read_committed: aborted ones are
    skipped). Read back from the end in growing windows: each batch adds a marker and a commit marker.
    The sink's ``config`` names the query's group (``reader_group``: under its namespace's ACL prefix);
    a topic made by hand gets one named after it."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"group.id": f"{control}-reader", **config, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})  # fmt: skip
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(control, writer), timeout=SEND_TIMEOUT_S, cached=False)
        window = MARKER_WINDOW
        while high > low:
            start = max(low, high - window)
            consumer.assign([TopicPartition(control, writer, start)])
            found = None
            while True:
                msg = consumer.poll(SEND_TIMEOUT_S)
                if msg is None:
                    raise TimeoutError(f"no answer reading {control}[{writer}] from offset {start}")
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        break
                    raise RuntimeError(f"reading {control}[{writer}]: {msg.error()}")
                marker = Marker.decode(msg.value())
                if marker is not None and marker.writer == writer:
                    found = marker
            if found is not None or start == low:
                return found
            window *= 4
        return None
    finally:
        consumer.close()


def _first_time(prefix: str, checkpoint: str, batch: int, writer: int) -> bool:
    """The test failpoint kills each (batch, writer) once: the replay must get through."""
    if batch % 3 != 1 or writer != 0:
        return False
    flag = Path(tempfile.gettempdir()) / f"{prefix}{checkpoint}-{batch}-{writer}.killed"
    if flag.exists():
        return False
    flag.touch()
    return True
