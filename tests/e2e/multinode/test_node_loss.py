"""A worker that stops answering, for real: its kind node container is paused (kubelet, containerd
and every process of its pods frozen at once, without warning), on a cluster with two workers and
the checkpoints in an object store.

* With a standby: the standby on the other worker takes over once the Lease has expired. The
  figure is the seconds from the pause to the standby's first record (3 runs, p50 <= 15 s). When
  the node comes back, the old driver wakes up fenced (app/driver/write_fence.py): no record it handed to its
  producer after the pause is in the output (every record says which driver wrote it).
* Without a standby: Kubernetes gives up on the node (NotReady after its node-monitor-grace-period,
  then restartPolicy.nodeLostAfter, 5 s for a driver that holds the query's Lease); the operator
  force-deletes the evicted driver once its hold of the Lease has lapsed and starts the next one
  on the other worker: Running within 90 s, nothing lost, and the old driver fenced as above.
* An executor's node: the query carries on with new executors, nothing lost.
"""

from __future__ import annotations

import json
import statistics
import time

import pytest

from testbed.cluster.workload import figure, flagged, fraud_spec_s3, payments, standby_waiting, wait_output
from testbed.wait import wait_for
from tests.e2e.multinode.conftest import BUCKET, S3_SECRET
from tests.support.writers import written, written_after

pytestmark = [pytest.mark.multinode, pytest.mark.timeout(3600)]

RATE = 30  # payments per second while the node is down: 10 flagged per second
RUNS = 3


def s3_fraud_spec(store, source: str, sink: str, name: str, **extra) -> dict:
    """The fraud filter in continuous mode, its checkpoint in the object store (one bucket: SeaweedFS
    gives every bucket volumes of its own, and a small store runs out of them)."""
    return fraud_spec_s3(source, sink, name, store, BUCKET, S3_SECRET, **extra)


def _pod(sq, name: str) -> dict:
    return json.loads(sq.kubectl("get", "pod", name, "-o", "json").stdout)


