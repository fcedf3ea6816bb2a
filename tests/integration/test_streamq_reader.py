"""streamq's own continuous-mode Kafka source (jvm/reader, spec.source.kafka.reader: streamq) on a
real broker: the fraud filter's exact output, a checkpoint handed from Spark's reader to it and
back, a SIGKILL mid-stream, partitions added while it runs, records or a topic deleted
(failOnDataLoss), the broker down and back, and SASL credentials from the Secret (issue #43). And the
local checkpoint manager the reader's jar carries: a checkpoint moved between it and Spark's.

The integration tier runs what issue #43 names (the exact output, the checkpoint handed over and
back, a SIGKILL, partitions added); the failure paths are marked slow:
`hack/test.sh tests/integration/test_streamq_reader.py -m slow`.
"""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest
from confluent_kafka import KafkaException

from app.checkpoints.reader import read_checkpoint
from app.pipeline.plan import build_dataframe, build_writer
from contract import ExitCode
from contract.load import validate_spec
from testbed.jobs import JobProcess, SteadyProducer, resume_and_collect
from testbed.specs import flagged, payments, query_spec, write_resource
from testbed.wait import wait_for
from tests.integration import test_job_credentials as creds

pytestmark = pytest.mark.integration

CONTINUOUS = {"continuous": {"checkpointInterval": "500ms"}}
N = 90


def _spec(broker, source, sink, location, reader: str | None = "streamq") -> dict:
    spec = query_spec(bootstrap=broker.bootstrap, topic=source, sink_topic=sink, location=location, trigger=CONTINUOUS)
    if reader is not None:
        spec["source"]["kafka"]["reader"] = reader
    return spec


def _start(spark, spec_dict, name: str):
    spec = validate_spec(spec_dict)
    return build_writer(build_dataframe(spark, spec), name, spec).start()


def _exact(out: list, expected: set) -> None:
    """The hidden fraud checks' shape: every flagged payment once or more, none wrong."""
    assert not expected - set(out), f"{len(expected - set(out))} flagged payments missing"
    assert set(out) <= expected, f"records that are not flagged payments: {sorted(set(out) - expected)[:5]}"


def _wait_until_all_committed(checkpoint, broker, topic, timeout=120) -> dict[int, int]:
    """The checkpoint's last commit holds the end of every partition (read as `streamq checkpoint inspect` reads it)."""
    ends = broker.end_offsets(topic)
    wait_for(lambda: read_checkpoint(checkpoint).kafka_offsets().get(topic) == ends, timeout,
             lambda: f"a commit at {ends}; the checkpoint holds {read_checkpoint(checkpoint).kafka_offsets()}")  # fmt: skip
    return ends


def test_fraud_filter_exact_output_through_the_streamq_reader(spark, kafka_broker, kafka_topic, tmp_path):
    source, sink = kafka_topic(partitions=2), kafka_topic()
    records = payments(N)
    kafka_broker.produce(source, records)
    expected = sorted(flagged(records))
    query = _start(spark, _spec(kafka_broker, source, sink, tmp_path / "ck"), f"q-{sink}")
    try:
        out = kafka_broker.consume_all(sink, timeout=120, expected_count=len(expected), decode=True)
        assert query.exception() is None, query.exception()
        after = kafka_broker.consume_all(sink, timeout=3, decode=True)  # anything beyond would be a bug
        plan = query._jsq.streamingQuery().logicalPlan().toString()  # continuous mode reports no lastProgress
        assert "StreamqKafkaTable" in plan, plan  # the table of io.streamq.reader.StreamqKafkaProvider
    finally:
        query.stop()
    assert sorted(out) == expected
    assert len(after) == len(expected), "records beyond the flagged ones were written"


