"""The driver's write fence: its Kafka records stop at its Lease deadline (jvm/fence).

The Lease (contract.lease) keeps two drivers of a query from writing at once as long as the
holder's process runs: past its renew deadline it stops its query and exits. A process that was
frozen (its node paused, its VM stopped) does not run that check in time: when it wakes up,
every thread runs at once, and the writing tasks may send records before the lease thread sees
that the Lease is someone else's. So the deadline is also checked where each record is
written: Spark's Kafka sink hands every record to the producer's partitioner, in the task's
thread, and ``io.streamq.fence.WriteFence`` refuses it once the deadline has passed on the
machine's monotonic clock (Python's ``time.monotonic`` and Java's ``System.nanoTime`` read the
same CLOCK_MONOTONIC). The driver moves the deadline on at each renewal and shuts it when the
Lease is lost.

What it covers: tasks in the driver's JVM (a local-mode driver, the default). Executors in pods
of their own keep an unarmed fence; they stop when their driver is gone. A record handed to the
producer before the freeze may still be delivered after the wake-up (it was written before).
"""

from __future__ import annotations

import logging

from contract.spec import QuerySpec

log = logging.getLogger("streamq.fence")

PARTITIONER_CLASS = "io.streamq.fence.WriteFence"
PARTITIONER_OPTION = "kafka.partitioner.class"
# How every record the fence refuses fails its task (jvm/fence WriteFence.FencedWrite's message).
FENCED_WRITE = "streamq write fence:"


def fenced(spec: QuerySpec) -> QuerySpec:
    """The spec whose Kafka sink places its records through the fence. Other sinks are unchanged,
    and so is the exactly-once sink: its transactions fence an older driver's writers already
    (app.pipeline.exactly_once), and its producers take no partitioner."""
    kafka = spec.sink.kafka
    if kafka is None or kafka.exactly_once:
        return spec
    sink = spec.sink.model_copy(update={"kafka": kafka.model_copy(update={
        "options": {**kafka.options, PARTITIONER_OPTION: PARTITIONER_CLASS}})})  # fmt: skip
    return spec.model_copy(update={"sink": sink})


class WriteFence:
    """The JVM's fence, set from this driver's Lease holder."""

    def __init__(self, java_class):
        self._fence = java_class

    @classmethod
    def in_session(cls, spark) -> WriteFence | None:
        """The fence class of the session's JVM; None (said once, loudly) when its jar is missing."""
        from py4j.java_gateway import JavaClass

        found = spark._jvm.io.streamq.fence.WriteFence
        if not isinstance(found, JavaClass):
            log.error("the write fence (%s) is not on the driver's classpath (hack/install-jars.sh builds "
                      "jars/fence/streamq-fence.jar): writes are fenced by the lease thread only", PARTITIONER_CLASS)  # fmt: skip
            return None
        return cls(found)

    def extend_to(self, monotonic_s: float) -> None:
        """Writes may go on until this moment of time.monotonic()."""
        self._fence.extendTo(int(monotonic_s * 1_000_000_000))

    def shut(self) -> None:
        self._fence.shut()

    def remaining_s(self) -> float:
        return self._fence.remainingNanos() / 1e9
