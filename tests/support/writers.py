"""Who wrote each record of an output topic: the ``streamq.writer`` header the job's Kafka sink
puts on every record (app/pipeline/plan.py), with the record's CreateTime (the producer's clock
when the record was handed to it). A fenced driver's records all come before its fence."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from contract import WRITER_HEADER


@dataclass(frozen=True)
class Written:
    writer: str | None
    created_ms: int
    key: str | None
    value: str | None


def written(bootstrap: str, topic: str, timeout: float = 30) -> list[Written]:
    """Every record of ``topic`` as of now, read_committed, in offset order per partition."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"streamq-writers-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed"})  # fmt: skip
    deadline = time.monotonic() + timeout
    out: list[Written] = []
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=timeout).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        left = {p for p, end in ends.items() if end > 0}
        while left and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    left.discard(msg.partition())
                    continue
                raise RuntimeError(f"reading {topic}: {msg.error()}")
            headers = dict(msg.headers() or [])
            writer = headers.get(WRITER_HEADER)
            out.append(Written(writer.decode() if writer is not None else None, msg.timestamp()[1],
                               msg.key().decode() if msg.key() is not None else None,
                               msg.value().decode() if msg.value() is not None else None))  # fmt: skip
            if msg.offset() + 1 >= ends[msg.partition()]:
                left.discard(msg.partition())
        if left:
            raise TimeoutError(f"reading {topic}: partitions {sorted(left)} not read to their end in {timeout:g}s")
    finally:
        consumer.close()
    return out


def written_after(records: list[Written], writer: str, since_s: float) -> list[Written]:
    """The records ``writer`` handed to its producer after ``since_s`` (time.time())."""
    return [r for r in records if r.writer == writer and r.created_ms > since_s * 1000]
