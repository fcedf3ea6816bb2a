"""Scenario 2: the driver dies mid-stream - its pod deleted, or its container killed
through the runtime - and the operator starts a new one on the same checkpoint:
every record arrives, duplicates stay within the epochs in flight."""

from __future__ import annotations

import time

import pytest

from testbed.cluster.workload import figure, flagged, fraud_spec, payments, wait_output
from testbed.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

RATE = 30  # payments per second while the driver dies: 10 flagged per second
INTERVAL_S = 1  # trigger.continuous.checkpointInterval


def _recovery(cluster, kafka, sq, how: str) -> None:
    test = f"recovery ({how})"
    name = sq.name(f"recover-{how.split()[0]}")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    sq.apply(name, fraud_spec(source, sink, cluster.node_dir(name)))
    status = sq.wait_running(name, timeout=420)
    first = payments(90)
    kafka.produce(source, first)
    wait_output(kafka, sink, flagged(first), 240, lambda: sq.describe(name))

    during = payments(RATE * 25, start=90)  # 25 s of payments, the driver dies mid-stream
    producer = kafka.produce_paced(source, during, RATE)
    # Mid-stream: the driver has written some of them, and more keep coming.
    wait_for(lambda: len(set(flagged(during)) & set(kafka.read_all(sink))) >= 2 * RATE // 3, 20,
             f"flagged records of the paced payments in {sink}", interval=1)  # fmt: skip
    pod = sq.driver_pod(name)
    killed_at = time.monotonic()
    if how == "pod deleted":
        sq.kubectl("delete", "pod", pod["metadata"]["name"], "--wait=false")
    else:
        container = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "driver")
        cluster.kill_container(container["containerID"])
    back = sq.wait_running(name, timeout=420, since_attempt=status["attempt"])
    back_after = time.monotonic() - killed_at
    producer.join(120)
    last = payments(60, start=90 + len(during))
    kafka.produce(source, last)
    expected = flagged(first + during + last)
    out = wait_output(kafka, sink, expected, 300, lambda: sq.describe(name))
    epoch = RATE * INTERVAL_S // 3  # flagged records per checkpoint interval
    figure(
        test,
        f"{len(first) + len(during) + len(last)} payments in, {out.summary()}; "
        f"one epoch = {epoch} flagged records; new driver {back.get('driver')} Running {back_after:.0f}s "
        f"after the {'deletion' if how == 'pod deleted' else 'kill'} (restarts {back.get('restarts')}, "
        f"lastFailure {(back.get('lastFailure') or {}).get('reason')})",
    )
    assert back["checkpoint"]["location"] == status["checkpoint"]["location"], "restarted on another checkpoint"
    assert not out.unexpected, sorted(out.unexpected)[:5]
    assert out.complete, out.summary()
    # The replay after a restart starts at the last committed epoch: what the dead
    # driver wrote after it (the epoch in flight, and one whose commit had not landed).
    assert out.duplicates <= 2 * epoch + 5, f"{out.duplicates} duplicates, more than two epochs' worth ({2 * epoch})"


# CI time (~75 s): a deleted driver pod resuming on its checkpoint is in CI twice already,
# test_object_store.py (the store) and test_faults_data.py (a persistent volume).
@pytest.mark.slow
def test_driver_pod_deleted_mid_stream(cluster, kafka, sq):
    _recovery(cluster, kafka, sq, "pod deleted")


def test_driver_container_killed_mid_stream(cluster, kafka, sq):
    _recovery(cluster, kafka, sq, "container killed")


def test_the_lost_checkpoint_runbook_restarts_a_recreated_query_from_the_offsets_it_saved(cluster, kafka, sq):
    """docs/operations.md, "A lost checkpoint ... the way back", when the operator cannot do it itself: the query is
    deleted (a new object has no status) and its checkpoint is gone. Step 1 saves status.progress.committedOffsets
    before the deletion; step 3a starts the query again on a fresh location from them. Nothing produced meanwhile
    is skipped, and nothing before the saved offsets is read again."""
    import json

    name = sq.name("runbook")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    node_dir = cluster.node_dir(name)
    first = payments(90)
    kafka.produce(source, first)
    sq.apply(name, fraud_spec(source, sink, node_dir))
    sq.wait_running(name, timeout=420)
    wait_output(kafka, sink, flagged(first), 240, lambda: sq.describe(name))

    # 1. what status has: the offsets the job last committed (every record of `first`: the lag is 0 then)
    def saved() -> dict | None:
        progress = sq.status(name).get("progress") or {}
        offsets = progress.get("committedOffsets") or {}
        return offsets if sum(offsets.get(source, {}).values()) == len(first) else None

    offsets = wait_for(saved, 120, lambda: f"status.progress.committedOffsets covering {len(first)} records\n{sq.describe(name)}",
                       interval=1, ignore=(Exception,))  # fmt: skip
    first_out = set(flagged(first))
    before = sum(r in first_out for r in kafka.read_all(sink))
    sq.kubectl("delete", "sq", name, "--wait=true", "--timeout=120s")
    cluster.node_dir(name)  # the checkpoint is gone (an emptied directory)
    meanwhile = payments(60, start=len(first))
    kafka.produce(source, meanwhile)
    # 3a. the query again, on a fresh location, from the saved offsets (startingOffsets counts only for a new checkpoint)
    sq.apply(name, fraud_spec(source, sink, node_dir, **{"checkpoint.location": "/checkpoints/query-2",
                                                          "source.kafka.startingOffsets": json.dumps(offsets)}))  # fmt: skip
    # 4. a first commit on the new location, the lag going down
    sq.wait_running(name, timeout=420)
    out = wait_output(kafka, sink, flagged(first + meanwhile), 300, lambda: sq.describe(name))
    again = sum(r in first_out for r in out.records) - before
    figure("lost checkpoint runbook", f"saved {offsets}; {out.summary()}; records of before the saved offsets written "
                                      f"again: {again}")  # fmt: skip
    assert not out.unexpected and out.complete, out.summary()  # nothing produced meanwhile skipped
    assert again == 0, f"{again} records from before the saved offsets were read again"
