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
3. else writes the marker (checkpoint id, batch id, writer) and its rows in one
   transaction and commits it.

Steps 1 and 2 run once per Python worker and writer: the producer is kept for the next
batch with the marker it committed, and goes on from step 3 while the broker takes its
marker (no other producer has fenced it since); else the writer starts over at step 1.
With one writer there is no shuffle (``coalesce(1)``). With ``transactions.writer: driver`` the
driver is writer 0 of 1: the batch's tasks hand their rows to it (``collect``) and its producer,
kept while it runs, goes through the same steps: no Python worker, one job per batch.

The decisions (names, marker, when to skip) are contract.exactly_once; the
argument is in docs/architecture.md ("Exactly-once Kafka output"). Credentials are
read on the driver from the mounted Secret and travel in the task closure to the
writers, as Spark's own Kafka writer ships its JAAS option; they are never logged.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

from app.checkpoints.reader import read_checkpoint
from app.pipeline.credentials import librdkafka_auth_config, librdkafka_tls_config
from contract import failpoints
from contract.exactly_once import (
    WRITER_SETTINGS,
    Marker,
    already_written,
    control_topic,
    query_prefix,
    reader_group,
    replay_writers,
)
from contract.failpoints import Failpoint
from contract.spec import Delivery, QuerySpec, duration_ms

log = logging.getLogger("streamq.exactly_once")
DEFAULT_NAMESPACE = "default"  # a job run outside Kubernetes (streamq dev, tests)
SEND_TIMEOUT_S = 60.0
MARKER_WINDOW = 64  # offsets read back from a control partition's end first (a marker + a commit marker per batch)
HASHED_COLUMNS = ("key", "value", "partition")  # what decides a row's writer: what Kafka gets of it
# A file the driver and the writers append one JSON line per batch and writer to, with the seconds
# each step took (bench.latency sets it; docs/latency-attribution.md reads it). Unset: nothing is timed.
SPANS_ENV = "STREAMQ_EXACTLY_ONCE_SPANS"


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
        self.from_driver = kafka.writes_from_driver
        self.timeout_ms = duration_ms(settings.timeout)
        self._checkpoint_id: str | None = None
        self._partitions: int | None = None  # of the control topic, once made sure of
        self._started = False  # the first batch ran (it alone can be one an earlier start began)
        self.spans = os.environ.get(SPANS_ENV) or None

    def __call__(self, df, batch_id: int) -> None:
        started = time.monotonic()
        if self._partitions is None:
            self._partitions = ensure_control_topic(self.config, self.control, self.writers)
        checkpoint = self._checkpoint()
        columns = [c for c in HASHED_COLUMNS if c in df.columns]
        if "value" not in columns:
            raise ValueError(f"the Kafka sink needs a column named value (the query gives {', '.join(df.columns)})")
        readers = {**self.config, "group.id": self.group}

        def task(writers: int) -> WriteTask:
            return WriteTask({**self.config, **self.producer_settings}, readers, self.topic, self.control, self.prefix,
                             writers, self.timeout_ms, checkpoint, batch_id, failpoints.armed(), self.spans)  # fmt: skip

        writers = self.writers
        if not self._started:  # the first batch of this start: it may be one an earlier start began
            writers = replay_writers(task(writers).fence_all(self._partitions, keep=0 if self.from_driver else None),
                                     checkpoint, batch_id, self.writers)  # fmt: skip
            self._started = True
            if writers != self.writers:
                log.warning("batch %d was begun under %d writers and not finished: finishing it under %d, "
                            "then %d writers from batch %d on", batch_id, writers, writers, self.writers, batch_id + 1)  # fmt: skip
        rows = df.select(*columns)
        if self.from_driver and writers == 1:
            # The batch's tasks read and transform their source ranges side by side and hand the rows to the
            # driver, whose one producer (kept while it runs, fenced by the next incarnation) writes them:
            # one job, no Python worker. Writer 0 of 1: the transactional id and marker of producers 1.
            task(writers).write(iter(rows.collect()), writer=0)
        else:
            # One writer takes every row, whatever their order: no shuffle is needed to make that so, and a
            # coalesce runs the source, the transforms and the writer in one task (one stage, not two).
            rows = rows.coalesce(1) if writers == 1 else rows.repartition(writers, *columns)
            rows.foreachPartition(task(writers))
        if self.spans:
            _record(self.spans, {"side": "driver", "batch": batch_id, "foreachBatch": time.monotonic() - started})

    def _checkpoint(self) -> str:
        """The query id Spark keeps in the checkpoint's metadata (written when the query is created,
        before its first batch): the same for every run on this checkpoint, new with a new one."""
        if self._checkpoint_id is None:
            query_id = read_checkpoint(self.location).query_id
            if query_id is None:
                raise RuntimeError(f"the checkpoint {self.location} has no query id: exactlyOnce cannot name its batches")
            self._checkpoint_id = query_id
        return self._checkpoint_id


