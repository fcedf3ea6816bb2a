"""Exactly-once Kafka output: the decisions, without Kafka or Spark (pure).

The sink (``app.pipeline.exactly_once``) writes each micro-batch as one Kafka
transaction per writer, with a marker (checkpoint id, batch id, writer) in the
same transaction, in a control topic of the query's own. What is decided here:

* names: the transactional ids, the control topic and its readers' group, per
  namespace and query, so two queries never fence each other and a platform can
  grant ACLs by prefix (``streamq.<namespace>.``);
* the marker's format, and whether a marker says a writer's part of a batch is
  already committed;
* which specs cannot have it: modes without a batch to commit, transforms whose
  output is not the same when a batch is replayed, speculative tasks, sink
  options the transactional writer does not take, a timeout that does not fit.

docs/architecture.md ("Exactly-once Kafka output") holds the argument.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from contract import sql
from contract.expressions import transform_texts
from contract.modes import Mode
from contract.spec import KafkaSink, QuerySpec, TransactionWriter, duration_ms

Found = Iterator[tuple[str, str]]  # (path below spec, message)
Check = tuple[str, Callable[[QuerySpec], Found], tuple[tuple[str, str, str], ...]]  # name, check, CEL (rule, message, fieldPath)

NAME_PREFIX = "streamq"
SEPARATOR = "."
CONTROL_SUFFIX = "eos-markers"
SOURCE_SUFFIX = "source"  # the Kafka source's consumer groups (source_group)
READER_SUFFIX = "eos-reader"
LEGACY_CONTROL = re.compile(r"^streamq-.*-eos-markers$")  # the names before namespace and query were kept apart
MAX_TOPIC = 249  # Kafka's limit on a topic name (and its legal characters: [a-zA-Z0-9._-])
# Kubernetes names a namespace with a DNS-1123 label: no dot, so the first dot after it ends it.
# A query's name is a DNS-1035 label (contract.names); any DNS-1123 label is taken here.
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# The longest name (the readers' group) with two 63-character labels: far below MAX_TOPIC, so a
# name is never shortened, and two names never share a shortened stem.
LONGEST_NAME = len(NAME_PREFIX) + 3 * len(SEPARATOR) + 63 + 63 + max(len(CONTROL_SUFFIX), len(READER_SUFFIX))
# The broker refuses a producer whose transaction.timeout.ms is above its transaction.max.timeout.ms (default 15 min).
BROKER_MAX_TIMEOUT_MS = 15 * 60 * 1000
MARKER_VERSION = 1


# --- names ------------------------------------------------------------------------------------
#
# ``streamq.<namespace>.<query>.<what>``: namespace and query are DNS-1123 labels (no dot, refused
# here otherwise), so a name splits back into (namespace, query, what) at its dots and no two
# (namespace, query) pairs share a name; and ``streamq.<namespace>.`` (what a platform grants a
# namespace's principal) starts no other namespace's names: a dash, unlike a dot, could not tell
# namespace `team` with query `a-payments` from namespace `team-a` with query `payments`.
#
# Kafka refuses a topic whose name equals an existing one's once '.' and '_' are read as one
# (their metric names would collide). A name that collides with a control topic has '_' where
# the control topic has a dot: it starts with `streamq_` or `streamq.<namespace>_`, or has
# `<namespace>.<query>_`, none of them under another namespace's prefix `streamq.<other>.`, so a
# tenant holding only its own prefix cannot create one; and a sink topic that collides with any
# control topic is refused by the policy (policy.transactionalNames, ``is_control_topic``).


def _label(what: str, value: str) -> str:
    if not _LABEL.fullmatch(value):  # fullmatch: `$` alone lets a trailing newline through
        raise ValueError(f"{what} {value!r} is not a DNS-1123 label: it cannot name Kafka transactional ids "
                         "and topics apart from other queries'")  # fmt: skip
    return value


def query_prefix(namespace: str, query: str) -> str:
    """``streamq.<namespace>.<query>.``: every transactional id, the control topic and its readers'
    group of one query start with it, and no other query's do."""
    return SEPARATOR.join((NAME_PREFIX, _label("namespace", namespace), _label("query name", query), ""))


