"""Scenario: a standby query (spec.runtime.standby). Its second driver pod waits with its JVM and
SparkSession up; the running driver's container is SIGKILLed (ctr) or its pod deleted mid-stream;
the standby takes over from the checkpoint without a new pod. Every record arrives; the seconds
from the kill to the first record the standby wrote are the figure.

The fraud filter runs in continuous mode (at least once), and in microBatch mode with the
exactlyOnce Kafka sink: there a read_committed reader must also find no record twice, the
standby's transactional writers having fenced the ones of the driver that died."""

from __future__ import annotations

import json
import time

import pytest

from testbed.cluster.workload import driver_log, figure, first_output_after, flagged, fraud_spec, payments, standby_waiting, wait_output
from testbed.specs import EXACTLY_ONCE
from testbed.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

RATE = 30  # payments per second while the driver dies: 10 flagged per second


def _spread_and_budgeted(sq, name: str, active: dict, standby: str) -> None:
    """The query's PodDisruptionBudget lets a drain evict one of its two drivers, not both; both leave
    a lost node after restartPolicy.nodeLostAfter. This scenario's checkpoint is a hostPath, one
    node's directory: its drivers are not spread (controller.render.driver_affinity)."""
    pod = json.loads(sq.kubectl("get", "pod", standby, "-o", "json").stdout)
    assert "affinity" not in pod["spec"] and pod["spec"]["nodeName"] == active["spec"]["nodeName"]
    assert {t["key"]: t["tolerationSeconds"] for t in pod["spec"]["tolerations"] if t.get("effect") == "NoExecute"} == {
        "node.kubernetes.io/not-ready": 5, "node.kubernetes.io/unreachable": 5}  # nodeLostAfter unset, the Lease held

    def budget() -> dict | None:
        status = json.loads(sq.kubectl("get", "poddisruptionbudget", f"{name}-drivers", "-o", "json").stdout).get("status") or {}
        return status if (status.get("currentHealthy"), status.get("disruptionsAllowed")) == (2, 1) else None

    wait_for(budget, 60, "the disruption budget: 2 healthy drivers, 1 disruption allowed", interval=1, ignore=(Exception,))


@pytest.mark.parametrize("how, delivery", [("container killed", "atLeastOnce"), ("pod deleted", "exactlyOnce")])
def test_the_standby_takes_over_without_a_new_pod(cluster, kafka, sq, how, delivery):
    test = f"standby ({how}, {delivery})"
    name = sq.name(f"standby-{how.split()[0]}")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    # Two drivers on a 2-core node beside Kafka and the operator: each asks for a quarter of a core.
    exactly_once = EXACTLY_ONCE if delivery == "exactlyOnce" else {}
    spec = fraud_spec(source, sink, cluster.node_dir(name), **{"runtime.standby": True, "runtime.driver.coreRequest": "250m"},
                      **exactly_once)  # fmt: skip
    sq.apply(name, spec)
    status = sq.wait_running(name, timeout=420)
    first = payments(90)
    kafka.produce(source, first)
    wait_output(kafka, sink, flagged(first), 240, lambda: sq.describe(name))
    standby = standby_waiting(sq, name)
    active = sq.driver_pod(name)
    assert active["metadata"]["name"] != standby
    _spread_and_budgeted(sq, name, active, standby)

    during = payments(RATE * 30, start=90)
    producer = kafka.produce_paced(source, during, RATE)
    time.sleep(8)  # mid-stream
    written = set(kafka.read_all(sink))
    if how == "pod deleted":
        sq.kubectl("delete", "pod", active["metadata"]["name"], "--wait=false")
    else:
        container = next(c for c in active["status"]["containerStatuses"] if c["name"] == "driver")
        cluster.kill_container(container["containerID"])
    # Nothing new is written once the driver is gone (the paced producer keeps going), so the first
    # record that is not in `written` (read after the kill) comes from the standby.
    killed = time.monotonic()
    back_after = first_output_after(kafka, sink, written | set(kafka.read_all(sink, quiet=0.2)), 120)
    taken = wait_for(lambda: (s := sq.status(name)).get("driver") == standby and s, 60, "status naming the standby the driver")
    producer.join(120)
    last = payments(60, start=90 + len(during))
    kafka.produce(source, last)
    out = wait_output(kafka, sink, flagged(first + during + last), 300, lambda: sq.describe(name))
    log = driver_log(sq, standby)
    figure(test, f"{len(first) + len(during) + len(last)} payments in, {out.summary()}; standby {standby} wrote its first "
                 f"record {back_after:.1f}s after the {'deletion' if how == 'pod deleted' else 'kill'} "
                 f"({time.monotonic() - killed:.0f}s to all records); restarts {taken.get('restarts')}")  # fmt: skip
    assert "holding lease" in log and "taken over" in log
    assert taken["restarts"] == status.get("restarts", 0) + 1 and taken["attempt"] > status["attempt"]
    assert not out.unexpected, sorted(out.unexpected)[:5]
    assert out.complete, out.summary()
    if delivery == "exactlyOnce":
        assert out.duplicates == 0, out.summary()
    # a new standby for the promoted driver
    wait_for(lambda: (s := sq.status(name).get("standby")) and s != standby, 180, "a new standby", interval=2)
