"""s3a:// checkpoints on a real S3-compatible store in the cluster: SeaweedFS in a pod (the
``object_store`` fixture), which answers only requests signed with the key pair of the Secret the
queries name in spec.checkpoint.s3.credentials.

* A fraud filter's driver pod is deleted mid-stream; the new driver resumes from the checkpoint in
  the store: same query id, epochs continue, no replay from the start, every record arrives.
* The standby scenario: the active driver's container is killed, the standby takes over from the
  store.
* ``streamq checkpoint inspect s3a://...`` on this machine reads the store and prints the offsets
  the query committed, with no lag left against the broker.
* A stateful query with an executor pod: its state store files, which only tasks write, are in
  the store: the keys reached the executors too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from app.checkpoints.reader import S3Files, S3Options, configure_s3, read_checkpoint
from contract.checkpoint import CheckpointState
from testbed.cluster.addons import E2E_NAMESPACE, KAFKA_SERVICE
from testbed.cluster.seaweedfs import ObjectStore
from testbed.cluster.workload import (
    E2E_QUERY,
    Kafka,
    Output,
    driver_log,
    figure,
    first_output_after,
    flagged,
    payments,
    standby_waiting,
    wait_output,
)
from testbed.seaweedfs import REGION
from testbed.specs import query_spec
from testbed.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

RATE = 30  # payments per second while the driver dies: 10 flagged per second
INTERVAL_S = 1  # trigger.continuous.checkpointInterval
EPOCH = RATE * INTERVAL_S // 3  # flagged records per checkpoint interval


def s3_fraud_spec(source: str, sink: str, store: ObjectStore, query: str, **extra: Any) -> tuple[dict[str, Any], str]:
    """The e2e fraud filter with its checkpoint in the store, under the namespace's prefix (the
    policy's default allowedCheckpointPrefixes: *://*/${namespace}/); returns (spec, location)."""
    location = f"s3a://{store.bucket}/{E2E_NAMESPACE}/{query}"
    s3 = {
        "endpoint": store.endpoint,
        "region": REGION,
        "pathStyleAccess": True,
        "credentials": {"secretRef": {"name": store.secret}},
    }
    spec = query_spec(E2E_QUERY, bootstrap=KAFKA_SERVICE, topic=source, sink_topic=sink, location=location,
                      **{"checkpoint.s3": s3}, **extra)  # fmt: skip
    return spec, location


def _options(store: ObjectStore) -> S3Options:
    """The store as the driver reads it (path style, the Secret's keys), at its address from this machine."""
    return S3Options(store.host_endpoint, REGION, True, store.access_key, store.secret_key)


@contextmanager
def _reading(store: ObjectStore) -> Iterator[None]:
    configure_s3(_options(store))
    try:
        yield
    finally:
        configure_s3(S3Options())


def _checkpoint(store: ObjectStore, location: str) -> CheckpointState:
    with _reading(store):
        return read_checkpoint(location)


def _all_committed(store: ObjectStore, kafka: Kafka, location: str, source: str) -> CheckpointState:
    """Waits until the checkpoint in the store has committed the source topic to its end."""
    ends = {int(p): o for p, o in kafka.end_offsets(source).items()}

    def done() -> CheckpointState | None:
        state = _checkpoint(store, location)
        return state if state.kafka_offsets().get(source) == ends else None

    return wait_for(done, 60, lambda: f"{location} committing {source} up to {ends}: {_checkpoint(store, location)}", interval=1)


def _no_secret_shown(sq, name: str, store: ObjectStore, pods: list[str]) -> None:
    """The keys reached the drivers (the store took their writes) and nothing shows them."""
    shown = json.dumps(sq.get(name)) + json.dumps(sq.events(name)) + "".join(driver_log(sq, pod) for pod in pods)
    assert store.secret_key not in shown and store.access_key not in shown


