"""Status round trips, status patches, progress parsing, CLI flags, metrics."""

from __future__ import annotations

import json

import pytest
from prometheus_client import generate_latest

from contract.progress import HealthState, ProgressHealth, ProgressRecord
from controller.__main__ import parse_args
from controller.config import Settings
from controller.metrics import Metrics
from controller.phases import Phase
from controller.progress import last_commit_age, last_progress, stalled
from controller.status import QueryStatus, status_patch

pytestmark = pytest.mark.unit


def test_status_parses_what_it_dumps_and_ignores_unknown_fields():
    raw = {"phase": "Running", "restarts": 2, "attempt": 3, "lastFailure": {"reason": "DriverFailed", "exitCode": 70},
           "somethingNew": {"a": 1}, "progress": {"batchId": 4}}  # fmt: skip
    st = QueryStatus.parse(raw)
    assert st.phase is Phase.RUNNING and st.last_failure.exit_code == 70 and st.progress.batch_id == 4
    assert st.dump()["progress"] == {"batchId": 4}
    assert QueryStatus.parse(st.dump()).dump() == st.dump()


def test_an_unreadable_status_keeps_the_counters():
    st = QueryStatus.parse({"phase": "Exploded", "attempt": 4, "restarts": 1})
    assert st.phase is None and (st.attempt, st.restarts) == (4, 1)
    assert QueryStatus.parse(None).attempt == 0


def test_status_patch_touches_only_what_changed():
    old = {"phase": "Running", "restarts": 1, "message": "x", "progress": {"batchId": 1}, "kopf": {"x": 1}}
    new = {"phase": "Restarting", "restarts": 1}
    assert status_patch(old, new) == {"phase": "Restarting", "message": None}
    assert status_patch(new, new) == {}


def test_last_progress_record_from_a_log_tail():
    log = "\n".join([
        "26/01/01 12:00:00 WARN SparkSession: something",
        json.dumps({"event": "progress", "batchId": 6, "committedOffsets": {"t": {"0": 5}}, "timestamp": "T1"}),
        json.dumps({"event": "progress", "batchId": 7, "committedOffsets": {"t": {"0": 9}}, "numInputRows": 4,
                    "inputRowsPerSecond": None, "timestamp": "T2"}),
        "{not json",
        "INFO done",
    ])  # fmt: skip
    progress = last_progress(log)
    assert progress.status_fields() == {"batchId": 7, "committedOffsets": {"t": {"0": 9}}, "numInputRows": 4, "updatedAt": "T2"}
    assert progress.for_status(3).status_fields()["attempt"] == 3
    assert last_progress("nothing here\n") is None


def test_the_full_record_is_kept_and_stalls_are_read_for_the_current_attempt_only():
    record = {"event": "progress", "batchId": 9, "committedOffsets": {"t": {"0": 5}}, "lag": {"t": {"0": 3}}, "totalLag": 3,
              "partitions": {"t": 1}, "slots": 4, "lastCommitTime": "2026-01-01T12:00:00Z", "inFlight": 10,
              "health": {"state": "Stalled", "message": "no commit for 70s"}, "checkpoint": "/ck",
              "checkpointHolds": {"sourceKinds": ["kafka"], "topics": ["t"]}, "timestamp": "T9", "query": "q"}  # fmt: skip
    progress = last_progress(json.dumps(record))
    assert set(progress.status_fields()) == {"batchId", "committedOffsets", "lag", "totalLag", "partitions", "slots",
                                             "lastCommitTime", "inFlight", "health", "checkpoint", "checkpointHolds",
                                             "updatedAt"}  # fmt: skip
    assert stalled(progress.for_status(2), 2) == "no commit for 70s"
    assert stalled(progress.for_status(1), 2) is None  # an earlier driver's report
    healthy = progress.model_copy(update={"health": ProgressHealth(state=HealthState.HEALTHY)})
    assert stalled(healthy.for_status(2), 2) is None
    from datetime import UTC, datetime

    assert last_commit_age(progress, datetime(2026, 1, 1, 12, 1, tzinfo=UTC)) == 60.0
    assert last_commit_age(ProgressRecord(), datetime(2026, 1, 1, tzinfo=UTC)) is None