def _node_ready(cluster, node: str) -> bool:
    conditions = cluster.kubectl_json("get", "node", node)["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _driver_ended(sq, pod: str) -> bool:
    try:
        found = _pod(sq, pod)
    except Exception:  # noqa: BLE001 - deleted: ended
        return True
    states = [s.get("state", {}) for s in found["status"].get("containerStatuses") or [] if s["name"] == "driver"]
    return found["status"].get("phase") in ("Succeeded", "Failed") or any("terminated" in s for s in states)


def _standby_run(cluster, kafka, sq, store, run: int) -> float:
    name = sq.name(f"node-standby-{run}")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    sq.apply(name, s3_fraud_spec(store, source, sink, name, **{"runtime.standby": True, "runtime.driver.coreRequest": "250m"}))
    sq.wait_running(name, timeout=420)
    first = payments(90)
    kafka.produce(source, first)
    wait_output(kafka, sink, flagged(first), 240, lambda: sq.describe(name))
    standby = standby_waiting(sq, name)
    active = sq.driver_pod(name)
    old, node = active["metadata"]["name"], active["spec"]["nodeName"]
    standby_node = _pod(sq, standby)["spec"]["nodeName"]
    assert node != standby_node, f"driver and standby both on {node}: not spread (controller.render.driver_affinity)"

    during = payments(RATE * 40, start=len(first))
    producer = kafka.produce_paced(source, during, RATE)
    time.sleep(5)  # mid-stream
    cluster.pause_node(node)
    paused_at, t0 = time.time(), time.monotonic()
    try:
        wait_for(lambda: any(r.writer == standby for r in written(kafka.bootstrap, sink)), 180,
                 lambda: f"the standby's first record after {node} was paused\n" + sq.describe(name), interval=0.3)  # fmt: skip
        took = time.monotonic() - t0
        producer.join(120)
    finally:
        cluster.unpause_node(node)
    # The old driver wakes up: fenced, it stops without writing.
    wait_for(lambda: _driver_ended(sq, old), 240, lambda: f"the old driver {old} stopped after {node} came back\n"
             + sq.describe(name), interval=2, ignore=(Exception,))  # fmt: skip
    wait_for(lambda: _node_ready(cluster, node), 180, f"{node} Ready again", interval=2, ignore=(Exception,))
    last = payments(60, start=len(first) + len(during))
    kafka.produce(source, last)
    out = wait_output(kafka, sink, flagged(first + during + last), 300, lambda: sq.describe(name))
    late = written_after(written(kafka.bootstrap, sink), old, paused_at + 0.5)
    figure(f"node lost, standby (run {run})", f"{node} paused: standby {standby} on {standby_node} wrote its first record "
           f"{took:.1f}s later; {out.summary()}; records of the old driver {old} created after the pause: {len(late)}")  # fmt: skip
    assert late == [], f"the old driver wrote {len(late)} records after the pause, e.g. {late[:3]}"
    assert not out.unexpected, sorted(out.unexpected)[:5]
    assert out.complete, out.summary()
    sq.kubectl("delete", "sq", name, "--wait=true", timeout=180)  # two drivers fewer for the next run
    return took


def test_a_stopped_worker_hands_the_query_to_the_standby_on_the_other_worker(cluster, kafka, sq, object_store):
    took = [_standby_run(cluster, kafka, sq, object_store, run) for run in range(1, RUNS + 1)]
    p50 = statistics.median(took)
    figure("node lost, standby", f"pause -> the standby's first record over {RUNS} runs: p50 {p50:.1f}s, "
           f"min {min(took):.1f}s, max {max(took):.1f}s ({', '.join(f'{t:.1f}' for t in took)})")  # fmt: skip
    assert p50 <= 15, took


def test_without_a_standby_the_query_runs_on_the_other_worker_within_90s(cluster, kafka, sq, object_store):
    name = sq.name("node-alone")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    sq.apply(name, s3_fraud_spec(object_store, source, sink, name))
    status = sq.wait_running(name, timeout=420)
    first = payments(90)
    kafka.produce(source, first)
    wait_output(kafka, sink, flagged(first), 240, lambda: sq.describe(name))
    active = sq.driver_pod(name)
    old, node = active["metadata"]["name"], active["spec"]["nodeName"]
    during = payments(RATE * 120, start=len(first))
    producer = kafka.produce_paced(source, during, RATE)
    time.sleep(5)  # the feed runs through the driver for a while before its node stops: records in flight at the fault
    cluster.pause_node(node)
    paused_at, t0 = time.time(), time.monotonic()
    try:
        back = sq.wait_running(name, timeout=300, since_attempt=status["attempt"])
        running_after = time.monotonic() - t0
        new = sq.driver_pod(name)
        wait_for(lambda: any(r.writer == new["metadata"]["name"] for r in written(kafka.bootstrap, sink)), 120,
                 lambda: "the new driver's first record\n" + sq.describe(name), interval=0.5)  # fmt: skip
        output_after = time.monotonic() - t0
    finally:
        cluster.unpause_node(node)
    producer.join(240)
    wait_for(lambda: _node_ready(cluster, node), 180, f"{node} Ready again", interval=2, ignore=(Exception,))
    last = payments(60, start=len(first) + len(during))
    kafka.produce(source, last)
    out = wait_output(kafka, sink, flagged(first + during + last), 300, lambda: sq.describe(name))
    late = written_after(written(kafka.bootstrap, sink), old, paused_at + 0.5)
    figure("node lost, no standby", f"{node} paused: {back['driver']} on {new['spec']['nodeName']} Running "
           f"{running_after:.0f}s later, its first record {output_after:.0f}s after the pause; {out.summary()}; records of "
           f"the old driver {old} created after the pause: {len(late)}")  # fmt: skip
    assert new["spec"]["nodeName"] != node
    assert running_after <= 90, running_after
    assert late == [], f"the old driver wrote {len(late)} records after the pause, e.g. {late[:3]}"
    assert not out.unexpected, sorted(out.unexpected)[:5]
    assert out.complete, out.summary()


def _executors(sq, query: str) -> dict[str, str]:
    """Running executor pods of the query, with their nodes."""
    out = sq.kubectl("get", "pods", "-l", f"streamq.io/query={query},streamq.io/component=executor", "-o",
                     "jsonpath={range .items[*]}{.metadata.name}={.status.phase}={.spec.nodeName}{'\\n'}{end}").stdout  # fmt: skip
    return {pod: node for pod, phase, node in (line.split("=") for line in out.splitlines() if line) if phase == "Running"}


def test_an_executors_node_stopped_loses_nothing(cluster, kafka, sq, object_store):
    name = sq.name("node-executor")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    runtime = {"parallelism": 4, "driver": {"cores": 1, "memory": "1536Mi", "coreRequest": "250m"},
               "executors": {"instances": 2, "cores": 2, "memory": "1Gi", "coreRequest": "250m"}}  # fmt: skip
    sq.apply(name, s3_fraud_spec(object_store, source, sink, name, runtime=runtime))
    sq.wait_running(name, timeout=420)
    executors = wait_for(lambda: (lambda e: e if len(e) >= 2 else None)(_executors(sq, name)), 300,
                         lambda: "2 executor pods Running\n" + sq.describe(name), interval=2, ignore=(Exception,))  # fmt: skip
    first = payments(90)
    kafka.produce(source, first)
    wait_output(kafka, sink, flagged(first), 240, lambda: sq.describe(name))
    driver_node = sq.driver_pod(name)["spec"]["nodeName"]
    victims = sorted({node for node in executors.values() if node != driver_node})
    assert victims, f"every executor landed on the driver's node {driver_node}: {executors}"
    during = payments(RATE * 30, start=len(first))
    producer = kafka.produce_paced(source, during, RATE)
    time.sleep(5)  # the feed runs through the executors for a while before their node stops
    cluster.pause_node(victims[0])
    t0 = time.monotonic()
    try:
        producer.join(120)
        last = payments(60, start=len(first) + len(during))
        kafka.produce(source, last)
        out = wait_output(kafka, sink, flagged(first + during + last), 900, lambda: sq.describe(name))
        took = time.monotonic() - t0
    finally:
        cluster.unpause_node(victims[0])
    figure("node lost, executor", f"{victims[0]} paused (executors {executors}, driver on {driver_node}): every record out "
           f"{took:.0f}s later; {out.summary()}; executors now {_executors(sq, name)}")  # fmt: skip
    assert not out.unexpected, sorted(out.unexpected)[:5]
    assert out.complete, out.summary()
