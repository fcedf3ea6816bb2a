"""The job as the driver pod runs it (`python -m app`): stop, resume from the
checkpoint, and fail with a clear reason and exit code instead of hanging."""

import signal
import time
from collections import Counter

import pytest

from app.checkpoints.reader import read_checkpoint
from contract import ExitCode
from testbed.jobs import JobProcess, SteadyProducer, resume_and_collect
from testbed.specs import flagged, payments, query_spec, write_resource
from testbed.wait import wait_for

pytestmark = pytest.mark.integration

CONTINUOUS = {"continuous": {"checkpointInterval": "500ms"}}


def _wait_for_committed_input(checkpoint, topic, at_least, timeout):
    wait_for(lambda: sum(read_checkpoint(checkpoint).kafka_offsets().get(topic, {}).values()) >= at_least, timeout,
             f"{at_least} input records committed")  # fmt: skip


@pytest.mark.parametrize(
    "how", [pytest.param("SIGTERM", marks=pytest.mark.slow), "SIGKILL"]
)  # CI time: SIGKILL is the harder case
def test_restart_resumes_from_checkpoint(kafka_broker, kafka_topic, tmp_path, how):
    source, sink = kafka_topic(partitions=2), kafka_topic()
    spec_path = write_resource(
        tmp_path / "q.yaml",
        "restart",
        query_spec(bootstrap=kafka_broker.bootstrap, topic=source, sink_topic=sink, location=tmp_path / "ck", trigger=CONTINUOUS),
    )
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
    # the producer still runs: a batch's positions are recorded before its records, so the lists may differ by one batch
    sent_so_far = list(zip(producer.sent, producer.positions, strict=False))
    committed_flagged = {r for r, (p, o) in sent_so_far if o < committed.get(p, 0)} & set(flagged(producer.sent))
    # Only what the first run wrote after its last committed epoch may be written again.
    replay_bound = len(output_of_first_run) - len(committed_flagged)
    # more input arrives while the job is down; the resumed job's own commit, then every flagged payment
    out, expected, _, _ = resume_and_collect(spec_path, tmp_path, producer, kafka_broker, sink, flagged)
    missing = expected - set(out)
    duplicates = sum(n - 1 for n in Counter(out).values())
    print(
        f"{how}: {len(producer.sent)} payments, {len(expected)} flagged, first run wrote {len(output_of_first_run)} "
        f"({len(committed_flagged)} committed), total written {len(out)}, duplicates {duplicates} (bound {replay_bound})"
    )
    assert not missing, f"{len(missing)} flagged payments never arrived"
    assert set(out) <= expected, "records that should have been filtered out arrived"
    assert committed_flagged, "the first run committed nothing: the test did not stop it mid-stream"
    # Resuming from the checkpoint replays at most the epoch(s) after the last commit.
    assert duplicates <= replay_bound, f"{duplicates} duplicates, more than the {replay_bound} written after the last commit"


def test_broker_down_at_start_fails_fast_with_a_reason(kafka_topic, tmp_path):
    spec_path = write_resource(
        tmp_path / "q.yaml",
        "nobroker",
        query_spec(bootstrap="127.0.0.1:1", topic="in", sink_topic="out", location=tmp_path / "ck", trigger=CONTINUOUS),
    )
    code, job = JobProcess.run_to_exit(spec_path, tmp_path, 90)
    assert code == ExitCode.SOURCE_UNAVAILABLE, job.log()[-3000:]
    assert "Kafka source 127.0.0.1:1 did not answer" in job.termination_message()


def test_missing_topic_fails_with_its_name(kafka_broker, tmp_path):
    spec_path = write_resource(
        tmp_path / "q.yaml",
        "notopic",
        query_spec(
            bootstrap=kafka_broker.bootstrap,
            topic="no-such-topic",
            sink_topic="out",
            location=tmp_path / "ck",
            trigger=CONTINUOUS,
        ),
    )
    code, job = JobProcess.run_to_exit(spec_path, tmp_path, 90)
    assert code == ExitCode.SOURCE_UNAVAILABLE
    assert "no-such-topic" in job.termination_message()


def test_too_few_slots_for_the_partitions_is_refused_not_hung(kafka_broker, kafka_topic, tmp_path):
    source = kafka_topic(partitions=4)
    spec = query_spec(
        bootstrap=kafka_broker.bootstrap,
        topic=source,
        sink_topic="out",
        location=tmp_path / "ck",
        trigger=CONTINUOUS,
        runtime={"parallelism": 4},
    )
    code, job = JobProcess.run_to_exit(write_resource(tmp_path / "q.yaml", "slots", spec), tmp_path, 90)
    assert code == ExitCode.INVALID_SPEC
    assert "4 partitions need more than 4 slots" in job.termination_message()