def namespace_prefix(namespace: str) -> str:
    """What a platform grants one namespace's Kafka principal (prefixed ACLs)."""
    return SEPARATOR.join((NAME_PREFIX, _label("namespace", namespace), ""))


def control_topic(namespace: str, query: str) -> str:
    return f"{query_prefix(namespace, query)}{CONTROL_SUFFIX}"


def reader_group(namespace: str, query: str) -> str:
    """The group id of the consumer that reads the markers back (assigned partitions, never committed)."""
    return f"{query_prefix(namespace, query)}{READER_SUFFIX}"


def source_group(namespace: str, query: str) -> str:
    """The Kafka source's group id (``kafka.group.id``), one per query: under the namespace's prefixed
    group ACL, not Spark's ``spark-kafka-source-...`` that every tenant shares."""
    return f"{query_prefix(namespace, query)}{SOURCE_SUFFIX}"


def transactional_id(namespace: str, query: str, writer: int) -> str:
    """Deterministic per (query, writer): the writer of a later incarnation (a restart, a retried
    or speculative task, a standby that took over) fences the earlier one's producer."""
    return f"{query_prefix(namespace, query)}{writer}"


def is_control_topic(topic: str) -> bool:
    """A control topic's name, or one Kafka would refuse beside it (``_`` read as ``.``)."""
    plain = topic.replace("_", SEPARATOR)
    return (plain.startswith(NAME_PREFIX + SEPARATOR) and plain.endswith(SEPARATOR + CONTROL_SUFFIX)) or bool(
        LEGACY_CONTROL.match(topic)
    )


# --- markers ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Marker:
    """One writer's part of one batch is committed. ``checkpoint`` is the query id Spark keeps in
    the checkpoint's metadata: a new checkpoint starts its batch ids at 0 again."""

    checkpoint: str
    batch: int
    writer: int
    writers: int

    def encode(self) -> bytes:
        return json.dumps({"v": MARKER_VERSION, "checkpoint": self.checkpoint, "batch": self.batch,
                           "writer": self.writer, "writers": self.writers}, separators=(",", ":")).encode()  # fmt: skip

    @classmethod
    def decode(cls, raw: bytes | None) -> Marker | None:
        """None for anything that is not a marker of this format (never guessed at)."""
        try:
            data = json.loads(raw or b"")
            if data.get("v") != MARKER_VERSION:
                return None
            return cls(str(data["checkpoint"]), int(data["batch"]), int(data["writer"]), int(data["writers"]))
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def already_written(last: Marker | None, checkpoint: str, batch: int, writer: int) -> bool:
    """Is ``writer``'s part of ``batch`` committed, given the last committed marker of its control
    partition? Batches run one after another and a writer's markers share one partition, so the
    last marker is this batch's when it was committed, or an earlier batch's when it was not."""
    return last is not None and last.checkpoint == checkpoint and last.writer == writer and last.batch >= batch


class MixedWriterCounts(RuntimeError):
    """A replayed batch whose committed markers name different writer counts: never guessed at."""


def replay_writers(lasts: Iterable[Marker | None], checkpoint: str, batch: int, writers: int) -> int:
    """How many writers write ``batch``, the first batch of a query start, given the last committed
    marker of every control partition (read after every earlier producer was fenced).

    A batch an earlier start began under another count (some of its writers committed, the rest
    not; the count changed, or its default did, across the restart) is finished under that count:
    a row's writer is its hash modulo the count, so under another count the committed rows would be
    written again and the uncommitted ones skipped. Later batches use ``writers``."""
    begun = {last.writers for last in lasts if last is not None and last.checkpoint == checkpoint and last.batch >= batch}
    if len(begun) > 1:
        raise MixedWriterCounts(f"batch {batch} has committed markers of {sorted(begun)} writers: "
                                "it cannot be finished under either count without a duplicate or a loss")  # fmt: skip
    return begun.pop() if begun else writers


# --- refusals ---------------------------------------------------------------------------------