def _inspect(store: ObjectStore, location: str, *args: str) -> subprocess.CompletedProcess:
    """`streamq checkpoint inspect` as a user runs it on their machine: keys in the environment."""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": store.access_key, "AWS_SECRET_ACCESS_KEY": store.secret_key}
    argv = [sys.executable, "-m", "app", "checkpoint", "inspect", location,
            "--s3-endpoint", store.host_endpoint, "--s3-region", REGION, "--s3-path-style", *args]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


def _assert_resumed(before: CheckpointState, after: CheckpointState, source: str) -> None:
    """The new driver went on from the checkpoint in the store: the same query, later epochs, offsets onward."""
    assert after.query_id == before.query_id, f"a new query id {after.query_id}: the store's checkpoint was not used"
    assert after.last_committed > before.last_committed, (before.last_committed, after.last_committed)
    at_stop, resumed = before.kafka_offsets()[source], after.kafka_offsets()[source]
    assert all(resumed[p] >= o for p, o in at_stop.items()), (at_stop, resumed)


def _assert_delivered(out: Output, kafka: Kafka, source: str, before: CheckpointState) -> None:
    """Every record out once at least, and replayed from the last committed epoch, not from the start.

    How many epochs the store had not committed yet when the driver died depends on how fast it
    takes writes (several on a loaded node), so the bound is where, not how many: no payment the
    checkpoint read before the death had committed comes out twice."""
    assert not out.unexpected, sorted(out.unexpected)[:5]
    assert out.complete, out.summary()
    committed, where = before.kafka_offsets()[source], kafka.positions(source)
    twice = Counter(key for key, _ in out.records)
    replayed = [(key, where[key]) for key, n in twice.items() if n > 1 and where[key][1] < committed.get(where[key][0], 0)]
    assert not replayed, (
        f"{len(replayed)} payments committed before the driver died came out again: {replayed[:5]}, committed {committed}"
    )
    assert out.duplicates < len(out.unique), out.summary()


@dataclass
class Scenario:
    """A fraud filter with its checkpoint in the store, Running, its first payments flagged."""

    name: str
    source: str
    sink: str
    location: str
    status: dict[str, Any]
    sent: list[tuple[str, str]]
    paced: threading.Thread | None = None


def _started(kafka: Kafka, sq, store: ObjectStore, base: str, **extra: Any) -> Scenario:
    name = sq.name(base)
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    spec, location = s3_fraud_spec(source, sink, store, name, **extra)
    sq.apply(name, spec)
    status = sq.wait_running(name, timeout=420)
    first = payments(90)
    kafka.produce(source, first)
    wait_output(kafka, sink, flagged(first), 240, lambda: sq.describe(name))
    return Scenario(name, source, sink, location, status, first)


def _mid_stream(kafka: Kafka, store: ObjectStore, run: Scenario) -> CheckpointState:
    """15 s of paced payments begin; once the driver has written some of them (and more keep
    coming), the checkpoint in the store as it is before the driver dies."""
    during = payments(RATE * 15, start=len(run.sent))
    run.paced = kafka.produce_paced(run.source, during, RATE)
    run.sent += during
    wait_for(lambda: len(set(flagged(during)) & set(kafka.read_all(run.sink))) >= 2 * RATE // 3, 20,
             f"flagged records of the paced payments in {run.sink}", interval=1)  # fmt: skip
    before = _checkpoint(store, run.location)
    assert before.exists and before.has_commits, before
    return before


def _finished(kafka: Kafka, sq, store: ObjectStore, run: Scenario) -> tuple[Output, CheckpointState]:
    """The paced payments done and 60 more: every flagged one out, and the store committed to the end."""
    run.paced.join(120)
    last = payments(60, start=len(run.sent))
    kafka.produce(run.source, last)
    run.sent += last
    out = wait_output(kafka, run.sink, flagged(run.sent), 300, lambda: sq.describe(run.name))
    return out, _all_committed(store, kafka, run.location, run.source)


