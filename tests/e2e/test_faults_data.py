"""Faults on the data path (issue #12), injected for real on the session's cluster:

* an executor pod killed mid-stream in the executor scenario (2 executor pods, Pod
  Security "restricted", checkpoint on an emptyDir as in test_fraud_filter.py);
* the checkpoint on a PersistentVolumeClaim bound to a real PersistentVolume (a hostPath
  PV of the node, storageClassName set so that the claim binds to it), the driver pod
  deleted mid-stream: the new driver resumes from the volume (same location, the
  checkpoint's commits carry on).

Nothing is lost; duplicates are counted.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from testbed.cluster.workload import Output, figure, flagged, fraud_spec, payments, wait_output
from testbed.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

RATE = 30  # payments per second while the fault hits: 10 flagged per second
INTERVAL_S = 1  # trigger.continuous.checkpointInterval
EPOCH = RATE * INTERVAL_S // 3  # flagged records per checkpoint interval
TERMINAL = ("Invalid", "Failed")  # phases a query does not leave by itself
STORAGE_CLASS = "streamq-e2e-manual"  # no provisioner: only the PVs made here have it


def _flagged_out(kafka, sink: str, records) -> int:
    return len(set(flagged(records)) & set(kafka.read_all(sink)))


def _executors(sq, query: str) -> list[str]:
    out = sq.kubectl("get", "pods", "-l", f"streamq.io/query={query},streamq.io/component=executor",
                     "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.phase}{\"\\n\"}{end}").stdout  # fmt: skip
    return [line.split("=")[0] for line in out.splitlines() if line.endswith("=Running")]


def test_executor_pod_killed_mid_stream(cluster, kafka, sq_restricted):
    sq = sq_restricted
    test = "executor pod killed"
    name = sq.name("exec-kill")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    runtime = {
        "parallelism": 4,
        "driver": {"cores": 1, "memory": "1536Mi"},
        # The node has 2 CPUs: executors ask for a quarter each instead of their 2 cores.
        "executors": {"instances": 2, "cores": 2, "memory": "1Gi", "coreRequest": "250m"},
    }
    sq.apply(name, fraud_spec(source, sink, None, runtime=runtime))
    status = sq.wait_running(name, timeout=420)
    before = wait_for(lambda: (lambda e: e if len(e) >= 2 else None)(_executors(sq, name)), 300,
                      lambda: "2 executor pods Running\n" + sq.describe(name), interval=2, ignore=(Exception,))  # fmt: skip
    first = payments(90)
    kafka.produce(source, first)
    wait_output(kafka, sink, flagged(first), 240, lambda: sq.describe(name))

    during = payments(RATE * 25, start=len(first))
    producer = kafka.produce_paced(source, during, RATE)
    wait_for(lambda: _flagged_out(kafka, sink, during) >= 2 * EPOCH, 30, "the paced payments flowing", interval=1)
    victim = before[0]
    killed_at = time.monotonic()
    sq.kubectl("delete", "pod", victim, "--grace-period=0", "--force", "--wait=false")
    producer.join(120)
    last = payments(60, start=len(first) + len(during))
    kafka.produce(source, last)
    source_records = kafka.read_all(source)
    expected = flagged(source_records)

    def done_or_given_up() -> str | None:
        """Every record out ("complete"), or a phase nothing comes back from ("Invalid", "Failed")."""
        phase = sq.status(name).get("phase")
        if phase in TERMINAL:
            return phase
        return "complete" if not set(expected) - set(kafka.read_all(sink)) else None

    outcome = wait_for(done_or_given_up, 420, lambda: "every record out after the kill\n" + sq.describe(name),
                       interval=2, ignore=(Exception,))  # fmt: skip
    complete_after = time.monotonic() - killed_at
    if outcome in TERMINAL:
        st = sq.status(name)
        out = Output(kafka.read_all(sink), expected)
        figure(test, f"{len(source_records)} payments in, {out.summary()}; executor {victim} of {before} deleted: the query "
                     f"went {outcome} {complete_after:.0f}s later ({(st.get('lastFailure') or {}).get('reason')}: "
                     f"{(st.get('message') or '')[:300]})")  # fmt: skip
        pytest.fail(f"an executor pod lost made the query {outcome} (no restart): {st.get('message', '')[:600]}", pytrace=False)
    out = wait_output(kafka, sink, expected, 60, lambda: sq.describe(name))
    back = sq.wait_running(name, timeout=300)
    after = _executors(sq, name)
    figure(
        test,
        f"{len(source_records)} payments in, {out.summary()}; one epoch = {EPOCH} flagged records; executor "
        f"{victim} of {before} deleted, executors now {after}; output complete {complete_after:.0f}s after the "
        f"kill; driver {status.get('driver')} -> {back.get('driver')} (attempt {status.get('attempt')} -> "
        f"{back.get('attempt')}, restarts {back.get('restarts')}, lastFailure "
        f"{(back.get('lastFailure') or {}).get('reason')}, checkpoint resets {(back.get('checkpoint') or {}).get('resets')})",
    )
    assert not out.unexpected, sorted(out.unexpected)[:5]
    assert out.complete, out.summary()


def _commits(directory: Path) -> int:
    """The highest committed epoch of a checkpoint on this machine (-1: none)."""
    commits = directory / "commits"
    return max((int(p.name) for p in commits.iterdir() if p.name.isdigit()), default=-1) if commits.is_dir() else -1


def test_checkpoint_on_a_persistent_volume(cluster, kafka, sq):
    test = "checkpoint on a PV, driver deleted"
    name = sq.name("pv")
    pv, pvc = f"{name}-checkpoints", "streamq-checkpoints-" + name  # named for queries (policy.allowedClaims)
    pv_dir = cluster.node_dir(f"{name}-pv")
    cluster.apply(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv, "labels": {"streamq-e2e": "faults"}},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS,
                  "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": pv_dir, "type": "Directory"}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": pvc, "namespace": sq.namespace},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS, "volumeName": pv,
                  "resources": {"requests": {"storage": "1Gi"}}}},
    ]))  # fmt: skip
    try:
        bound = wait_for(lambda: sq.kubectl("get", "pvc", pvc, "-o", "jsonpath={.status.phase}").stdout == "Bound", 60,
                         f"PVC {pvc} bound to PV {pv}", interval=0.5, ignore=(Exception,))  # fmt: skip
        assert bound
        source = kafka.create_topic(f"{name}-payments", partitions=2)
        sink = kafka.create_topic(f"{name}-flagged", partitions=1)
        sq.apply(name, fraud_spec(source, sink, None, **{"checkpoint.volume": {"persistentVolumeClaim": {"claimName": pvc}}}))
        status = sq.wait_running(name, timeout=420)
        pod = sq.driver_pod(name)
        claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v]
        assert claims == [pvc], pod["spec"]["volumes"]
        first = payments(90)
        kafka.produce(source, first)
        wait_output(kafka, sink, flagged(first), 240, lambda: sq.describe(name))

        during = payments(RATE * 25, start=len(first))
        producer = kafka.produce_paced(source, during, RATE)
        wait_for(lambda: _flagged_out(kafka, sink, during) >= 2 * RATE // 3, 30, "the paced payments flowing", interval=1)
        local = Path(pv_dir).is_dir()  # the local provider's node is this machine: the PV is readable here
        checkpoint = Path(pv_dir) / Path(status["checkpoint"]["location"]).name
        committed_before = _commits(checkpoint) if local else None
        killed_at = time.monotonic()
        sq.kubectl("delete", "pod", pod["metadata"]["name"], "--wait=false")
        back = sq.wait_running(name, timeout=420, since_attempt=status["attempt"])
        back_after = time.monotonic() - killed_at
        producer.join(120)
        last = payments(60, start=len(first) + len(during))
        kafka.produce(source, last)
        source_records = kafka.read_all(source)
        out = wait_output(kafka, sink, flagged(source_records), 300, lambda: sq.describe(name))
        committed_after = _commits(checkpoint) if local else None
        new_pod = sq.driver_pod(name)
        new_claims = [v["persistentVolumeClaim"]["claimName"] for v in new_pod["spec"]["volumes"] if "persistentVolumeClaim" in v]
        figure(
            test,
            f"{len(source_records)} payments in, {out.summary()}; one epoch = {EPOCH} flagged records; PV {pv} "
            f"(hostPath {pv_dir}) bound to {pvc}; new driver {back.get('driver')} Running {back_after:.0f}s after "
            f"the deletion on claim {new_claims}; checkpoint {back['checkpoint']['location']} committed epoch "
            f"{committed_before} before, {committed_after} after (resets {back['checkpoint'].get('resets')})",
        )
        assert new_claims == [pvc]
        assert back["checkpoint"]["location"] == status["checkpoint"]["location"], "restarted on another checkpoint"
        assert back["checkpoint"].get("resets", 0) == status["checkpoint"].get("resets", 0), "a fresh checkpoint was made"
        if local:
            assert committed_before >= 0, f"no commits in {checkpoint}: the checkpoint is not on the PV"
            assert committed_after > committed_before, (
                f"the new driver did not go on with the checkpoint on the PV ({committed_before} -> {committed_after})"
            )
        assert not out.unexpected, sorted(out.unexpected)[:5]
        assert out.complete, out.summary()
        assert out.duplicates <= 2 * EPOCH + 5, f"{out.duplicates} duplicates, more than two epochs' worth ({2 * EPOCH})"
    finally:
        # Deleted once unused (their protection finalizers wait for the query's driver to go).
        sq.kubectl("delete", "pvc", pvc, "--ignore-not-found", "--wait=false", check=False)
        cluster.kubectl("delete", "pv", pv, "--ignore-not-found", "--wait=false", check=False)