@pytest.mark.slow  # minutes on a 2-core machine: `hack/test.sh -m slow` (CI time, tests/e2e/README.md)
def test_a_broker_down_mid_run_is_waited_for_and_the_query_restarts_in_place_losing_nothing(kafka_broker_factory, tmp_path):
    """The broker dies (SIGKILL, data kept): the job stops its query, reports SourceUnavailable while it
    waits, restarts the query from the checkpoint in the same process when the broker is back, and every
    flagged payment arrives."""
    broker = kafka_broker_factory()
    source, sink = "in", "out"
    broker.create_topic(source, 1)
    broker.create_topic(sink, 1)
    before = payments(30)
    broker.produce(source, before)
    spec_path = write_resource(
        tmp_path / "q.yaml",
        "brokergone",
        query_spec(bootstrap=broker.bootstrap, topic=source, sink_topic=sink, location=tmp_path / "ck", trigger=CONTINUOUS),
    )
    job = JobProcess(spec_path, tmp_path, env={"STREAMQ_BROKER_TIMEOUT_SECONDS": "10", "STREAMQ_REPORT_PERIOD_SECONDS": "2"})
    try:
        broker.wait_for_records(sink, set(flagged(before)), timeout=300)
        broker.kill()
        killed = time.monotonic()
        waiting = job.wait_for_record(lambda r: (r.get("health") or {}).get("state") == "SourceUnavailable", 120,
                                      "a SourceUnavailable record")  # fmt: skip
        noticed = time.monotonic() - killed
        time.sleep(10)  # down a while longer: the job waits, it does not exit
        assert job.proc.poll() is None, job.log()[-3000:]
        broker.start()
        back = time.monotonic()
        after = payments(30, start=30)
        broker.produce(source, after)
        out = broker.wait_for_records(sink, set(flagged(before + after)), timeout=180)
        took = time.monotonic() - back
        restarted = job.wait_for_record(lambda r: (r.get("inPlaceRestarts") or 0) >= 1 and r["health"]["state"] != "SourceUnavailable",
                                        60, "a record after the restart in place")  # fmt: skip
        assert job.proc.poll() is None, "the job exited instead of restarting its query in place"
    finally:
        job.signal(signal.SIGTERM)
        code = job.wait(60)
        job.stop()
    duplicates = sum(n - 1 for n in Counter(out).values())
    print(
        f"broker gone: SourceUnavailable after {noticed:.1f}s; all {len(set(out))} flagged records {took:.1f}s after "
        f"the broker came back; {duplicates} duplicates; inPlaceRestarts {restarted['inPlaceRestarts']}"
    )
    assert "unreachable" in waiting["health"]["message"] and "restarts when the broker answers" in waiting["health"]["message"]
    assert "unreachable" in restarted["lastInPlaceRestart"]
    assert set(out) == set(flagged(before + after)), "records lost or unexpected records"
    assert code == ExitCode.OK
    assert "Traceback" not in job.log()


def test_in_place_restarts_are_limited_then_the_job_exits_for_a_new_pod(kafka_broker_factory, tmp_path):
    """inPlaceRestarts 0: the broker gone mid-run ends the process (the operator's restart policy acts)."""
    broker = kafka_broker_factory()
    broker.create_topic("in", 1)
    broker.create_topic("out", 1)
    spec = query_spec(bootstrap=broker.bootstrap, topic="in", sink_topic="out", location=tmp_path / "ck", trigger=CONTINUOUS)
    spec["restartPolicy"] = {"inPlaceRestarts": 0}
    spec_path = write_resource(tmp_path / "q.yaml", "brokergone", spec)
    broker.produce("in", payments(30))
    job = JobProcess(spec_path, tmp_path, env={"STREAMQ_BROKER_TIMEOUT_SECONDS": "10"})
    try:
        job.wait_for_progress(timeout=300, min_batch=1)
        broker.kill()
        code = job.wait(120)
    finally:
        job.stop()
    assert code == ExitCode.QUERY_FAILED, job.log()[-3000:]
    assert "unreachable" in job.termination_message()


def test_query_spark_refuses_exits_as_invalid(kafka_broker, kafka_topic, tmp_path):
    source = kafka_topic()
    spec = query_spec(
        bootstrap=kafka_broker.bootstrap,
        topic=source,
        sink_topic="out",
        location=tmp_path / "ck",
        trigger=CONTINUOUS,
        transforms=[{"where": "no_such_column > 1"}],
    )
    code, job = JobProcess.run_to_exit(write_resource(tmp_path / "q.yaml", "refused", spec), tmp_path, 120)
    assert code == ExitCode.QUERY_REFUSED, job.log()[-3000:]
    assert "QUERY_REFUSED" in job.termination_message() and "no_such_column" in job.termination_message()
