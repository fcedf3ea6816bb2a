"""The engine's leg split at streamq's reader (issue #43): where a record's time goes between its append
to the source topic and its send by the sink, for `bench.profile_continuous --reader-trace`.

The reader (jvm/reader ReaderTrace, on only when the job's environment names STREAMQ_READER_TRACE)
writes one row per record it hands to Spark: partition, offset, the record's append time (ms), when
the poll that brought it returned and when the reader handed it over (µs), and the poll's size. The
query copies the source partition and offset into its output (TRACE_SELECT), whose record timestamp
is when the sink's producer was called (CreateTime). Joined on (partition, offset), each record's
engine leg splits into:

* fetch: append -> the poll that brought it returned (the broker's fetch wait, the network, the
  consumer thread's wake-up);
* in the reader: poll returned -> handed to Spark's reader thread (records of the same poll ahead of it);
* after the hand-off: handed -> the sink's send (Spark's queue to the task thread, the plan, the
  writer; at an epoch boundary the commit and the driver's epoch work).

Append and send are whole milliseconds (Kafka's timestamps): each leg that ends or starts at one is
good to +-1 ms.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from devtools.payments import percentile

ENV = "STREAMQ_READER_TRACE"  # jvm/reader ReaderTrace.ENV
FIELDS = 6  # partition, offset, appendMs, polledUs, handedUs, polledCount
# The bench's select (bench.latency.BENCH_SELECT) with the source partition and offset in the output.
TRACE_SELECT = [
    "CAST(key AS STRING) AS key",
    """CONCAT('{"inTs":', CAST(unix_millis(timestamp) AS STRING), ',"inPart":', CAST(partition AS STRING), """
    """',"inOff":', CAST(offset AS STRING), ',', SUBSTRING(CAST(value AS STRING), 2)) AS value""",
]
_PART_OFF = re.compile(rb'"inPart":(\d+),"inOff":(\d+)')
LEGS = ("engine", "fetch", "inReader", "afterHandOff")


def read_trace(path: Path) -> dict[tuple[int, int], tuple[int, int, int, int]]:
    """(partition, offset) -> (appendMs, polledUs, handedUs, polledCount); a torn last row is left out."""
    import numpy as np

    data = np.fromfile(path, dtype=">i8") if path.exists() else np.zeros(0, dtype=">i8")
    rows = data[: len(data) // FIELDS * FIELDS].reshape(-1, FIELDS)
    return {(int(r[0]), int(r[1])): (int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows}


def source_position(value: bytes) -> tuple[int, int] | None:
    """(partition, offset) of the source record an output value came from (TRACE_SELECT)."""
    m = _PART_OFF.search(value)
    return (int(m.group(1)), int(m.group(2))) if m else None


def legs(
    trace: dict[tuple[int, int], tuple[int, int, int, int]],
    sent: Iterable[tuple[tuple[int, int], int]],
    window_us: tuple[int, int],
) -> dict[str, list[float]]:
    """Milliseconds of each leg, per record handed over within the window and sent by the sink, and the
    millisecond of the second it was handed over in (phaseMs)."""
    out: dict[str, list[float]] = {leg: [] for leg in (*LEGS, "phaseMs")}
    for position, send_ms in sent:
        got = trace.get(position)
        if got is None:
            continue
        append_ms, polled_us, handed_us, _ = got
        if not window_us[0] <= handed_us <= window_us[1]:
            continue
        out["engine"].append(float(send_ms - append_ms))
        out["fetch"].append(polled_us / 1000 - append_ms)
        out["inReader"].append((handed_us - polled_us) / 1000)
        out["afterHandOff"].append(send_ms - handed_us / 1000)
        out["phaseMs"].append(float(handed_us // 1000 % 1000))  # epochs start on whole seconds of the wall clock
    return out


def summary(by_leg: dict[str, list[float]], slowest: int = 100) -> dict[str, Any]:
    """p50 / p90 / p99 / max of each leg, and the legs of the slowest 1 % by the whole engine leg:
    where the tail's milliseconds are, not each leg's own tail (those are different records)."""

    def q(values: Sequence[float], p: float) -> float | None:
        v = percentile(values, p)
        return None if v is None else round(v, 2)

    result: dict[str, Any] = {"records": len(by_leg["engine"])}
    for leg in LEGS:
        values = by_leg[leg]
        result[leg] = {"p50": q(values, 50), "p90": q(values, 90), "p99": q(values, 99), "max": q(values, 100)}
    n = len(by_leg["engine"])
    tail = sorted(range(n), key=lambda i: by_leg["engine"][i])[n - max(1, n // slowest) :] if n else []
    result["slowestPercent"] = {
        leg: round(sum(by_leg[leg][i] for i in tail) / len(tail), 2) if tail else None for leg in LEGS
    } | {"records": len(tail)}
    # A continuous trigger's epochs start on multiples of its interval of the wall clock (Spark's
    # ProcessingTimeExecutor): with 1 s epochs the phase of the second a record was handed over in is its
    # distance from the last epoch boundary. By 100 ms phase: the after-hand-off p99, and the slowest 1 %.
    phases = by_leg.get("phaseMs", [])
    if phases:
        for leg in LEGS:
            result[f"{leg}P99ByPhase"] = [
                q([v for v, ph in zip(by_leg[leg], phases, strict=True) if lo <= ph < lo + 100], 99) for lo in range(0, 1000, 100)
            ]
        result["slowestPercentByPhase"] = [sum(lo <= phases[i] < lo + 100 for i in tail) for lo in range(0, 1000, 100)]
    return result


def read_output(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[tuple[tuple[int, int], int]]:
    """Every output record's source position and CreateTime (ms), read from the beginning."""
    import time
    import uuid

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "group.id": f"trace-{uuid.uuid4().hex}", "enable.auto.commit": False})  # fmt: skip
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out, done = [], {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout_s
        while len(done) < len(ends) and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=1.0):
                if msg.error() is not None:
                    continue
                position = source_position(msg.value())
                if position is not None:
                    out.append((position, msg.timestamp()[1]))
                if msg.offset() + 1 >= ends[msg.partition()]:
                    done.add(msg.partition())
        return out
    finally:
        consumer.close()