def test_a_checkpoint_moves_from_sparks_reader_to_streamq_and_back(spark, kafka_broker, kafka_topic, tmp_path):
    """Both readers write Spark's KafkaSourceOffset JSON: each resumes where the other committed,
    re-reading nothing it committed (the spec's startingOffsets, earliest, is not read again)."""
    source, sink, ck = kafka_topic(partitions=2), kafka_topic(), tmp_path / "ck"
    sent: list = []
    for run, reader in enumerate(("spark", "streamq", "spark")):
        _one_more_run(spark, kafka_broker, (source, sink, ck), sent, run, reader, reader)


def _one_more_run(spark, broker, topics_and_checkpoint, sent: list, run: int, reader: str, name: str) -> None:
    """N more payments in, then a query on the same checkpoint until it has committed them all: its output
    is every flagged payment of all runs so far, exactly once (nothing committed before is read again)."""
    source, sink, ck = topics_and_checkpoint
    batch = payments(N, start=run * N)
    broker.produce(source, batch)
    sent += batch
    query = _start(spark, _spec(broker, source, sink, ck, reader=reader), f"q-{sink}-{run}")
    try:
        out = broker.wait_for_records(sink, set(flagged(sent)), timeout=120)
        ends = _wait_until_all_committed(ck, broker, source)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    _exact(out, set(flagged(sent)))
    duplicates = sum(n - 1 for n in Counter(out).values())
    assert duplicates == 0, f"run {run} ({name}) read again {duplicates} records the previous run had committed"
    assert sum(ends.values()) == len(sent)


CHECKPOINT_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
MANAGERS = (  # by the name a run is known by in failures, the class (None: Spark's default, FileContext-based)
    ("Spark's FileContext manager", None),
    ("streamq's", "io.streamq.checkpoint.LocalCheckpointFileManager"),
    ("Spark's FileSystem manager", "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"),
    ("streamq's again", "io.streamq.checkpoint.LocalCheckpointFileManager"),
)


def _log_files(checkpoint) -> set:
    return {p for log in ("offsets", "commits") for p in (checkpoint / log).glob("[0-9]*")}


def test_a_local_checkpoint_moves_between_sparks_checkpoint_managers_and_streamqs(spark, kafka_broker, kafka_topic, tmp_path):
    """streamq's checkpoint manager (jvm/reader, the job's default for a local checkpoint) writes what Spark's
    managers read and the other way round: each run resumes where the last committed, reads nothing again
    and leaves no temporary file. Spark's managers write a .crc beside each file, streamq's none: that
    tells which one wrote a run's files."""
    source, sink, ck = kafka_topic(partitions=2), kafka_topic(), tmp_path / "ck"
    sent: list = []
    try:
        for run, (name, manager) in enumerate(MANAGERS):
            spark.conf.unset(CHECKPOINT_MANAGER) if manager is None else spark.conf.set(CHECKPOINT_MANAGER, manager)
            before = _log_files(ck)
            _one_more_run(spark, kafka_broker, (source, sink, ck), sent, run, "spark", name)
            written = _log_files(ck) - before
            with_crc = {f for f in written if (f.parent / f".{f.name}.crc").exists()}
            expected_crc = set() if manager and "streamq" in manager else written
            assert written and with_crc == expected_crc, (name, sorted(f.name for f in written), sorted(f.name for f in with_crc))
            assert not [p for p in ck.rglob("*") if p.name.endswith(".tmp")], f"{name} left temporary files"
    finally:
        spark.conf.unset(CHECKPOINT_MANAGER)


def test_sigkill_mid_stream_loses_nothing(kafka_broker, kafka_topic, tmp_path):
    source, sink = kafka_topic(partitions=2), kafka_topic()
    spec_path = write_resource(tmp_path / "q.yaml", "reader", _spec(kafka_broker, source, sink, tmp_path / "ck"))
    producer = SteadyProducer(kafka_broker, source)
    producer.start()
    first = JobProcess(spec_path, tmp_path)
    try:
        wait_for(lambda: sum(read_checkpoint(tmp_path / "ck").kafka_offsets().get(source, {}).values()) >= 100, 300,
                 lambda: f"100 input records committed:\n{first.log()[-3000:]}")  # fmt: skip
        first.kill_all()
        first.wait(30)
    finally:
        first.stop()
    out, expected, code, log = resume_and_collect(spec_path, tmp_path, producer, kafka_broker, sink, flagged)
    _exact(out, expected)
    assert code == ExitCode.OK, log[-3000:]
    # the job wrote its local checkpoint with streamq's manager (no .crc beside a file: Spark's write one)
    assert not list((tmp_path / "ck" / "offsets").glob(".*.crc")), sorted(p.name for p in (tmp_path / "ck" / "offsets").iterdir())
    print(f"SIGKILL: {len(producer.sent)} payments, {len(expected)} flagged, {len(out)} written, "
          f"{sum(n - 1 for n in Counter(out).values())} duplicates")  # fmt: skip