WHY_NO_BATCH = "exactlyOnce needs micro-batches: {mode} mode has no batch to commit atomically"
DRIVER_WRITER_PRODUCERS = "writer driver writes each batch with the driver's one producer: set producers to 1"
# Functions whose value differs when a batch is replayed: its rows would differ, and so would which
# writer (hash of the row) writes them; a row could then be written by two writers, or by none.
NONDETERMINISTIC = frozenset(
    {"rand", "randn", "random", "uuid", "shuffle", "monotonically_increasing_id", "spark_partition_id",
     "input_file_name", "input_file_block_start", "input_file_block_length", "now", "current_timestamp",
     "current_date", "localtimestamp", "current_time", "randstr", "uniform",
     "first", "first_value", "last", "last_value", "any_value", "collect_list", "collect_set", "array_agg",
     "try_reflect", "reflect", "java_method"}
)  # fmt: skip
_BARE_TIME = re.compile(r"\b(current_timestamp|current_date|localtimestamp)\b(?!\s*\()", re.IGNORECASE)
# The transactional writer is confluent-kafka (librdkafka): it takes these kafka.* settings; the
# Java-only ones of Spark's writer mean nothing to it, and the transaction settings are its own.
WRITER_SETTINGS = frozenset({"linger.ms", "batch.size", "compression.type", "request.timeout.ms", "client.id"})
OWNED_SETTINGS = frozenset({"transactional.id", "enable.idempotence", "acks", "transaction.timeout.ms",
                            "max.in.flight.requests.per.connection", "isolation.level"})  # fmt: skip


def _exactly_once_sink(spec: QuerySpec) -> KafkaSink | None:
    """The Kafka sink when it asks for exactly-once delivery, else None."""
    return spec.sink.kafka if spec.sink.kafka is not None and spec.sink.kafka.exactly_once else None


def mode_problems(spec: QuerySpec) -> Found:
    if _exactly_once_sink(spec) is not None and spec.mode.long_running:
        yield ".sink.kafka.delivery", WHY_NO_BATCH.format(mode=spec.mode)


def settings_without_delivery(spec: QuerySpec) -> Found:
    kafka = spec.sink.kafka
    if kafka is not None and kafka.transactions is not None and not kafka.exactly_once:
        yield ".sink.kafka.transactions", "transactions applies to delivery exactlyOnce only"


def writer_problems(spec: QuerySpec) -> Found:
    """The driver writes a batch with one producer: more would need tasks to write their shares."""
    sink = _exactly_once_sink(spec)
    if sink is None or not sink.writes_from_driver:
        return
    if sink.transaction_settings.producers != 1:
        yield ".sink.kafka.transactions.producers", DRIVER_WRITER_PRODUCERS


def timeout_problems(spec: QuerySpec) -> Found:
    """The transaction timeout against the trigger interval and the broker's bound.

    A transaction stays open while its task writes one batch, about one trigger interval of input
    at most when the query keeps up: a timeout no longer than the interval gets busy batches aborted
    by the broker, retried and aborted again. Above the broker's bound every writer fails at
    init_transactions. After a crash, readers (read_committed) wait on the crashed writer's open
    transaction until the restarted query fences it or the timeout ends it, whichever is first
    (``reader_wait_ms``)."""
    sink = _exactly_once_sink(spec)
    if sink is None:
        return
    timeout = duration_ms(sink.transaction_settings.timeout)
    at = ".sink.kafka.transactions.timeout"
    interval = spec.commit_interval_ms
    if timeout <= interval:
        yield at, (f"the transaction timeout ({timeout} ms) must be longer than the trigger interval ({interval} ms): "
                   "a batch that takes its interval would be aborted by the broker")  # fmt: skip
    if timeout > BROKER_MAX_TIMEOUT_MS:
        yield at, (f"the transaction timeout ({timeout} ms) is above the broker's transaction.max.timeout.ms "
                   f"default ({BROKER_MAX_TIMEOUT_MS} ms): every writer would fail to start")  # fmt: skip
    if timeout < 1000:
        yield at, "the transaction timeout must be at least 1s (a transaction takes a few broker round trips)"


