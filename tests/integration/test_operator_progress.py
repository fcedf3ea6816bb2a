"""The operator shows what the real job measures: progress, lag and a real stall reach
status, conditions, events and printer columns through the real kube-apiserver.

The job runs here as a process (real Spark, the real broker) from the document the
operator wrote into the query's ConfigMap; the test plays the kubelet: it binds the
driver pod to a node, writes the pod's status, and serves the job's log where the
API server asks the kubelet for it (tests/support/kubelet_logs.py)."""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from datetime import datetime

import pytest

from contract import RESUME_ANNOTATION, ExitCode
from controller import names
from testbed.jobs import JobProcess
from testbed.kube import free_port
from testbed.specs import RATE_TO_CONSOLE, flagged, payments, query_spec
from testbed.wait import wait_for

pytestmark = pytest.mark.integration


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def degraded(status: dict) -> dict:
    return next((c for c in status.get("conditions", []) if c["type"] == "Degraded"), {})


def test_a_real_stall_becomes_degraded_stalled_in_status_with_an_event_and_a_restart(
    cluster, start_operator, kubelet, kube_apiserver, kafka_broker, kafka_topic, tmp_path
):
    metrics_port = free_port()
    start_operator(metrics_port=metrics_port, STREAMQ_PROGRESS_INTERVAL_SECONDS="1")
    source, sink = kafka_topic(partitions=3), kafka_topic()
    kafka_broker.produce(source, payments(30))
    spec = query_spec(bootstrap=kafka_broker.bootstrap, topic=source, sink_topic=sink, location=tmp_path / "ck", trigger={"continuous": {"checkpointInterval": "1s"}},
                      runtime={"parallelism": 2}, health={"stallAfterIntervals": 5, "minStallTime": "5s"},
                      restartPolicy={"backoff": {"initial": "1s", "max": "2s"}, "maxRestarts": 3})  # fmt: skip
    cluster.apply("q", spec)
    pod = cluster.wait_driver("q", 1).metadata.name
    document = tmp_path / "query.json"
    document.write_text(json.dumps(cluster.query_document("q")))
    kubelet.bind(cluster.core, cluster.namespace, pod, kubelet.node)
    # 3 partitions on 2 slots: the preflight that refuses it is bypassed, Spark hangs for real
    job = JobProcess(document, tmp_path, env={"STREAMQ_WATCH_PERIOD_SECONDS": "1", "STREAMQ_REPORT_PERIOD_SECONDS": "2",
                                              "STREAMQ_FAILPOINT": "skip-slot-check"})  # fmt: skip
    kubelet.serve(cluster.namespace, pod, names.DRIVER_CONTAINER, job.log_path)
    cluster.pod_runs(pod)
    try:
        status = cluster.wait_status("q", lambda s: (s.get("progress") or {}).get("totalLag") == 30, timeout=300,
                                     what="the job's lag in status.progress")  # fmt: skip
        assert status["progress"]["partitions"] == {source: 3} and status["progress"]["slots"] == 2
        assert status["progress"]["health"]["state"] == "Healthy" and status["progress"]["attempt"] == 1
        row = kube_apiserver.kubectl("-n", cluster.namespace, "get", "sq", "q").stdout.splitlines()
        assert row[0].split() == ["NAME", "PHASE", "REASON", "MODE", "RESTARTS", "EPOCH", "LAG", "AGE"]
        assert row[1].split()[:5] == ["q", "Running", "DriverRunning", "continuous", "0"] and row[1].split()[5] == "30"
        labels = f'namespace="{cluster.namespace}",query="q"'
        wait_for(lambda: f"streamq_query_lag_records{{{labels}}} 30.0" in scrape(metrics_port), 30, "the lag gauge")
        metrics = scrape(metrics_port)
        per_partition = [line for line in metrics.splitlines() if line.startswith("streamq_query_partition_lag_records{")
                         and f'namespace="{cluster.namespace}"' in line]  # fmt: skip
        assert len(per_partition) == 3 and sum(float(line.split()[-1]) for line in per_partition) == 30

        status = cluster.wait_status("q", lambda s: degraded(s).get("reason") == "Stalled", timeout=120, what="Degraded/Stalled")
        seen_at, seen_wall = time.monotonic(), time.time()
        assert degraded(status)["status"] == "True" and "no commit for" in degraded(status)["message"]
        assert status["phase"] == "Running" and status["progress"]["health"]["state"] == "Stalled"
        event = cluster.wait_event("q", "Stalled")
        assert event.type == "Warning" and "record(s) wait in the source" in event.message
        wide = kube_apiserver.kubectl("-n", cluster.namespace, "get", "sq", "q", "-o", "wide").stdout
        assert "Stalled" in wide
        wait_for(lambda: f"streamq_query_stalled{{{labels}}} 1.0" in scrape(metrics_port), 30, "the stalled gauge")

        code = job.wait(120)
        exited_at = time.monotonic()
    finally:
        job.stop()
    started = next(r for r in job.records())["timestamp"]
    stalled = next(r for r in job.records() if r["health"]["state"] == "Stalled")
    reported = datetime.fromisoformat(stalled["timestamp"].replace("Z", "+00:00")).timestamp()
    print(
        f"query started {started}; job reported Stalled at {stalled['timestamp']} after {stalled['health']['waitingSeconds']}s "
        f"(window {stalled['health']['stallAfterSeconds']}s); in status {seen_wall - reported:.1f}s later; "
        f"the job exited {exited_at - seen_at:.1f}s after status showed it"
    )
    assert code == ExitCode.STALLED
    cluster.pod_dies(pod, code, job.termination_message())  # what the kubelet reports for the exited container
    status = cluster.wait_status("q", lambda s: s.get("restarts") == 1, what="a restart after the stall")
    assert status["lastFailure"]["reason"] == "Stalled" and status["lastFailure"]["exitCode"] == 75
    assert degraded(status)["status"] == "True" and degraded(status)["reason"] == "Stalled"
    cluster.wait_driver("q", 2)


