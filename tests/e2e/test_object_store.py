"""s3a:// checkpoints on a real S3-compatible store in the cluster: SeaweedFS in a pod (the
``object_store`` fixture), which answers only requests signed with the key pair of the Secret the
queries name in spec.checkpoint.s3.credentials.

* A fraud filter's driver pod is deleted mid-stream; the new driver resumes from the checkpoint in
  the store: same query id, epochs continue, no replay from the start, every record arrives.
* The standby scenario: the active driver's container is killed, the standby takes over from the
  store.
* ``streamq checkpoint inspect s3a://...`` on this machine reads the store and prints the offsets
  the query committed, with no lag left against the broker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from app.checkpoint import S3Options, configure_s3, read_checkpoint
from app.contract.checkpoint import CheckpointState
from tests.e2e.cluster.addons import E2E_NAMESPACE, KAFKA_SERVICE, ObjectStore
from tests.e2e.helpers import (E2E_QUERY, Kafka, Output, driver_log, figure, first_output_after, flagged, payments,
                               standby_waiting, wait_output)
from tests.support.seaweedfs import REGION
from tests.support.specs import query_spec
from tests.support.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

RATE = 30  # payments per second while the driver dies: 10 flagged per second
INTERVAL_S = 1  # trigger.continuous.checkpointInterval
EPOCH = RATE * INTERVAL_S // 3  # flagged records per checkpoint interval


def s3_fraud_spec(source: str, sink: str, store: ObjectStore, query: str, **extra: Any) -> tuple[dict[str, Any], str]:
    """The e2e fraud filter with its checkpoint in the store, under the namespace's prefix (the
    policy's default allowedCheckpointPrefixes: *://*/${namespace}/); returns (spec, location)."""
    location = f"s3a://{store.bucket}/{E2E_NAMESPACE}/{query}"
    s3 = {"endpoint": store.endpoint, "region": REGION, "pathStyleAccess": True, "credentials": {"secretRef": {"name": store.secret}}}
    spec = query_spec(E2E_QUERY, bootstrap=KAFKA_SERVICE, topic=source, sink_topic=sink, location=location,
                      **{"checkpoint.s3": s3}, **extra)  # fmt: skip
    return spec, location


@contextmanager
def _reading(store: ObjectStore) -> Iterator[None]:
    """This process reads s3a:// as the driver does: the store's address (from here) and the Secret's keys."""
    configure_s3(S3Options(store.host_endpoint, REGION, True, store.access_key, store.secret_key))
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


def _assert_delivered(out: Output) -> None:
    assert not out.unexpected, sorted(out.unexpected)[:5]
    assert out.complete, out.summary()
    # Replayed from the last committed epoch, not from the start: everything written before the
    # driver died (well over 2 epochs' worth) would come back otherwise.
    assert out.duplicates <= 2 * EPOCH + 5, f"{out.duplicates} duplicates, more than two epochs' worth ({2 * EPOCH})"