def reader_wait_ms(spec: QuerySpec) -> int:
    """How long read_committed readers of the output can wait on a crashed writer's open transaction:
    until the timeout, or sooner, the restart (its first backoff) fences it. With restartPolicy Never
    nothing restarts and the timeout is the bound."""
    if spec.sink.kafka is None:
        raise ValueError("only a query that writes to Kafka has transactions to wait on")
    timeout = duration_ms(spec.sink.kafka.transaction_settings.timeout)
    if spec.restart_policy.type.value == "Never" or spec.restart_policy.max_restarts == 0:
        return timeout
    return min(timeout, duration_ms(spec.restart_policy.backoff.initial) + spec.commit_interval_ms)


def transform_problems(spec: QuerySpec) -> Found:
    if _exactly_once_sink(spec) is None:
        return
    for path, text in transform_texts(spec):
        called = set(sql.called_names(text) or ())
        # Named as written: a call with its parentheses (rand(), current_timestamp()), a bare word without.
        found = [f"{n}()" for n in sorted(called & NONDETERMINISTIC)] + [m.group(1).lower() for m in _BARE_TIME.finditer(text)]
        for name in dict.fromkeys(found):
            yield path, (f"exactlyOnce needs the same output when a batch is replayed; {name} gives another value "
                         "each run (rows written twice or never)")  # fmt: skip


SPECULATION_KEYS = ("spark.speculation",)


def speculation_problems(spec: QuerySpec) -> Found:
    """Speculative copies of a task would share its transactional id: each copy fences the other,
    which stays correct (only one commits) but fails attempts for nothing; streamq never turns it on."""
    if _exactly_once_sink(spec) is None:
        return
    for key in SPECULATION_KEYS:
        if str(spec.runtime.spark_conf.get(key, "false")).strip().lower() == "true":
            yield f".runtime.sparkConf.{key}", ("exactlyOnce refuses speculative tasks: copies of one task share "
                                                "its transactional id and fence each other")  # fmt: skip


def option_problems(spec: QuerySpec) -> Found:
    sink = _exactly_once_sink(spec)
    if sink is None:
        return
    for key in sink.options:
        setting = key[len("kafka.") :].lower() if key.lower().startswith("kafka.") else None
        at = f".sink.kafka.options.{key}"
        if setting in OWNED_SETTINGS:
            yield at, f"exactlyOnce sets {setting} itself"
        elif setting not in WRITER_SETTINGS:
            yield at, (f"the exactlyOnce writer takes only kafka.{{{', '.join(sorted(WRITER_SETTINGS))}}} "
                       "among the sink's options")  # fmt: skip


def checks() -> tuple[Check, ...]:
    """(name, check, CEL rules as (rule, message, fieldPath)) for contract.rules' table."""
    long_running = " || ".join(f"has(self.trigger.{m})" for m in Mode if m.long_running)
    wants = "has(self.sink.kafka) && has(self.sink.kafka.delivery) && self.sink.kafka.delivery == 'exactlyOnce'"
    mode_cel = (f"!({wants}) || !({long_running})",
                "exactlyOnce needs micro-batches: continuous and realTime mode have no batch to commit atomically",
                ".sink.kafka.delivery")  # fmt: skip
    transactions = "self.sink.kafka.transactions"
    driver_cel = (f"!(has(self.sink.kafka) && has({transactions}) && has({transactions}.writer) "
                  f"&& {transactions}.writer == '{TransactionWriter.DRIVER}') "
                  f"|| !has({transactions}.producers) || {transactions}.producers == 1",  # unset: 1
                  DRIVER_WRITER_PRODUCERS, ".sink.kafka.transactions.producers")  # fmt: skip
    return (
        ("exactly-once-mode", mode_problems, (mode_cel,)),
        ("exactly-once-writer", writer_problems, (driver_cel,)),
        ("exactly-once-settings", settings_without_delivery, ()),
        ("exactly-once-timeout", timeout_problems, ()),
        ("exactly-once-transforms", transform_problems, ()),
        ("exactly-once-speculation", speculation_problems, ()),
        ("exactly-once-options", option_problems, ()),
    )
