"""The latency benchmark's producer and consumer processes, and the file they share.

The producer stamps each record with the time it was *due* on a fixed schedule
(``t0 + i / rate``), not with the time it was finally sent: a producer that stalls
sends late records that carry their due time, so the stall shows up as latency
instead of vanishing (coordinated omission). How late the producer itself ran is
recorded apart (``scheduleLagMs``).

The consumer appends one row per record it receives to a flat int64 file:
``seq, dueNs, recvNs, sinkTimestampMs, sourceAppendMs``. The input topic is created
with broker append timestamps (``LogAppendTime``) and the query copies that
timestamp into the record (``"inTs"``), so each latency splits into
due -> broker append -> the sink producer's send (the output topic keeps CreateTime,
which is when Spark's or Flink's producer called send) -> our receive.
"""

from __future__ import annotations

import time
import uuid
from array import array
from pathlib import Path

DROP_EVERY = 10  # seq % 10 == 0 has amount 20 and is filtered out; the rest pass (amount 1500)
PASS_FRACTION = 1 - 1 / DROP_EVERY
FIELDS = 5  # seq, dueNs, recvNs, sink record timestamp (ms), source append time (ms, -1 if unknown)
SOURCE_TOPIC_CONFIG = {"message.timestamp.type": "LogAppendTime"}
# The producer wakes at most once per tick and sends every record due by then. Waking for
# each record (every 0.1 ms at 10k/s, `--tick-ms 0`) cost the harness about half a core of the
# machine's two and gave the broker one Produce request per record. Records keep their due
# time, so the up to one tick they wait is counted in every path's latency, the floor's included.
TICK_MS = 1.0


def value_of(seq: int, due_ns: int) -> bytes:
    amount = 20 if seq % DROP_EVERY == 0 else 1500
    return b'{"id":%d,"amount":%d,"sentNs":%d}' % (seq, amount, due_ns)


def passes(seq: int) -> bool:
    return seq % DROP_EVERY != 0


def passes_all(seq: int) -> bool:  # the baseline has no filter: every record comes out
    return True


def parse_value(v: bytes) -> tuple[int, int, int]:
    """(seq, dueNs, sourceAppendMs or -1) of an output value: ``id`` and ``inTs`` anywhere, ``sentNs`` last."""
    i = v.find(b'"id":') + 5
    j = v.find(b'"inTs":')
    in_ts = int(v[j + 7 : v.index(b",", j)]) if j >= 0 else -1
    return int(v[i : v.index(b",", i)]), int(v[v.rindex(b":") + 1 : -1]), in_ts


def producer_main(bootstrap: str, topic: str, conn, conf: dict, tick_ms: float = TICK_MS) -> None:
    """Sends on a schedule when told; answers with the sequence numbers at each mark and its own lag."""
    from confluent_kafka import Producer

    # linger 0 sends at once; at most 5 requests in flight makes librdkafka batch what queues up
    # behind them (its default, 1e6 in flight, sends one request per record and falls behind a busy broker).
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "linger.ms": 0, "acks": "1",
                         "max.in.flight.requests.per.connection": 5, **conf})  # fmt: skip
    seq = 0
    while True:
        command = conn.recv()
        if command[0] == "stop":
            break
        if command[0] == "halt":  # the run it meant to end had already ended
            continue
        _, rate, duration_s, marks_s = command
        summary = _run(producer, topic, conn, seq, rate, duration_s, marks_s, tick_ms / 1000)
        seq = summary["last"]
        conn.send(summary)
    producer.flush(30)


def _run(producer, topic: str, conn, first: int, rate: float, duration_s: float, marks_s, tick_s: float) -> dict:
    total = int(rate * duration_s)
    period_ns = 1e9 / rate
    t0 = time.time_ns() + 1_000_000  # the first record is due 1 ms from now
    lag = array("q")  # ns each record was sent after it was due (sampled: every 16th record)
    sent = 0
    loops = 0
    while sent < total:
        loops += 1
        if loops % 64 == 0 and conn.poll():  # ("halt",): end a long run early
            conn.recv()
            break
        now = time.time_ns()
        due_count = min(total, int((now - t0) / period_ns) + 1)
        while sent < due_count:
            due = t0 + int(sent * period_ns)
            try:
                producer.produce(topic, key=b"k%d" % (first + sent), value=value_of(first + sent, due))
            except BufferError:
                producer.poll(0.001)
                continue
            if sent % 16 == 0:
                lag.append(time.time_ns() - due)
            sent += 1
        producer.poll(0)
        wait_s = (t0 + sent * period_ns - time.time_ns()) / 1e9
        if wait_s > 0:
            time.sleep(max(wait_s, tick_s))
    t1 = time.time_ns()
    producer.flush(30)
    lag_ms = sorted(x / 1e6 for x in lag)
    pick = lambda q: round(lag_ms[min(len(lag_ms) - 1, int(q * len(lag_ms)))], 3) if lag_ms else None  # noqa: E731
    return {
        "first": first, "last": first + sent, "t0": t0, "t1": t1, "rate": rate,
        # A mark is a time into the run; the records due before it are first .. marks[i].
        "marks": [min(first + sent, first + int(m * rate)) for m in marks_s],
        "scheduleLagMs": {"p50": pick(0.5), "p99": pick(0.99), "max": lag_ms[-1] if lag_ms else None},
    }  # fmt: skip


def consumer_main(bootstrap: str, topic: str, out_path: str, stop, conf: dict) -> None:
    """Appends (seq, dueNs, recvNs, sinkTimestampMs, sourceAppendMs) of every record it receives to out_path."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "broker.address.family": "v4",
        "group.id": f"bench-{uuid.uuid4().hex}", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100, **conf,
    })  # fmt: skip
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    with open(out_path, "ab", buffering=0) as out:
        while not stop.is_set():
            msgs = consumer.consume(100_000, timeout=0)  # whatever is there, without waiting
            if not msgs:
                msg = consumer.poll(0.05)
                if msg is None:
                    continue
                msgs = [msg]
            now = time.time_ns()
            rows = array("q")
            for msg in msgs:
                if msg.error() is not None:
                    continue
                seq, due, in_ts = parse_value(msg.value())
                ts = msg.timestamp()[1]
                # The baseline reads its own input topic: its timestamp is the append time.
                rows.extend((seq, due, now, ts, in_ts if in_ts >= 0 else ts))
            out.write(rows.tobytes())
    consumer.close()


def read_received(path: Path):
    import numpy as np

    data = np.fromfile(path, dtype=np.int64)
    return data[: len(data) // FIELDS * FIELDS].reshape(-1, FIELDS)
