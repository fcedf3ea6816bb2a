"""The job as the driver pod runs it (`python -m app`): stop, resume from the
checkpoint, and fail with a clear reason and exit code instead of hanging."""

import signal
import time
from collections import Counter

import pytest

from app.checkpoint import read_checkpoint
from app.contract import ExitCode
from tests.integration.jobs import JobProcess, SteadyProducer, flagged, fraud_spec, payments, write_resource

pytestmark = pytest.mark.integration

CONTINUOUS = {"continuous": {"checkpointInterval": "500ms"}}


def _wait_for_committed_input(checkpoint, topic, at_least, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        offsets = read_checkpoint(checkpoint).kafka_offsets().get(topic, {})
        if sum(offsets.values()) >= at_least:
            return
        time.sleep(0.3)
    raise AssertionError(f"fewer than {at_least} input records committed within {timeout}s")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_restart_resumes_from_checkpoint(kafka_broker, kafka_topic, tmp_path, how):
    source, sink = kafka_topic(partitions=2), kafka_topic()
    spec_path = write_resource(tmp_path / "q.yaml", "restart", fraud_spec(kafka_broker.bootstrap, source, sink, tmp_path / "ck", CONTINUOUS))
    producer = SteadyProducer(kafka_broker, source)
    producer.start()
    first = JobProcess(spec_path, tmp_path)
    try:
        # Mid-stream: epochs with data have been committed, and more keeps coming.
        _wait_for_committed_input(tmp_path / "ck", source, at_least=100, timeout=300)
        if how == "SIGTERM":
            first.signal(signal.SIGTERM)
            assert first.wait(60) == ExitCode.OK, first.log()[-3000:]
        else:
            first.kill_all()
            first.wait(30)
    finally:
        first.stop()
    output_of_first_run = kafka_broker.consume_all(sink, timeout=10, decode=True)
    committed = read_checkpoint(tmp_path / "ck").kafka_offsets()[source]
    sent_so_far = list(zip(producer.sent, producer.positions))
    committed_flagged = {r for r, (p, o) in sent_so_far if o < committed.get(p, 0)} & set(flagged(producer.sent))
    # Only what the first run wrote after its last committed epoch may be written again.
    replay_bound = len(output_of_first_run) - len(committed_flagged)
    # More input arrives while the job is down.
    time.sleep(1)
    second = JobProcess(spec_path, tmp_path)
    try:
        second.wait_for_progress(timeout=300)
        producer.stop()
        expected = set(flagged(producer.sent))
        deadline = time.monotonic() + 120
        out = []
        while time.monotonic() < deadline:
            out = kafka_broker.consume_all(sink, timeout=10, decode=True)
            if expected <= set(out):
                break
            time.sleep(1)
    finally:
        second.signal(signal.SIGTERM)
        second.wait(60)
        second.stop()
        producer.stop()
    missing = expected - set(out)
    duplicates = sum(n - 1 for n in Counter(out).values())
    print(f"{how}: {len(producer.sent)} payments, {len(expected)} flagged, first run wrote {len(output_of_first_run)} "
          f"({len(committed_flagged)} committed), total written {len(out)}, duplicates {duplicates} (bound {replay_bound})")
    assert not missing, f"{len(missing)} flagged payments never arrived"
    assert set(out) <= expected, "records that should have been filtered out arrived"
    assert committed_flagged, "the first run committed nothing: the test did not stop it mid-stream"
    # Resuming from the checkpoint replays at most the epoch(s) after the last commit.
    assert duplicates <= replay_bound, f"{duplicates} duplicates, more than the {replay_bound} written after the last commit"


def test_broker_down_at_start_fails_fast_with_a_reason(kafka_topic, tmp_path):
    spec_path = write_resource(tmp_path / "q.yaml", "nobroker", fraud_spec("127.0.0.1:1", "in", "out", tmp_path / "ck", CONTINUOUS))
    code, job = JobProcess.run_to_exit(spec_path, tmp_path, 90)
    assert code == ExitCode.SOURCE_UNAVAILABLE, job.log()[-3000:]
    assert "Kafka source 127.0.0.1:1 did not answer" in job.termination_message()


def test_missing_topic_fails_with_its_name(kafka_broker, tmp_path):
    spec_path = write_resource(tmp_path / "q.yaml", "notopic", fraud_spec(kafka_broker.bootstrap, "no-such-topic", "out", tmp_path / "ck", CONTINUOUS))
    code, job = JobProcess.run_to_exit(spec_path, tmp_path, 90)
    assert code == ExitCode.SOURCE_UNAVAILABLE
    assert "no-such-topic" in job.termination_message()


def test_too_few_slots_for_the_partitions_is_refused_not_hung(kafka_broker, kafka_topic, tmp_path):
    source = kafka_topic(partitions=4)
    spec = fraud_spec(kafka_broker.bootstrap, source, "out", tmp_path / "ck", CONTINUOUS, runtime={"parallelism": 4})
    code, job = JobProcess.run_to_exit(write_resource(tmp_path / "q.yaml", "slots", spec), tmp_path, 90)
    assert code == ExitCode.INVALID_SPEC
    assert "4 partitions need more than 4 slots" in job.termination_message()


def test_broker_going_away_mid_run_fails_the_job_with_a_reason(kafka_broker_factory, tmp_path):
    broker = kafka_broker_factory()
    source, sink = "in", "out"
    broker.create_topic(source, 1)
    broker.create_topic(sink, 1)
    broker.produce(source, payments(30))
    spec_path = write_resource(tmp_path / "q.yaml", "brokergone", fraud_spec(broker.bootstrap, source, sink, tmp_path / "ck", CONTINUOUS))
    job = JobProcess(spec_path, tmp_path, env={"STREAMQ_BROKER_TIMEOUT_SECONDS": "10"})
    try:
        job.wait_for_progress(timeout=300, min_batch=1)
        broker.kill()
        started = time.monotonic()
        code = job.wait(120)
        took = time.monotonic() - started
    finally:
        job.stop()
    print(f"job noticed the broker was gone after {took:.1f}s")
    assert code == ExitCode.QUERY_FAILED, job.log()[-3000:]
    assert "unreachable" in job.termination_message()


def test_query_spark_refuses_exits_as_invalid(kafka_broker, kafka_topic, tmp_path):
    source = kafka_topic()
    spec = fraud_spec(kafka_broker.bootstrap, source, "out", tmp_path / "ck", CONTINUOUS, transforms=[{"where": "no_such_column > 1"}])
    code, job = JobProcess.run_to_exit(write_resource(tmp_path / "q.yaml", "refused", spec), tmp_path, 120)
    assert code == ExitCode.QUERY_REFUSED, job.log()[-3000:]
    assert "QUERY_REFUSED" in job.termination_message() and "no_such_column" in job.termination_message()