def ensure_control_topic(config: dict[str, str], topic: str, partitions: int) -> int:
    """The control topic, compacted (the last marker per writer is all that is read, and must outlive
    any retention), with a partition per writer; returns its partitions (more when an earlier start
    had more writers: a topic's partitions are never taken away)."""
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
            return len(found.partitions)
        if time.monotonic() > deadline:
            raise TimeoutError(f"the control topic {topic} has no leader for each of its {partitions} partitions")
        time.sleep(0.2)


@dataclass
class _Kept:
    """A writer's transactional producer, kept for the life of its Python worker (Spark reuses them),
    with the last marker it committed or read. While no other producer has taken its transactional
    id, every commit in its control partition since its ``init_transactions`` is its own, so that
    marker is the partition's last: the next batch needs neither a new ``init_transactions`` nor a
    read. Whether another has taken the id is asked of the broker, not assumed: the kept producer
    sends the marker first and waits for it; a fenced producer learns it then, and the writer starts
    over as a new one would (docs/architecture.md, "Producers kept between batches")."""

    config: dict[str, str]
    producer: Any
    last: Marker | None = None


_KEPT: dict[str, _Kept] = {}  # by transactional id, in this Python worker


@dataclass
class _Timer:
    """Seconds per step of one writer's part of one batch (the spans file; nothing when unset)."""

    path: str | None
    record: dict[str, Any] = field(default_factory=dict)
    _at: float = field(default_factory=time.monotonic)

    def step(self, name: str) -> None:
        now = time.monotonic()
        self.record[name] = self.record.get(name, 0.0) + now - self._at
        self._at = now

    def done(self, **facts: Any) -> None:
        if self.path:
            _record(self.path, {**self.record, **facts})


def _record(path: str, line: dict[str, Any]) -> None:
    with open(path, "a") as out:  # one write per line: lines of concurrent writers stay whole
        out.write(json.dumps(line) + "\n")


