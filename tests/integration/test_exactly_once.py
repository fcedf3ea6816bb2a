"""Exactly-once Kafka output (sink.kafka.delivery: exactlyOnce) with a real broker and real Spark:
the fraud filter killed mid-stream, a writer killed between its produce and its commit, and a
zombie producer of an earlier incarnation. A read_committed reader must see every flagged
payment exactly once."""

import re
import signal
import time
from collections import Counter

import pytest

from app.checkpoints.reader import read_checkpoint
from app.pipeline.exactly_once import last_marker, namespace_of
from contract import ExitCode
from contract.exactly_once import Marker, control_topic, transactional_id
from testbed.jobs import JobProcess, SteadyProducer
from testbed.specs import flagged, query_spec, write_resource
from testbed.wait import wait_for

pytestmark = pytest.mark.integration

KILLS = 5
MICRO_BATCH = {"microBatch": {"interval": "1s"}}
TASKS = {"sink.kafka.transactions": {"producers": 2}}  # two writers in Spark tasks (the default: the driver alone)


def exactly_once_spec(broker, source, sink, location, **fields):
    return query_spec(bootstrap=broker.bootstrap, topic=source, sink_topic=sink, location=location, trigger=MICRO_BATCH,
                      **{"sink.kafka.delivery": "exactlyOnce", "restartPolicy.inPlaceRestarts": 100, **fields})  # fmt: skip


def _committed_batches(checkpoint) -> int:
    last = read_checkpoint(checkpoint).last_committed
    return -1 if last is None else last


def _count(out, expected):
    got = Counter(out)
    missing = set(expected) - set(got)
    duplicates = sum(n - 1 for n in got.values())
    return missing, duplicates


def _wait_and_count(broker, sink, producer, timeout=180):
    producer.stop()
    expected = set(flagged(producer.sent))
    out = broker.wait_for_records(sink, expected, timeout=timeout)
    return expected, out


@pytest.mark.slow  # minutes on a 2-core machine: `hack/test.sh -m slow` (CI time, tests/e2e/README.md)
def test_sigkill_five_times_mid_stream_loses_and_doubles_nothing(kafka_broker, kafka_topic, tmp_path):
    source, sink = kafka_topic(partitions=2), kafka_topic(partitions=2)
    checkpoint = tmp_path / "ck"
    spec_path = write_resource(tmp_path / "q.yaml", "eos-kill", exactly_once_spec(kafka_broker, source, sink, checkpoint))
    producer = SteadyProducer(kafka_broker, source, per_batch=100, period_s=0.1)  # ~1,000 payments/s
    producer.start()
    job = JobProcess(spec_path, tmp_path)
    kills = []
    try:
        for kill in range(KILLS):
            before = _committed_batches(checkpoint)
            # mid-stream: this run committed batches of its own, and more input keeps coming
            wait_for(lambda before=before: _committed_batches(checkpoint) >= before + 2, 300,
                     lambda kill=kill, job=job: f"two more committed batches before kill {kill + 1}:\n{job.log()[-4000:]}")  # fmt: skip
            time.sleep(0.4 + 0.3 * kill)  # a different point of the batch cycle each time
            job.kill_all()
            job.wait(30)
            job.stop()
            kills.append(_committed_batches(checkpoint))
            job = JobProcess(spec_path, tmp_path)
        before = _committed_batches(checkpoint)
        wait_for(lambda: _committed_batches(checkpoint) >= before + 2, 300, lambda: f"the last run commits:\n{job.log()[-4000:]}")
        expected, out = _wait_and_count(kafka_broker, sink, producer)
    finally:
        producer.stop()
        job.signal(signal.SIGTERM)
        job.wait(60)
        job.stop()
    missing, duplicates = _count(out, expected)
    print(f"{len(producer.sent)} payments, {len(expected)} flagged, {len(out)} read (read_committed), "
          f"killed after batches {kills}: lost {len(missing)}, duplicates {duplicates}")  # fmt: skip
    assert set(out) <= expected, "records that should have been filtered out arrived"
    assert not missing, f"{len(missing)} flagged payments never arrived"
    assert duplicates == 0, f"{duplicates} flagged payments arrived more than once"