def test_driver_pod_deleted_resumes_from_the_object_store_and_inspect_reads_it(cluster, kafka, sq, object_store):
    test = "s3a:// recovery (pod deleted)"
    t0 = time.monotonic()
    name = sq.name("s3-recover")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    spec, location = s3_fraud_spec(source, sink, object_store, name)
    sq.apply(name, spec)
    status = sq.wait_running(name, timeout=420)
    first = payments(90)
    kafka.produce(source, first)
    wait_output(kafka, sink, flagged(first), 240, lambda: sq.describe(name))

    during = payments(RATE * 15, start=90)  # 15 s of payments, the driver dies mid-stream
    producer = kafka.produce_paced(source, during, RATE)
    wait_for(lambda: len(set(flagged(during)) & set(kafka.read_all(sink))) >= 2 * RATE // 3, 20,
             f"flagged records of the paced payments in {sink}", interval=1)  # fmt: skip
    before = _checkpoint(object_store, location)
    assert before.exists and before.has_commits, before
    pod = sq.driver_pod(name)["metadata"]["name"]
    sq.kubectl("delete", "pod", pod, "--wait=false")
    deleted = time.monotonic()
    back = sq.wait_running(name, timeout=420, since_attempt=status["attempt"])
    back_after = time.monotonic() - deleted
    producer.join(120)
    last = payments(60, start=90 + len(during))
    kafka.produce(source, last)
    out = wait_output(kafka, sink, flagged(first + during + last), 300, lambda: sq.describe(name))
    after = _all_committed(object_store, kafka, location, source)
    figure(test, f"{len(first) + len(during) + len(last)} payments in, {out.summary()}; one epoch = {EPOCH} flagged; "
                 f"new driver Running {back_after:.0f}s after the deletion; store: epoch {before.last_committed} -> "
                 f"{after.last_committed}, {location}")  # fmt: skip
    assert back["driver"] != pod and back["checkpoint"]["location"] == location
    _assert_resumed(before, after, source)
    _assert_delivered(out)
    _no_secret_shown(sq, name, object_store, [back["driver"]])

    # streamq checkpoint inspect s3a://... from this machine: the committed offsets, no lag left
    ends = kafka.end_offsets(source)
    cli = _inspect(object_store, location, "--json", "--bootstrap-servers", kafka.bootstrap)
    assert cli.returncode == 0, cli.stderr
    report = json.loads(cli.stdout)
    assert report["exists"] and report["resumable"] and report["queryId"] == after.query_id, report
    assert report["lastCommitted"] >= after.last_committed
    assert report["committedOffsets"] == [{source: ends}], (report["committedOffsets"], ends)
    assert report["lag"]["total"] == 0, report["lag"]
    tables = _inspect(object_store, location)
    assert tables.returncode == 0, tables.stderr
    rows = [line for line in tables.stdout.splitlines() if source in line]
    assert sorted(int(line.split("│")[4]) for line in rows) == sorted(ends.values()), tables.stdout
    figure(test, f"checkpoint inspect {location}: epoch {report['lastCommitted']}, committed {report['committedOffsets']}, "
                 f"lag {report['lag']['total']}; test took {time.monotonic() - t0:.0f}s")  # fmt: skip


def test_the_standby_takes_over_from_the_object_store(cluster, kafka, sq, object_store):
    test = "s3a:// standby (container killed)"
    t0 = time.monotonic()
    name = sq.name("s3-standby")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    # Two drivers on a 2-core node beside Kafka, the store and the operator: a quarter of a core each.
    spec, location = s3_fraud_spec(source, sink, object_store, name, **{"runtime.standby": True, "runtime.driver.coreRequest": "250m"})
    sq.apply(name, spec)
    status = sq.wait_running(name, timeout=420)
    first = payments(90)
    kafka.produce(source, first)
    wait_output(kafka, sink, flagged(first), 240, lambda: sq.describe(name))
    standby = standby_waiting(sq, name)
    active = sq.driver_pod(name)
    assert active["metadata"]["name"] != standby
    # An object store is every node's: the two drivers prefer different nodes (one node here, so both run on it).
    pod = json.loads(sq.kubectl("get", "pod", standby, "-o", "json").stdout)
    assert pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"], pod["spec"]["affinity"]

    during = payments(RATE * 15, start=90)
    producer = kafka.produce_paced(source, during, RATE)
    wait_for(lambda: len(set(flagged(during)) & set(kafka.read_all(sink))) >= 2 * RATE // 3, 20,
             f"flagged records of the paced payments in {sink}", interval=1)  # fmt: skip
    before = _checkpoint(object_store, location)
    assert before.exists and before.has_commits, before
    written = set(kafka.read_all(sink))
    container = next(c for c in active["status"]["containerStatuses"] if c["name"] == "driver")
    cluster.kill_container(container["containerID"])
    # Nothing new is written once the driver is gone, so the first record not in `written` comes from the standby.
    back_after = first_output_after(kafka, sink, written | set(kafka.read_all(sink, quiet=0.2)), 120)
    taken = wait_for(lambda: (s := sq.status(name)).get("driver") == standby and s, 60, "status naming the standby the driver")
    producer.join(120)
    last = payments(60, start=90 + len(during))
    kafka.produce(source, last)
    out = wait_output(kafka, sink, flagged(first + during + last), 300, lambda: sq.describe(name))
    after = _all_committed(object_store, kafka, location, source)
    log = driver_log(sq, standby)
    figure(test, f"{len(first) + len(during) + len(last)} payments in, {out.summary()}; standby wrote its first record "
                 f"{back_after:.1f}s after the kill; store: epoch {before.last_committed} -> {after.last_committed}; "
                 f"test took {time.monotonic() - t0:.0f}s")  # fmt: skip
    assert "holding lease" in log and "taken over" in log
    assert taken["restarts"] == status.get("restarts", 0) + 1 and taken["attempt"] > status["attempt"]
    _assert_resumed(before, after, source)
    _assert_delivered(out)
    _no_secret_shown(sq, name, object_store, [standby])