def test_driver_pod_deleted_resumes_from_the_object_store_and_inspect_reads_it(cluster, kafka, sq, object_store):
    test = "s3a:// recovery (pod deleted)"
    t0 = time.monotonic()
    run = _started(kafka, sq, object_store, "s3-recover")
    before = _mid_stream(kafka, object_store, run)
    pod = sq.driver_pod(run.name)["metadata"]["name"]
    sq.kubectl("delete", "pod", pod, "--wait=false")
    deleted = time.monotonic()
    back = sq.wait_running(run.name, timeout=420, since_attempt=run.status["attempt"])
    back_after = time.monotonic() - deleted
    out, after = _finished(kafka, sq, object_store, run)
    figure(test, f"{len(run.sent)} payments in, {out.summary()}; one epoch = {EPOCH} flagged; "
                 f"new driver Running {back_after:.0f}s after the deletion; store: epoch {before.last_committed} -> "
                 f"{after.last_committed}, {run.location}")  # fmt: skip
    assert back["driver"] != pod and back["checkpoint"]["location"] == run.location
    _assert_resumed(before, after, run.source)
    _assert_delivered(out, kafka, run.source, before)
    _no_secret_shown(sq, run.name, object_store, [back["driver"]])

    # streamq checkpoint inspect s3a://... from this machine: the committed offsets, no lag left
    ends = kafka.end_offsets(run.source)
    cli = _inspect(object_store, run.location, "--json", "--bootstrap-servers", kafka.bootstrap)
    assert cli.returncode == 0, cli.stderr
    report = json.loads(cli.stdout)
    assert report["exists"] and report["resumable"] and report["queryId"] == after.query_id, report
    assert report["lastCommitted"] >= after.last_committed
    assert report["committedOffsets"] == [{run.source: ends}], (report["committedOffsets"], ends)
    assert report["lag"]["total"] == 0, report["lag"]
    tables = _inspect(object_store, run.location)
    assert tables.returncode == 0, tables.stderr
    rows = [line for line in tables.stdout.splitlines() if run.source in line]
    assert sorted(int(line.split("│")[4]) for line in rows) == sorted(ends.values()), tables.stdout
    figure(test, f"checkpoint inspect {run.location}: epoch {report['lastCommitted']}, committed {report['committedOffsets']}, "
                 f"lag {report['lag']['total']}; test took {time.monotonic() - t0:.0f}s")  # fmt: skip


@pytest.mark.slow  # CI time (~2 min): test_standby.py takes over on a volume, the tests above resume from the store
def test_the_standby_takes_over_from_the_object_store(cluster, kafka, sq, object_store):
    test = "s3a:// standby (container killed)"
    t0 = time.monotonic()
    # Two drivers on a 2-core node beside Kafka, the store and the operator: a quarter of a core each.
    run = _started(kafka, sq, object_store, "s3-standby", **{"runtime.standby": True, "runtime.driver.coreRequest": "250m"})
    standby = standby_waiting(sq, run.name)
    active = sq.driver_pod(run.name)
    assert active["metadata"]["name"] != standby
    # An object store is every node's: the two drivers prefer different nodes (one node here, so both run on it).
    pod = json.loads(sq.kubectl("get", "pod", standby, "-o", "json").stdout)
    assert pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"], pod["spec"]["affinity"]

    before = _mid_stream(kafka, object_store, run)
    written = set(kafka.read_all(run.sink))
    container = next(c for c in active["status"]["containerStatuses"] if c["name"] == "driver")
    cluster.kill_container(container["containerID"])
    # Nothing new is written once the driver is gone, so the first record not in `written` comes from the standby.
    back_after = first_output_after(kafka, run.sink, written | set(kafka.read_all(run.sink, quiet=0.2)), 120)
    taken = wait_for(
        lambda: (s := sq.status(run.name)).get("driver") == standby and s, 60, "status naming the standby the driver"
    )
    out, after = _finished(kafka, sq, object_store, run)
    log = driver_log(sq, standby)
    figure(test, f"{len(run.sent)} payments in, {out.summary()}; standby wrote its first record "
                 f"{back_after:.1f}s after the kill; store: epoch {before.last_committed} -> {after.last_committed}; "
                 f"test took {time.monotonic() - t0:.0f}s")  # fmt: skip
    assert "holding lease" in log and "taken over" in log
    assert taken["restarts"] == run.status.get("restarts", 0) + 1 and taken["attempt"] > run.status["attempt"]
    _assert_resumed(before, after, run.source)
    _assert_delivered(out, kafka, run.source, before)
    _no_secret_shown(sq, run.name, object_store, [standby])