class WriteTask:
    """One writer's part of one batch, in a Spark task (pickled to the executors)."""

    def __init__(self, producer_config, config, topic, control, prefix, writers, timeout_ms, checkpoint, batch, failpoint,
                 spans=None):  # fmt: skip
        self.producer_config, self.config, self.topic, self.control, self.prefix = producer_config, config, topic, control, prefix
        self.writers, self.timeout_ms, self.checkpoint, self.batch = writers, timeout_ms, checkpoint, batch
        self.failpoint, self.spans = failpoint, spans

    def __call__(self, rows) -> None:
        self.write(iter(rows))

    def write(self, rows: Iterator[Any], writer: int | None = None) -> None:
        """Writes ``rows`` as ``writer`` (in a task: the task's partition)."""
        timer = _Timer(self.spans)
        first = next(rows, None)
        if first is None:
            return  # this writer has no rows in this batch, and has none on any replay of it
        where = "the driver" if writer is not None else "a task"
        if writer is None:
            from pyspark import TaskContext

            writer = TaskContext.get().partitionId()
        timer.step("firstRow")
        marker = Marker(self.checkpoint, self.batch, writer, self.writers)
        kept, how = self._kept(writer, marker, timer)
        if kept is None:
            timer.done(side="writer", batch=self.batch, writer=writer, producer=how, rows=0, skipped=True)
            return
        producer = kept.producer
        sent = 1
        try:
            for row in chain([first], rows):
                _send(producer, self.topic, row)
                sent += 1
            timer.step("produce")
            self._fail_on_purpose(producer, writer, where)
            producer.commit_transaction(SEND_TIMEOUT_S)
            timer.step("commit")
        except _Abandoned:
            raise  # the failpoint: its producer stays alive, its transaction open
        except BaseException:
            _KEPT.pop(self._id(writer), None)  # the next batch starts with init_transactions
            try:
                producer.abort_transaction(SEND_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - fenced or broker gone: the next incarnation's init aborts it
                pass
            raise
        kept.last = marker
        timer.done(side="writer", batch=self.batch, writer=writer, producer=how, rows=sent - 1, skipped=False)

    def _id(self, writer: int) -> str:
        return f"{self.prefix}{writer}"

    def _config(self, writer: int) -> dict[str, str]:
        return {**self.producer_config, "transactional.id": self._id(writer), "transaction.timeout.ms": str(self.timeout_ms)}

    def _fence(self, writer: int, timer: _Timer | None = None) -> _Kept:
        """A new producer for ``writer``'s id, kept in this process: its ``init_transactions`` fences every
        earlier producer with the id and aborts what it left open; then the marker it finds is final."""
        _KEPT.pop(self._id(writer), None)
        from confluent_kafka import Producer

        producer = Producer(self._config(writer))
        producer.init_transactions(SEND_TIMEOUT_S)  # fence first, then look
        if timer is not None:
            timer.step("init")
        kept = _Kept(self._config(writer), producer, last_marker(self.config, self.control, writer))
        if timer is not None:
            timer.step("marker")
        _KEPT[self._id(writer)] = kept
        return kept

    def fence_all(self, partitions: int, keep: int | None) -> list[Marker | None]:
        """The last committed marker of each of the control topic's ``partitions``, each read after a new
        producer for its writer's id fenced every earlier one (a zombie of an earlier start cannot commit
        after the look). Only writer ``keep``'s producer is kept for the batch (the driver's own)."""
        lasts = []
        for writer in range(partitions):
            lasts.append(self._fence(writer).last)
            if writer != keep:
                _KEPT.pop(self._id(writer), None)
        return lasts

    def _fail_on_purpose(self, producer, writer: int, where: str) -> None:
        """The failpoints between the rows and the commit (tests only: contract.failpoints)."""
        point = self.failpoint
        if (
            point is None
            or _FAILING_WRITER.get(point) != writer
            or not _first_time(self.prefix, self.checkpoint, self.batch, writer)
        ):
            return
        if point is Failpoint.HALF_WRITE:
            self._wait_until_written(0)
        producer.flush(SEND_TIMEOUT_S)  # the rows are on the broker, in a transaction left open
        if point is Failpoint.KILL_BEFORE_COMMIT:
            os.kill(os.getpid(), signal.SIGKILL)
        _KEPT.pop(self._id(writer), None)
        raise _Abandoned(f"failpoint {point}: writer {writer} of batch {self.batch} left its transaction open in {where}")

    def _wait_until_written(self, writer: int, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not already_written(last_marker(self.config, self.control, writer), self.checkpoint, self.batch, writer):
            if time.monotonic() > deadline:
                return  # the test finds the batch not half written, and says so
            time.sleep(0.2)

    def _kept(self, writer: int, marker: Marker, timer: _Timer) -> tuple[_Kept | None, str]:
        """The writer's producer with a transaction begun and this batch's marker sent in it, and
        whether it was kept from an earlier batch ("kept"), taken over from a fenced one ("fenced") or
        made ("new"). None (the batch is already committed) when the last marker says so."""
        kept = _KEPT.get(self._id(writer))
        how = "new"
        if kept is not None and kept.config == self._config(writer):
            if already_written(kept.last, self.checkpoint, self.batch, writer):
                return None, "kept"
            if _begin_with_marker(kept.producer, self.control, marker):
                timer.step("begin")
                return kept, "kept"
            how = "fenced"  # another producer took the id since: start over as a new producer would
        timer.step("begin")
        kept = self._fence(writer, timer)
        if already_written(kept.last, self.checkpoint, self.batch, writer):
            return None, how
        kept.producer.begin_transaction()
        _send_raw(kept.producer, self.control, str(writer).encode(), marker.encode(), writer)
        timer.step("begin")
        return kept, how


class _Abandoned(RuntimeError):
    """The abandon-before-commit failpoint failing a writer's task on purpose."""


def _begin_with_marker(producer, control: str, marker: Marker) -> bool:
    """Begins a transaction on a kept producer and sends the batch's marker in it, waiting for the
    broker to take it: False, the transaction aborted, when the producer was fenced (another producer
    took its transactional id) or cannot go on for another reason."""
    errors: list[Any] = []

    def delivered(err, _msg) -> None:
        if err is not None:
            errors.append(err)

    # Any failure at all means starting over as a new producer would (init_transactions, then the
    # marker read): that path is safe whatever state this one is in, so nothing here is told apart.
    try:
        producer.begin_transaction()
        producer.produce(control, value=marker.encode(), key=str(marker.writer).encode(), partition=marker.writer,
                         on_delivery=delivered)  # fmt: skip
        if producer.flush(SEND_TIMEOUT_S) == 0 and not errors:
            return True
    except Exception:  # noqa: BLE001 - a fenced producer raises a fatal KafkaException (or a SystemError from its callback)
        pass
    try:
        producer.abort_transaction(SEND_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - fenced: nothing of it can commit anyway
        pass
    return False


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

    # fetch.wait.max.ms: the read ends at the partition's end, where the broker would otherwise hold
    # each fetch for its default 500 ms waiting for records that are not coming.
    consumer = Consumer({"group.id": f"{control}-reader", **config, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "fetch.wait.max.ms": 10})  # fmt: skip
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


# Which writer each failpoint fails (contract.failpoints).
_FAILING_WRITER = {Failpoint.KILL_BEFORE_COMMIT: 0, Failpoint.ABANDON_BEFORE_COMMIT: 0, Failpoint.HALF_WRITE: 1}


def _first_time(prefix: str, checkpoint: str, batch: int, writer: int) -> bool:
    """The test failpoint kills each (batch, writer) once: the replay must get through."""
    if batch % 3 != 1:
        return False
    flag = Path(tempfile.gettempdir()) / f"{prefix}{checkpoint}-{batch}-{writer}.killed"
    if flag.exists():
        return False
    flag.touch()
    return True