def test_partitions_added_while_running_are_read_from_their_start(spark, kafka_broker, kafka_topic, tmp_path):
    """As Spark's KafkaContinuousStream: needsReconfiguration sees the new partition, Spark plans
    again, and the new partition starts at its earliest offset."""
    from confluent_kafka.admin import NewPartitions

    source, sink = kafka_topic(partitions=1), kafka_topic()
    first = payments(N)
    kafka_broker.produce(source, first, partition=0)
    query = _start(spark, _spec(kafka_broker, source, sink, tmp_path / "ck"), f"q-{sink}")
    try:
        kafka_broker.wait_for_records(sink, set(flagged(first)), timeout=120)
        admin = kafka_broker.admin()  # held until the result: a client collected mid-call fails its futures
        admin.create_partitions([NewPartitions(source, 2)])[source].result(timeout=30)
        # Until the new partition has a leader the broker answers NOT_LEADER_FOR_PARTITION: "not yet".
        wait_for(lambda: len(kafka_broker.end_offsets(source)) == 2, 30, "the second partition", ignore=(KafkaException,))
        second = payments(N, start=N)
        kafka_broker.produce(source, second, partition=1)
        out = kafka_broker.wait_for_records(sink, set(flagged(first + second)), timeout=120)
        ends = _wait_until_all_committed(tmp_path / "ck", kafka_broker, source)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    _exact(out, set(flagged(first + second)))
    assert ends == {0: N, 1: N}


def _failure(query, timeout=120) -> str:
    """The query's exception and its causes (a task's failure reads "Data read failed", its cause below)."""
    wait_for(lambda: query.exception() is not None, timeout, "the query to fail")
    messages, cause = [], query._jsq.exception().get()
    while cause is not None:
        messages.append(str(cause.toString()))
        cause = cause.getCause()
    return "\n".join(messages)