def _through_a_failpoint(kafka_broker, kafka_topic, tmp_path, query: str, failpoint: str, **fields):
    """The fraud filter, exactly once, at ~1,000 payments/s with ``failpoint`` armed in its job (writer 0
    of batches 1, 4, 7 fails; each batch is replayed by an in-place restart) until batch 8 is committed.
    Returns the flagged payments lost, the duplicates, the job's log and its exit code."""
    source, sink = kafka_topic(partitions=2), kafka_topic(partitions=2)
    checkpoint = tmp_path / "ck"
    spec = exactly_once_spec(kafka_broker, source, sink, checkpoint, **fields)
    spec_path = write_resource(tmp_path / "q.yaml", query, spec)
    producer = SteadyProducer(kafka_broker, source, per_batch=100, period_s=0.1)
    producer.start()
    job = JobProcess(spec_path, tmp_path, env={"STREAMQ_FAILPOINT": failpoint})
    try:
        wait_for(lambda: _committed_batches(checkpoint) >= 8, 400, lambda: f"batch 8 committed:\n{job.log()[-4000:]}")
        expected, out = _wait_and_count(kafka_broker, sink, producer)
        log = job.log()
    finally:
        producer.stop()
        job.signal(signal.SIGTERM)
        code = job.wait(60)
        job.stop()
    missing, duplicates = _count(out, expected)
    print(f"{failpoint}: {len(expected)} flagged, {len(out)} read: lost {len(missing)}, duplicates {duplicates}")
    return missing, duplicates, log, code


def test_a_writer_killed_between_produce_and_commit_loses_and_doubles_nothing(kafka_broker, kafka_topic, tmp_path):
    missing, duplicates, log, code = _through_a_failpoint(
        kafka_broker, kafka_topic, tmp_path, "eos-failpoint", "kill-before-commit", **TASKS
    )
    assert log.count("restarting it in place") >= 3, "the failpoint did not kill the writers it should have"
    # the job named its control topic after namespace and query, apart with dots
    assert control_topic(namespace_of(None), "eos-failpoint") in kafka_broker.list_topics()
    assert not missing and duplicates == 0, (len(missing), duplicates)
    assert code == ExitCode.OK


@pytest.mark.slow  # ~80 s: the test above kills the same writers in CI (`hack/test.sh -m slow` runs this one)
def test_a_writer_task_that_fails_with_its_transaction_open_loses_and_doubles_nothing(kafka_broker, kafka_topic, tmp_path):
    """The abandon-before-commit failpoint: the writer's task fails with an error, its rows and marker
    on the broker in a transaction it neither commits nor aborts. The batch's next attempt (writer 0,
    kept or new) must fence the open transaction and write the batch once."""
    missing, duplicates, log, code = _through_a_failpoint(
        kafka_broker, kafka_topic, tmp_path, "eos-abandon", "abandon-before-commit", **TASKS
    )
    abandoned = set(re.findall(r"writer 0 of batch (\d+) left its transaction open", log))
    assert len(abandoned) >= 3, f"the failpoint did not fail the writers it should have: batches {sorted(abandoned)}"
    assert not missing and duplicates == 0, (len(missing), duplicates)
    assert code == ExitCode.OK


def test_the_driver_writer_failing_with_its_transaction_open_loses_and_doubles_nothing(kafka_broker, kafka_topic, tmp_path):
    """The default writer (the driver, one producer) collects each batch and writes it with the producer
    it keeps. The abandon-before-commit failpoint fails its batch with the rows and the marker on the
    broker in an open transaction, the producer still alive in the driver; the query's in-place restart
    replays the batch, whose new producer must fence the open transaction and write the batch once."""
    missing, duplicates, log, code = _through_a_failpoint(
        kafka_broker, kafka_topic, tmp_path, "eos-driver", "abandon-before-commit"
    )
    abandoned = set(re.findall(r"writer 0 of batch (\d+) left its transaction open in the driver", log))
    assert len(abandoned) >= 3, f"the failpoint did not fail the driver's batches it should have: batches {sorted(abandoned)}"
    assert "left its transaction open in a task" not in log  # no task wrote: the driver did
    assert not missing and duplicates == 0, (len(missing), duplicates)
    assert code == ExitCode.OK


