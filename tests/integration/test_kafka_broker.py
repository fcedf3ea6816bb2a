"""The real Kafka broker of testbed/kafka_broker.py, and Spark's connector jars.

Needs hack/install-jars.sh to have run (the fixtures fail with that hint).
"""

from __future__ import annotations

import os
import re
import socket

import pytest

from testbed.kafka_broker import KafkaBroker

pytestmark = pytest.mark.integration

# Exact bytes, including the awkward ones: no key, empty value, no value,
# non-UTF-8 bytes, multi-byte UTF-8, a value larger than a network read.
RECORDS: list[tuple[bytes | None, bytes | None]] = [
    (b"k1", b"v1"),
    (None, b"no key"),
    (b"empty", b""),
    (b"tombstone", None),
    (b"\x00\xff\xfe", b"\x80\x81\x00binary"),
    ("ключ".encode(), "значение ✓".encode()),
    (b"big", bytes(range(256)) * 800),
]


def _refuses_connections(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_round_trip_exact_records_single_partition(kafka_broker: KafkaBroker, kafka_topic) -> None:
    topic = kafka_topic(partitions=1)

    delivered = kafka_broker.produce(topic, RECORDS)

    assert delivered == [(0, offset) for offset in range(len(RECORDS))]
    assert kafka_broker.end_offsets(topic) == {0: len(RECORDS)}
    assert kafka_broker.consume_all(topic, timeout=30, expected_count=len(RECORDS)) == RECORDS
    # without expected_count it reads up to the end offsets and stops there
    assert kafka_broker.consume_all(topic, timeout=30) == RECORDS


def test_round_trip_across_partitions_and_str_records(kafka_broker: KafkaBroker, kafka_topic) -> None:
    topic = kafka_topic(partitions=3)
    records = [(f"key-{i}", f"value-{i}") for i in range(30)]

    delivered = kafka_broker.produce(topic, records)

    # same key -> same partition; every partition's offsets are dense from 0
    by_partition: dict[int, list[int]] = {}
    for partition, offset in delivered:
        by_partition.setdefault(partition, []).append(offset)
    assert set(by_partition) <= {0, 1, 2}
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))
    got = kafka_broker.consume_all(topic, timeout=30, expected_count=len(records), decode=True)
    assert sorted(got) == sorted(records)
    assert kafka_broker.consume_all(topic, timeout=30, decode=True) and len(got) == len(records)


def test_topics_are_unique_and_not_auto_created(kafka_broker: KafkaBroker, kafka_topic) -> None:
    a, b = kafka_topic(), kafka_topic(create=False)
    assert a != b
    assert re.fullmatch(r"[A-Za-z0-9._-]+", a) and re.fullmatch(r"[A-Za-z0-9._-]+", b)
    topics = kafka_broker.list_topics()
    assert a in topics and b not in topics
    assert kafka_broker.bootstrap == f"127.0.0.1:{kafka_broker.port}"


def test_killed_broker_restarts_on_same_port_with_its_data(kafka_broker_factory) -> None:
    broker = kafka_broker_factory()
    bootstrap, port, controller_port = broker.bootstrap, broker.port, broker.controller_port
    broker.create_topic("durable", partitions=2)
    first = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(20)]
    delivered = broker.produce("durable", first)
    ends_before = broker.end_offsets("durable")

    broker.kill()  # SIGKILL: a crash, not a clean shutdown
    assert not broker.is_running
    assert _refuses_connections(port)

    broker.restart()
    assert (broker.bootstrap, broker.port, broker.controller_port) == (bootstrap, port, controller_port)
    assert broker.is_running
    assert "durable" in broker.list_topics()
    assert broker.end_offsets("durable") == ends_before
    assert sorted(broker.consume_all("durable", timeout=30, expected_count=len(first))) == sorted(first)

    # it keeps working: new records are appended after the old ones
    later = [(b"after", b"restart")]
    assert broker.produce("durable", later, partition=0) == [(0, sum(1 for p, _ in delivered if p == 0))]
    assert sorted(broker.consume_all("durable", timeout=30)) == sorted(first + later)

    broker.restart(graceful=True)  # the SIGTERM path too
    assert broker.bootstrap == bootstrap
    assert sorted(broker.consume_all("durable", timeout=30)) == sorted(first + later)

    workdir = broker.workdir
    broker.stop()
    assert not broker.is_running
    assert not workdir.exists()
    assert _refuses_connections(port)


def test_spark_kafka_jars_do_not_duplicate_pyspark_jars(spark_kafka_jars: list[str]) -> None:
    import pyspark

    def artifact(name: str) -> str:
        return re.sub(r"-[0-9]+(\.[0-9]+)+([.-][A-Za-z0-9]+)*\.jar$", "", name)

    pyspark_jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    shipped = {artifact(n) for n in os.listdir(pyspark_jars) if n.endswith(".jar")}
    ours = {artifact(os.path.basename(p)) for p in spark_kafka_jars}
    assert {"spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13", "kafka-clients", "commons-pool2"} <= ours
    assert not ours & shipped


@pytest.fixture(scope="module")
def kafka_spark(spark_kafka_jars: list[str]):
    """A local[2] SparkSession with the connector jars on spark.jars.

    Reuses a session that is already up (one JVM per test run) if it has the
    connector jars; otherwise makes one and stops it after this module.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        configured = active.sparkContext.getConf().get("spark.jars", "")
        if all(os.path.basename(j) in configured for j in spark_kafka_jars):
            yield active
            return
        pytest.fail("a SparkSession without the Kafka connector jars is already running")
    session = (
        SparkSession.builder.appName("streamq-kafka-smoke")
        .master("local[2]")
        .config("spark.jars", ",".join(spark_kafka_jars))
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


def test_spark_reads_exact_records_in_batch_mode(kafka_spark, kafka_broker: KafkaBroker, kafka_topic) -> None:
    topic = kafka_topic(partitions=2)
    records = RECORDS + [(f"k{i}".encode(), f"v{i}".encode()) for i in range(40)]
    delivered = kafka_broker.produce(topic, records)

    df = (
        kafka_spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    assert [f.name for f in df.schema.fields][:6] == ["key", "value", "topic", "partition", "offset", "timestamp"]
    rows = df.select("key", "value", "topic", "partition", "offset").collect()

    got = {
        (r["partition"], r["offset"]): (
            bytes(r["key"]) if r["key"] is not None else None,
            bytes(r["value"]) if r["value"] is not None else None,
        )
        for r in rows
    }
    expected = dict(zip(delivered, records, strict=True))
    assert len(rows) == len(records)
    assert {r["topic"] for r in rows} == {topic}
    assert got == expected