# Payments counted by amount: a stateful query whose state store (checkpoint/state/...) Spark
# writes from the tasks, that is from the executor pods, never from the driver (client mode).
COUNT_BY_AMOUNT = [{"sql": "SELECT CAST(get_json_object(CAST(value AS STRING), '$.amount') AS STRING) AS key, "
                           "CAST(count(*) AS STRING) AS value FROM input GROUP BY 1"}]  # fmt: skip


def _latest_counts(kafka: Kafka, sink: str) -> dict[str, str]:
    """The last count written per key (update mode, one sink partition: the last is the newest)."""
    return dict(kafka.read_all(sink))


def test_executors_write_the_query_state_to_the_store(cluster, kafka, sq, object_store):
    test = "s3a:// state from executor pods"
    t0 = time.monotonic()
    name = sq.name("s3-state")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-counts", partitions=1)
    # The node has 2 CPUs: the executor asks for a quarter of one.
    executors = {"instances": 1, "cores": 2, "memory": "1Gi", "coreRequest": "250m"}
    spec, location = s3_fraud_spec(source, sink, object_store, name, transforms=COUNT_BY_AMOUNT, outputMode="update",
                                   trigger={"microBatch": {"interval": "1s"}}, **{"runtime.executors": executors})  # fmt: skip
    sq.apply(name, spec)
    sq.wait_running(name, timeout=420)
    sent: list[tuple[str, str]] = []
    for batch in (payments(90), payments(60, start=90)):  # the second round updates the state of the first
        kafka.produce(source, batch)
        sent += batch
        expected = {str(a): str(n) for a, n in Counter(json.loads(v)["amount"] for _, v in sent).items()}
        wait_for(lambda e=expected: _latest_counts(kafka, sink) == e or None, 240,
                 lambda e=expected: f"counts {e} in {sink}, have {_latest_counts(kafka, sink)}\n{sq.describe(name)}", interval=2)  # fmt: skip
    state = _all_committed(object_store, kafka, location, source)
    executor_pods = sq.kubectl(
        "get", "pods", "-l", f"streamq.io/query={name},streamq.io/component=executor", "-o", "name"
    ).stdout.split()
    # The state files in the store came from the executor: the driver runs no task.
    files, root = S3Files(object_store.bucket, _options(object_store)), f"{E2E_NAMESPACE}/{name}/state/0"
    # state/0/<partition>/<version>.delta (or RocksDB's .changelog/.zip): one file per batch that changed it
    deltas = {p: sorted(files.list(f"{root}/{p}") or {}) for p in files.list(root) or {} if p.isdigit()}
    figure(test, f"{len(sent)} payments counted by amount, {len(expected)} counts right after 2 rounds; executor pods "
                 f"{executor_pods}; state deltas in the store {sum(map(len, deltas.values()))} over {len(deltas)} partitions "
                 f"(epoch {state.last_committed}); test took {time.monotonic() - t0:.0f}s")  # fmt: skip
    assert executor_pods, "no executor pod ran"
    assert sum(map(len, deltas.values())) >= 2, deltas
    _no_secret_shown(sq, name, object_store, [sq.status(name)["driver"]])