def test_a_batch_half_written_under_two_writers_is_finished_under_two_after_a_restart_with_one(
    kafka_broker, kafka_topic, tmp_path
):
    """Writer 0 of 2 committed batch 1, writer 1 left its transaction open, and the job exited (the
    half-write failpoint, no in-place restart). The query starts again with the default writer, the
    driver's one producer: a row's writer is its hash modulo the count, so under 1 writer batch 1 would
    be written twice or lost in part. The new start fences both ids, finds the batch begun under 2,
    finishes it under 2, and writes on with 1 (contract.exactly_once.replay_writers)."""
    source, sink = kafka_topic(partitions=2), kafka_topic(partitions=2)
    checkpoint, query = tmp_path / "ck", "eos-half"
    spec_path = tmp_path / "q.yaml"
    write_resource(spec_path, query, exactly_once_spec(kafka_broker, source, sink, checkpoint, **TASKS,
                                                       **{"restartPolicy.inPlaceRestarts": 0}))  # fmt: skip
    producer = SteadyProducer(kafka_broker, source, per_batch=100, period_s=0.1)
    producer.start()
    try:
        first = JobProcess(spec_path, tmp_path, env={"STREAMQ_FAILPOINT": "half-write"})
        try:
            code = first.wait(300)
        finally:
            first.stop()
        assert code != ExitCode.OK, first.log()[-4000:]
        assert "failpoint half-write: writer 1 of batch 1 left its transaction open in a task" in first.log()
        control, config = control_topic(namespace_of(None), query), {"bootstrap.servers": kafka_broker.bootstrap}
        ours = read_checkpoint(checkpoint).query_id
        assert _committed_batches(checkpoint) == 0  # batch 1 is in the offset log, not in the commit log
        assert last_marker(config, control, 0) == Marker(ours, 1, 0, 2)  # half written: writer 0 of 2 committed

        write_resource(spec_path, query, exactly_once_spec(kafka_broker, source, sink, checkpoint))  # the default writer
        job = JobProcess(spec_path, tmp_path)
        try:
            wait_for(lambda: _committed_batches(checkpoint) >= 4, 300, lambda: f"batch 4 committed:\n{job.log()[-4000:]}")
            expected, out = _wait_and_count(kafka_broker, sink, producer)
            log = job.log()
        finally:
            job.signal(signal.SIGTERM)
            job.wait(60)
            job.stop()
    finally:
        producer.stop()
    missing, duplicates = _count(out, expected)
    print(f"half written: {len(expected)} flagged, {len(out)} read: lost {len(missing)}, duplicates {duplicates}")
    assert "batch 1 was begun under 2 writers and not finished: finishing it under 2" in log, log[-4000:]
    assert last_marker(config, control, 1) == Marker(ours, 1, 1, 2)  # writer 1 of 2 finished batch 1
    after = last_marker(config, control, 0)
    assert (after.writers, after.batch >= 4) == (1, True), after  # then the driver alone, writer 0 of 1
    assert not missing and duplicates == 0, (len(missing), duplicates)


def test_a_kept_producer_that_another_fenced_finds_out_before_it_writes(kafka_broker, kafka_topic):
    """Producers are kept between batches (app.pipeline.exactly_once._Kept): the marker goes first,
    and a kept producer whose id another producer took since (another attempt of its task, a new
    incarnation) learns it from the broker there, before any row, and nothing of it commits."""
    from confluent_kafka import Producer

    from app.pipeline.exactly_once import _begin_with_marker

    sink = kafka_topic()
    control = kafka_topic(prefix="control")
    conf = {"bootstrap.servers": kafka_broker.bootstrap, "broker.address.family": "v4",
            "transactional.id": transactional_id("team-a", "kept", 0)}  # fmt: skip
    kept = Producer(conf)
    kept.init_transactions(30)
    assert _begin_with_marker(kept, control, Marker("ck", 1, 0, 1))  # its own id: it goes on
    kept.produce(sink, key=b"k", value=b"batch 1")
    kept.commit_transaction(30)
    assert _begin_with_marker(kept, control, Marker("ck", 2, 0, 1))  # kept for the next batch: no init
    kept.produce(sink, key=b"k", value=b"batch 2")
    kept.commit_transaction(30)

    other = Producer(conf)
    other.init_transactions(30)  # another attempt takes the id, reads the marker of batch 2, writes batch 3
    assert last_marker({"bootstrap.servers": kafka_broker.bootstrap}, control, 0) == Marker("ck", 2, 0, 1)
    other.begin_transaction()
    other.produce(sink, key=b"k", value=b"batch 3")
    other.produce(control, key=b"0", value=Marker("ck", 3, 0, 1).encode(), partition=0)
    other.commit_transaction(30)

    # The kept producer still believes batch 2 is the last: asked to write batch 3 again, it is refused.
    assert not _begin_with_marker(kept, control, Marker("ck", 3, 0, 1))
    out = kafka_broker.consume_all(sink, timeout=15, decode=True)
    assert out == [("k", "batch 1"), ("k", "batch 2"), ("k", "batch 3")], out
    assert last_marker({"bootstrap.servers": kafka_broker.bootstrap}, control, 0) == Marker("ck", 3, 0, 1)
