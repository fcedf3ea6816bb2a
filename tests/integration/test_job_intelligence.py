"""What the job knows about its own query, on real Spark and a real broker (`python -m app`
as the driver pod runs it): lag, a real stall, a lost checkpoint, a spec the checkpoint
cannot take, partitions added while it runs."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections import Counter

import pytest

from app.checkpoints.reader import read_checkpoint
from contract import RESUME_ANNOTATION, ExitCode
from contract.progress import ProgressRecord
from contract.resume import ResumeFrom
from testbed.jobs import ROOT, JobProcess, SteadyProducer
from testbed.specs import flagged, payments, query_spec, write_resource
from testbed.wait import wait_for

pytestmark = pytest.mark.integration

CONTINUOUS = {"continuous": {"checkpointInterval": "1s"}}
# look every second, report at least every 2 s: the tests wait on records, not on sleeps
FAST = {"STREAMQ_WATCH_PERIOD_SECONDS": "1", "STREAMQ_REPORT_PERIOD_SECONDS": "2"}


def inspect_lag(location, spec_path) -> int:
    out = subprocess.run([sys.executable, "-m", "app", "checkpoint", "inspect", str(location), "--json", "--spec", str(spec_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["lag"]["total"]


def stop(job: JobProcess) -> int:
    job.signal(signal.SIGTERM)
    try:
        return job.wait(90)
    finally:
        job.stop()


@pytest.mark.slow  # CI time (~60 s): the lag the job reports is checked in status by tests/e2e/test_observability.py
def test_lag_rises_while_the_job_is_stopped_and_falls_to_zero_after_resume(kafka_broker, kafka_topic, tmp_path):
    source, sink = kafka_topic(partitions=2), kafka_topic()
    spec_path = write_resource(
        tmp_path / "q.yaml",
        "lag",
        query_spec(bootstrap=kafka_broker.bootstrap, topic=source, sink_topic=sink, location=tmp_path / "ck", trigger=CONTINUOUS),
    )
    producer = SteadyProducer(kafka_broker, source, per_batch=10, period_s=0.2)  # ~50 records/s
    producer.start()
    first = JobProcess(spec_path, tmp_path, env=FAST)
    try:
        caught_up = first.wait_for_record(lambda r: r["batchId"] is not None and r["totalLag"] is not None, 240,
                                          "a committed epoch with its lag")  # fmt: skip
        assert stop(first) == ExitCode.OK
    finally:
        first.stop()
    running = [r["totalLag"] for r in first.records() if r["batchId"] is not None and r["totalLag"] is not None]
    # stopped: nobody reads, the producer goes on; measured against the checkpoint, as the operator cannot
    stopped = [inspect_lag(tmp_path / "ck", spec_path)]
    for _ in range(2):
        stopped.append(wait_for(lambda: next((lag for lag in [inspect_lag(tmp_path / "ck", spec_path)] if lag > stopped[-1]), None),
                                60, f"the lag to rise above {stopped[-1]} while the job is stopped"))  # fmt: skip
    second = JobProcess(spec_path, tmp_path, env=FAST)
    try:
        resumed = second.wait_for_record(lambda r: r["totalLag"] is not None, 240, "the resumed job's first lag")
        producer.stop()
        zero = second.wait_for_record(lambda r: r["totalLag"] == 0 and r["batchId"] is not None, 240, "lag 0")
        assert stop(second) == ExitCode.OK
    finally:
        second.stop()
        producer.stop()
    print(
        f"lag while running {running} (first at epoch {caught_up['batchId']}); while stopped {stopped}; "
        f"resumed at {resumed['totalLag']}; 0 at epoch {zero['batchId']} ({len(producer.sent)} records sent)"
    )
    assert stopped[0] < stopped[1] < stopped[2], "lag must rise while the job is stopped and input continues"
    assert resumed["totalLag"] >= stopped[-1]
    assert zero["lag"] == {source: {"0": 0, "1": 0}}
    assert sum(zero["committedOffsets"][source].values()) == len(producer.sent)


def test_a_query_short_of_slots_really_hangs_and_is_reported_stalled_within_the_window(kafka_broker, kafka_topic, tmp_path):
    """3 partitions on 2 slots in continuous mode: Spark hangs silently (no commit, no error).
    The preflight that refuses this is bypassed, so the watchdog has to find out."""
    source, sink = kafka_topic(partitions=3), kafka_topic()
    kafka_broker.produce(source, payments(30))
    spec = query_spec(bootstrap=kafka_broker.bootstrap, topic=source, sink_topic=sink, location=tmp_path / "ck", trigger=CONTINUOUS, runtime={"parallelism": 2},
                      health={"stallAfterIntervals": 5, "minStallTime": "5s"})  # fmt: skip
    job = JobProcess(write_resource(tmp_path / "q.yaml", "starved", spec), tmp_path,
                     env={**FAST, "STREAMQ_FAILPOINT": "skip-slot-check"})  # fmt: skip
    try:
        code = job.wait(300)
    finally:
        job.stop()
    records = job.records()
    stalled = [r for r in records if r["health"]["state"] == "Stalled"]
    print(
        f"exit {code}; {len(records)} records; stalled after {stalled[0]['health']['waitingSeconds'] if stalled else '?'}s "
        f"(window {stalled[0]['health']['stallAfterSeconds'] if stalled else '?'}s): {job.termination_message()}"
    )
    assert code == ExitCode.STALLED, job.log()[-3000:]
    assert stalled, "no Stalled report before the exit"
    report = stalled[0]
    assert report["batchId"] is None and report["totalLag"] == 30 and report["slots"] == 2 and report["partitions"] == {source: 3}
    assert report["health"]["stallAfterSeconds"] == 5.0
    assert 5.0 < report["health"]["waitingSeconds"] <= 5.0 + 6.0  # within the window plus a look (slow on a loaded machine)
    assert all(r["health"]["state"] != "Stalled" for r in records[: records.index(report)])
    assert job.termination_message().startswith("STALLED: stalled: no commit for")
    assert read_checkpoint(tmp_path / "ck").last_committed is None  # it really hung: nothing was ever committed


@pytest.mark.slow  # CI time: test_operator_progress.py's lost checkpoint resumes through the operator too
def test_a_deleted_checkpoint_loses_no_records(kafka_broker, kafka_topic, tmp_path):
    """startingOffsets is latest: without the offsets the operator keeps in status, a fresh
    checkpoint would skip everything produced while the job was down."""
    source, sink = kafka_topic(partitions=2), kafka_topic()
    ck = tmp_path / "ck"
    spec = query_spec(bootstrap=kafka_broker.bootstrap, topic=source, sink_topic=sink, location=ck, trigger=CONTINUOUS)
    spec["source"]["kafka"]["startingOffsets"] = "latest"
    spec_path = write_resource(tmp_path / "q.yaml", "lost", spec)
    first = JobProcess(spec_path, tmp_path, env=FAST)
    producer = SteadyProducer(kafka_broker, source, per_batch=10, period_s=0.2)
    try:
        started = first.wait_for_record(lambda r: r["batchId"] is not None, 240, "a first commit")
        start = {int(p): o for p, o in started["committedOffsets"].get(source, {}).items()}
        producer.start()
        first.wait_for_record(lambda r: sum(r["committedOffsets"].get(source, {}).values()) >= sum(start.values()) + 100,
                              240, "100 records committed")  # fmt: skip
        assert stop(first) == ExitCode.OK
    finally:
        first.stop()
    printed = first.progress_file.read_text()
    last = json.loads(printed)
    shutil.rmtree(ck)
    sent = len(producer.sent)  # input keeps arriving while there is no job and no checkpoint
    wait_for(lambda: len(producer.sent) >= sent + 100, 60, "100 payments while no job runs")
    down = {p: o for p, o in kafka_broker.end_offsets(source).items()}
    resume = ResumeFrom.from_progress(ProgressRecord.from_line(printed).for_status(), str(ck))  # as status.progress holds it
    write_resource(spec_path, "lost", spec, annotations={RESUME_ANNOTATION: resume.to_annotation()})
    second = JobProcess(spec_path, tmp_path, env=FAST)
    try:
        recovered = second.wait_for_record(lambda r: r.get("recovered"), 240, "a record saying it recovered")
        second.wait_for_record(lambda r: r["batchId"] is not None, 240, "a commit on the fresh checkpoint")
        # and input that arrived while it runs
        second.wait_for_record(lambda r: sum(r["committedOffsets"].get(source, {}).values()) > sum(down.values()), 240,
                               "a commit past the input that arrived while no job ran")  # fmt: skip
        producer.stop()
        expected = {rec for rec, (p, o) in zip(producer.sent, producer.positions, strict=True) if o >= start.get(p, 0)} & set(
            flagged(producer.sent)
        )
        out = kafka_broker.wait_for_records(sink, expected, timeout=180)
        assert stop(second) == ExitCode.OK
    finally:
        second.stop()
        producer.stop()
    committed = {int(p): o for p, o in last["committedOffsets"][source].items()}
    while_down = sum(down[p] - committed[p] for p in down)
    missing = expected - set(out)
    duplicates = sum(n - 1 for n in Counter(out).values())
    print(
        f"{len(producer.sent)} payments sent, {len(expected)} flagged expected, {len(set(out))} distinct written, "
        f"{duplicates} duplicates; {while_down} records arrived while the checkpoint was gone; "
        f"restarted from {recovered['recovered']['startingOffsets']}"
    )
    assert recovered["recovered"]["reason"] == "missing" and recovered["recovered"]["batchId"] == last["batchId"]
    assert "the checkpoint at" in second.log() and "starting a fresh one from the offsets committed at batch" in second.log()
    assert while_down > 0
    assert not missing, f"{len(missing)} flagged payments never arrived"


def test_a_spec_the_checkpoint_cannot_take_is_refused_naming_the_field(kafka_broker, kafka_topic, tmp_path):
    a, b, sink = kafka_topic(), kafka_topic(), kafka_topic()
    kafka_broker.produce(a, payments(9))
    ck = tmp_path / "ck"
    spec = query_spec(bootstrap=kafka_broker.bootstrap, topic=a, sink_topic=sink, location=ck, trigger=CONTINUOUS)
    first = JobProcess(write_resource(tmp_path / "a.yaml", "change", spec), tmp_path, env=FAST)
    try:
        first.wait_for_record(lambda r: r["batchId"] is not None, 240, "a first commit")
        assert stop(first) == ExitCode.OK
    finally:
        first.stop()

    spec["source"]["kafka"]["topics"] = [b]
    refused = JobProcess(write_resource(tmp_path / "b.yaml", "change", spec), tmp_path)
    try:
        code = refused.wait(120)
    finally:
        refused.stop()
    message = refused.termination_message()
    print(f"exit {code}: {message}")
    assert code == ExitCode.INVALID_SPEC
    assert message.startswith(f"INVALID_SPEC: spec.source.kafka.topics: the checkpoint holds offsets of topics ['{a}'], "
                              f"the spec reads ['{b}']")  # fmt: skip
    assert "spec.checkpoint.location" in message and "onIncompatibleChange: newCheckpoint" in message
    assert "started in continuous mode" not in refused.log()  # refused before Spark started

    spec["checkpoint"]["onIncompatibleChange"] = "newCheckpoint"
    fresh = JobProcess(write_resource(tmp_path / "c.yaml", "change", spec), tmp_path, env=FAST)
    try:
        record = fresh.wait_for_record(lambda r: r["batchId"] is not None, 240, "a commit on a fresh checkpoint")
        assert stop(fresh) == ExitCode.OK
    finally:
        fresh.stop()
    assert record["checkpoint"] == f"{ck}-reset-1" and list(record["committedOffsets"]) == [b]
    assert read_checkpoint(ck).kafka_offsets().keys() == {a}  # the old checkpoint is left as it was


@pytest.mark.slow  # CI time (~65 s): the rule that restarts it is tests/unit/app/test_health.py's
def test_partitions_added_while_running_restart_an_auto_sized_query_with_more_slots(kafka_broker, kafka_topic, tmp_path):
    from confluent_kafka.admin import NewPartitions

    source, sink = kafka_topic(partitions=2), kafka_topic()
    spec = query_spec(
        bootstrap=kafka_broker.bootstrap, topic=source, sink_topic=sink, location=tmp_path / "ck", trigger=CONTINUOUS, runtime={}
    )  # parallelism unset
    spec_path = write_resource(tmp_path / "q.yaml", "grow", spec)
    first = JobProcess(spec_path, tmp_path, env=FAST)
    try:
        sized = first.wait_for_record(lambda r: r["batchId"] is not None, 240, "a first commit")
        admin = kafka_broker.admin()  # keep the client alive until its answer comes
        admin.create_partitions([NewPartitions(source, 4)])[source].result(30)
        code = first.wait(120)
    finally:
        first.stop()
    message = first.termination_message()
    print(f"sized local[{sized['slots']}] for {sized['partitions']}; then exit {code}: {message}")
    assert sized["slots"] == 4 and sized["partitions"] == {source: 2}
    assert code == ExitCode.PARTITIONS_CHANGED
    assert f"source partitions grew ({source} 2->4)" in message and "restarting with local[6]" in message

    records = payments(12)
    second = JobProcess(spec_path, tmp_path, env=FAST)
    try:
        resized = second.wait_for_record(lambda r: r["slots"] == 6 and r["batchId"] is not None, 240, "local[6]")
        for partition in (2, 3):  # the new partitions are read too
            kafka_broker.produce(source, records, partition=partition)
        out = kafka_broker.consume_all(sink, timeout=120, expected_count=2 * len(flagged(records)), decode=True)
        assert stop(second) == ExitCode.OK
    finally:
        second.stop()
    assert resized["partitions"] == {source: 4}
    assert sorted(out) == sorted(flagged(records) * 2)


def test_dropping_the_stateful_step_of_a_query_is_refused_naming_the_field(kafka_broker, kafka_topic, tmp_path):
    """The checkpoint of an aggregation holds its state; a spec without the aggregation would
    run on it and silently drop that state: refused before Spark starts."""
    source, sink = kafka_topic(partitions=2), kafka_topic()
    kafka_broker.produce(source, payments(20))
    counting = [{"sql": "SELECT CAST(key AS STRING) AS key, CAST(count(*) AS STRING) AS value FROM input GROUP BY key"}]
    spec = query_spec(bootstrap=kafka_broker.bootstrap, topic=source, sink_topic=sink, location=tmp_path / "ck", trigger={"microBatch": {"interval": "1s"}},
                      transforms=counting, outputMode="update")  # fmt: skip
    first = JobProcess(write_resource(tmp_path / "a.yaml", "counts", spec), tmp_path, env=FAST)
    try:
        record = first.wait_for_record(lambda r: r["batchId"] is not None and r["checkpointHolds"]["statefulOperators"],
                                       240, "a commit with state")  # fmt: skip
        assert stop(first) == ExitCode.OK
    finally:
        first.stop()
    assert record["checkpointHolds"]["statefulOperators"] == ["stateStoreSave"]

    spec.pop("outputMode")
    spec["transforms"] = [{"where": "value IS NOT NULL"}]
    refused = JobProcess(write_resource(tmp_path / "b.yaml", "counts", spec), tmp_path)
    try:
        code = refused.wait(120)
    finally:
        refused.stop()
    print(f"exit {code}: {refused.termination_message()}")
    assert code == ExitCode.INVALID_SPEC
    assert refused.termination_message().startswith(
        "INVALID_SPEC: spec.transforms: the checkpoint holds the state of stateful operator(s) stateStoreSave"
    )