def test_metrics_export_lag_and_last_commit_age_per_query():
    m = Metrics(clock=lambda: 1767268900.0)  # 2026-01-01T12:01:40Z
    progress = ProgressRecord.model_validate({"totalLag": 7, "lag": {"t": {"0": 3, "1": 4}}, "lastCommitTime": "2026-01-01T12:00:00Z",
                                              "health": {"state": "Stalled"}})  # fmt: skip
    m.observe("ns", "a", "running", Phase.RUNNING, restarted=False, progress=progress)
    text = generate_latest(m.registry).decode()
    assert 'streamq_query_lag_records{namespace="ns",query="a"} 7.0' in text
    assert 'streamq_query_partition_lag_records{namespace="ns",partition="1",query="a",topic="t"} 4.0' in text
    assert 'streamq_query_last_commit_age_seconds{namespace="ns",query="a"} 100.0' in text
    assert 'streamq_query_last_commit_timestamp_seconds{namespace="ns",query="a"} 1.7672688e+09' in text
    assert 'streamq_query_stalled{namespace="ns",query="a"} 1.0' in text
    m.observe("ns", "a", "running", Phase.RUNNING, restarted=False, progress=progress.model_copy(update={"lag": {"t": {"0": 0}}}))
    assert 'partition="1"' not in generate_latest(m.registry).decode()  # a partition no longer reported goes
    m.forget("ns", "a")
    assert 'query="a"' not in generate_latest(m.registry).decode()


def test_cli_flags_and_environment():
    args = parse_args([], env={})
    assert args.namespaces is None and not args.standalone and args.metrics_port == 9090 and args.peering is None
    args = parse_args([], env={"STREAMQ_NAMESPACES": "a, b", "STREAMQ_PEERING": "streamq", "STREAMQ_METRICS_PORT": "0"})
    assert args.namespaces == ["a", "b"] and args.peering == "streamq" and args.metrics_port == 0
    args = parse_args(["-n", "x", "--standalone", "--liveness", "http://0.0.0.0:8080/healthz"], env={"STREAMQ_NAMESPACES": "a"})
    assert args.namespaces == ["x"] and args.standalone and args.liveness.endswith("/healthz")
    with pytest.raises(SystemExit):
        parse_args(["-n", "x", "-A"], env={})
    with pytest.raises(SystemExit):
        parse_args(["--standalone", "--peering", "p"], env={})


def test_settings_from_environment():
    s = Settings.from_env({"STREAMQ_JOB_IMAGE": "img:1", "STREAMQ_RUN_AS_USER": "2000", "STREAMQ_PROGRESS_INTERVAL_SECONDS": "5"})
    assert (s.job_image, s.run_as_user, s.progress_interval_s) == ("img:1", 2000, 5.0)
    assert Settings.from_env({}).job_image == "streamq:0.1.0"


def test_metrics_count_reconciles_restarts_and_phases():
    m = Metrics()
    m.observe("ns", "a", "create", Phase.STARTING, restarted=False)
    m.observe("ns", "b", "backoff", Phase.RESTARTING, restarted=True)
    m.observe("ns", "a", "running", Phase.RUNNING, restarted=False)
    text = generate_latest(m.registry).decode()
    assert 'streamq_reconciles_total{verb="create"} 1.0' in text
    assert 'streamq_query_restarts_total{namespace="ns",query="b"} 1.0' in text
    assert 'streamq_queries{phase="Running"} 1.0' in text and 'streamq_queries{phase="Starting"} 0.0' in text
    m.forget("ns", "b")
    text = generate_latest(m.registry).decode()
    assert 'streamq_queries{phase="Restarting"} 0.0' in text and 'query="b"' not in text


def test_replicas_get_distinct_peering_priorities_unless_one_is_given():
    # kopf pauses all replicas that share a priority: HA needs them to differ.
    priorities = {parse_args([], env={}).priority for _ in range(20)}
    assert len(priorities) > 1
    assert parse_args([], env={"STREAMQ_PEERING_PRIORITY": "7"}).priority == 7
    assert parse_args(["--priority", "9"], env={}).priority == 9


def test_metrics_export_the_executors_the_recommendation_and_each_resize():
    m = Metrics()
    m.sized("ns", "a", 2, 6, resizes=[(2, 6)])
    m.sized("ns", "a", 6, 3, resizes=[(6, 3)])
    text = generate_latest(m.registry).decode()
    assert 'streamq_query_executors{namespace="ns",query="a"} 6.0' in text
    assert 'streamq_query_executors_recommended{namespace="ns",query="a"} 3.0' in text
    assert 'streamq_query_scalings_total{direction="up",namespace="ns",query="a"} 1.0' in text
    assert 'streamq_query_scalings_total{direction="down",namespace="ns",query="a"} 1.0' in text
    m.forget("ns", "a")
    assert "streamq_query_executors{" not in (text := generate_latest(m.registry).decode()) and "scalings_total{" not in text