def test_the_next_driver_gets_the_offsets_committed_in_status_for_a_lost_checkpoint(cluster, start_operator):
    start_operator()
    cluster.apply("q", query_spec(RATE_TO_CONSOLE, source={"kafka": {"bootstrapServers": "kafka:9092", "topics": ["payments"]}},
                                 sink={"console": {}}, runtime={"parallelism": 4}))  # fmt: skip
    cluster.wait_driver("q", 1)
    cluster.pod_runs("q-driver-1")
    cluster.wait_phase("q", "Running")
    assert RESUME_ANNOTATION not in (cluster.query_document("q")["metadata"].get("annotations") or {})
    # the last record the driver reported, as the operator stored it
    cluster.custom.patch_namespaced_custom_object_status("streamq.io", "v1alpha1", cluster.namespace, "streamingqueries", "q", {
        "status": {"progress": {"batchId": 41, "committedOffsets": {"payments": {"0": 1200, "1": 1187}},
                                "checkpoint": "/checkpoints/q", "attempt": 1}}})  # fmt: skip
    cluster.pod_dies("q-driver-1", 70, "QUERY_FAILED: the volume went away")
    cluster.wait_driver("q", 2)
    resume = json.loads(cluster.query_document("q")["metadata"]["annotations"][RESUME_ANNOTATION])
    assert resume == {"startingOffsets": '{"payments":{"0":1200,"1":1187}}', "batchId": 41, "checkpoint": "/checkpoints/q"}


def test_a_lost_checkpoint_resumes_from_the_offsets_in_status_and_says_so(
    cluster, start_operator, kubelet, kafka_broker, kafka_topic, tmp_path
):
    """Driver 1 (a real job) commits and the operator keeps its offsets in status; the
    checkpoint directory is then deleted; driver 2 (a real job, from the document the
    operator wrote) starts a fresh checkpoint from those offsets: nothing is skipped
    although startingOffsets is latest, and an event says what happened."""
    start_operator(STREAMQ_PROGRESS_INTERVAL_SECONDS="1")
    source, sink = kafka_topic(partitions=2), kafka_topic()
    ck = tmp_path / "ck"
    spec = query_spec(bootstrap=kafka_broker.bootstrap, topic=source, sink_topic=sink, location=ck, trigger={"continuous": {"checkpointInterval": "1s"}},
                      restartPolicy={"backoff": {"initial": "1s", "max": "2s"}, "maxRestarts": 3})  # fmt: skip
    spec["source"]["kafka"]["startingOffsets"] = "latest"
    cluster.apply("q", spec)
    env = {"STREAMQ_WATCH_PERIOD_SECONDS": "1", "STREAMQ_REPORT_PERIOD_SECONDS": "2"}

    def run_driver(attempt: int) -> tuple[str, JobProcess]:
        pod = cluster.wait_driver("q", attempt).metadata.name
        document = tmp_path / f"query-{attempt}.json"
        document.write_text(json.dumps(cluster.query_document("q")))
        kubelet.bind(cluster.core, cluster.namespace, pod, kubelet.node)
        job = JobProcess(document, tmp_path, env=env)
        kubelet.serve(cluster.namespace, pod, names.DRIVER_CONTAINER, job.log_path)
        cluster.pod_runs(pod)
        return pod, job

    pod, first = run_driver(1)
    try:
        first.wait_for_record(lambda r: r["batchId"] is not None, 300, "a first commit")
        before = payments(30)
        kafka_broker.produce(source, before)
        status = cluster.wait_status("q", lambda s: sum((s.get("progress") or {}).get("committedOffsets", {}).get(source, {}).values()) >= 30,
                                     timeout=120, what="the committed offsets in status")  # fmt: skip
        first.signal(15)
        code = first.wait(90)
    finally:
        first.stop()
    in_status = status["progress"]["committedOffsets"][source]
    shutil.rmtree(ck)  # the volume is gone
    during = payments(30, start=30)
    kafka_broker.produce(source, during)  # while no driver runs and no checkpoint exists
    cluster.pod_dies(pod, 70, "QUERY_FAILED: the checkpoint volume went away")

    pod, second = run_driver(2)
    try:
        annotation = json.loads(cluster.query_document("q")["metadata"]["annotations"][RESUME_ANNOTATION])
        handed_on = json.loads(annotation["startingOffsets"])[source]
        assert annotation["checkpoint"] == str(ck) and set(handed_on) == set(in_status)
        assert all(handed_on[p] >= in_status[p] for p in in_status)  # the newest the operator had read
        event = cluster.wait_event("q", "CheckpointLost", timeout=300)
        out = kafka_broker.consume_all(sink, timeout=120, expected_count=len(flagged(before + during)), decode=True)
        status = cluster.status("q")
        second.signal(15)
        second.wait(90)
    finally:
        second.stop()
    print(
        f"first driver exited {code} with {in_status} in status; {len(during)} records while the checkpoint was gone; "
        f"event: {event.message}; {len(set(out))} of {len(flagged(before + during))} flagged written"
    )
    assert (
        event.type == "Warning" and f"the checkpoint at {ck} was missing" in event.message and "nothing skipped" in event.message
    )
    assert status["progress"]["recovered"]["reason"] == "missing"
    assert set(flagged(before + during)) <= set(out), "records produced while the checkpoint was gone were skipped"