@pytest.mark.slow
def test_records_deleted_under_the_checkpoint_fail_the_query_or_are_skipped(spark, kafka_broker, kafka_topic, tmp_path):
    """No ListOffsets on the hot path, yet data loss is seen: the consumer's auto.offset.reset=none
    turns the broker's OFFSET_OUT_OF_RANGE into an error (KafkaPartitionReader.outOfRange)."""
    from confluent_kafka import TopicPartition

    source, sink, ck = kafka_topic(partitions=1), kafka_topic(), tmp_path / "ck"
    first, second = payments(N), payments(N, start=N)
    kafka_broker.produce(source, first)
    query = _start(spark, _spec(kafka_broker, source, sink, ck), f"q-{sink}-0")
    try:
        kafka_broker.wait_for_records(sink, set(flagged(first)), timeout=120)
        _wait_until_all_committed(ck, kafka_broker, source)
    finally:
        query.stop()
    kafka_broker.produce(source, second)
    cut = N + N // 2  # the checkpoint resumes at N: [N, cut) is deleted (retention or deleteRecords)
    admin = kafka_broker.admin()  # held until the result: a client collected mid-call fails its futures
    for future in admin.delete_records([TopicPartition(source, 0, cut)]).values():
        future.result(timeout=30)

    query = _start(spark, _spec(kafka_broker, source, sink, ck), f"q-{sink}-1")  # failOnDataLoss: true (default)
    try:
        message = _failure(query)
    finally:
        query.stop()
    assert f"Cannot fetch offset {N} of {source}-0" in message, message[-3000:]
    assert "failOnDataLoss" in message

    skipping = _spec(kafka_broker, source, sink, ck)
    skipping["source"]["kafka"]["options"] = {"failOnDataLoss": "false"}
    query = _start(spark, skipping, f"q-{sink}-2")
    try:
        kept = set(flagged(first + second[N // 2 :]))
        out = kafka_broker.wait_for_records(sink, kept, timeout=120)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    assert not set(out) & set(flagged(second[: N // 2])), "deleted records came out"
    _exact(out, kept)


@pytest.mark.slow
def test_a_deleted_topic_fails_the_query_with_fail_on_data_loss(spark, kafka_broker, kafka_topic, tmp_path):
    """As Spark's KafkaContinuousStream.planInputPartitions: partitions gone are data loss."""
    source, sink = kafka_topic(partitions=2), kafka_topic()
    records = payments(N)
    kafka_broker.produce(source, records)
    query = _start(spark, _spec(kafka_broker, source, sink, tmp_path / "ck"), f"q-{sink}")
    try:
        kafka_broker.wait_for_records(sink, set(flagged(records)), timeout=120)
        kafka_broker.delete_topic(source)
        message = _failure(query)
    finally:
        query.stop()
    assert f"{source}-0" in message and "are gone" in message, message[-3000:]


@pytest.mark.slow
def test_the_broker_down_and_back_needs_nothing(spark, kafka_broker_factory, tmp_path):
    """The consumers keep their positions while the broker is gone (SIGKILL, data kept) and poll on
    when it is back; the driver's metadata timer keeps its last look meanwhile (no reconfiguration)."""
    broker = kafka_broker_factory()
    source, sink = broker.create_topic("in", 2), broker.create_topic("out", 1)
    before, after = payments(N), payments(N, start=N)
    broker.produce(source, before)
    query = _start(spark, _spec(broker, source, sink, tmp_path / "ck"), "q-broker-down")
    try:
        broker.wait_for_records(sink, set(flagged(before)), timeout=120)
        broker.kill()
        time.sleep(5)  # down for a while: every poll meanwhile finds no broker
        broker.start()
        broker.produce(source, after)
        out = broker.wait_for_records(sink, set(flagged(before + after)), timeout=180)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    _exact(out, set(flagged(before + after)))


sasl_broker = creds.sasl_broker  # the fixture: a broker whose second listener asks SASL/PLAIN


@pytest.mark.slow
def test_sasl_credentials_from_the_secret_reach_its_consumers_and_admin_client(sasl_broker, tmp_path):
    """The job turns the Secret into kafka.sasl.* options (app/pipeline/credentials.py); the reader
    hands them to its Admin client (the driver) and its consumers (the tasks) as Spark's source does."""
    broker, sasl_bootstrap = sasl_broker
    broker.create_topic("payments", 2)
    broker.create_topic("flagged", 1)
    records = payments(60)
    broker.produce("payments", records)
    spec = _spec(broker, "payments", "flagged", tmp_path / "ck")
    auth = {"mechanism": "PLAIN", "securityProtocol": "SASL_PLAINTEXT", "secretRef": {"name": "kafka-creds"}}
    for end in ("source", "sink"):
        spec[end]["kafka"]["bootstrapServers"] = sasl_bootstrap
        spec[end]["kafka"]["auth"] = auth
    path = write_resource(tmp_path / "q.yaml", "sasl", spec)
    job = JobProcess(path, tmp_path, env={"STREAMQ_SECRETS_DIR": str(creds._secret(tmp_path, creds.PASSWORD))})
    try:
        expected = sorted(flagged(records))
        out = broker.consume_all("flagged", timeout=150, expected_count=len(expected), decode=True)
        assert sorted(out) == expected, job.log()[-3000:]
        job.signal(signal.SIGTERM)
        assert job.wait(60) == ExitCode.OK
    finally:
        job.stop()
    assert creds.PASSWORD not in job.log()
