"""A driver stuck Terminating on a lost node (issue 12, fault 10), against a real kube-apiserver.

The driver pod is bound to a node that no kubelet serves: once the operator deletes it, the
API server waits for that kubelet to confirm, for ever, as it does for a node that went
away (a pod with no node, or one that ended, would be deleted at once). The query must say
so where users look, then force-delete the pod after restartPolicy.forceDeleteAfter and
start the next driver.
"""

from __future__ import annotations

import time

import pytest

from controller.decide.drivers import STUCK_SLACK_S
from testbed.specs import RATE_TO_CONSOLE, query_spec
from testbed.wait import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

GRACE_S = 1
FORCE_AFTER_S = 45  # later than the stuck report (STUCK_SLACK_S past the grace period)


def _bind(cluster, pod: str, node: str) -> None:
    """What the scheduler does: the pod is on that node."""
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"kind": "Node", "name": node}}
    cluster.core.create_namespaced_pod_binding(pod, cluster.namespace, body, _preload_content=False)


def _degraded_reason(status: dict) -> str | None:
    found = next((c for c in status.get("conditions", []) if c["type"] == "Degraded" and c["status"] == "True"), None)
    return found and found.get("reason")


def test_a_driver_stuck_terminating_is_reported_then_force_deleted_and_replaced(cluster, start_operator):
    node = f"lost-{cluster.namespace}"[:63]
    cluster.core.create_node({"metadata": {"name": node}})
    try:
        start_operator(STREAMQ_TERMINATION_GRACE_SECONDS=str(GRACE_S))
        cluster.apply("q", query_spec(RATE_TO_CONSOLE, restartPolicy={"forceDeleteAfter": f"{FORCE_AFTER_S}s"}))
        cluster.wait_driver("q", 1)
        _bind(cluster, "q-driver-1", node)
        cluster.pod_runs("q-driver-1")
        cluster.wait_phase("q", "Running")

        cluster.patch_spec("q", {"restartNonce": "again"})  # the operator deletes the running driver
        wait_for(lambda: cluster.core.read_namespaced_pod("q-driver-1", cluster.namespace).metadata.deletion_timestamp,
                 30, "the driver's deletion to start")  # fmt: skip
        deleted = time.monotonic()
        time.sleep(GRACE_S + 2)  # the claim is that nothing happens within the grace: the wait is the check
        assert cluster.core.read_namespaced_pod("q-driver-1", cluster.namespace).metadata.deletion_timestamp
        assert [p.metadata.name for p in cluster.driver_pods("q")] == ["q-driver-1"], "no second driver beside it"

        status = cluster.wait_status("q", lambda s: _degraded_reason(s) == "DriverStuckTerminating", STUCK_SLACK_S + 30,
                                     "Degraded/DriverStuckTerminating")  # fmt: skip
        reported = time.monotonic() - deleted
        assert "q-driver-1" in status["message"] and "force-deleted at" in status["message"], status["message"]
        cluster.wait_event("q", "DriverStuckTerminating")
        assert [p.metadata.name for p in cluster.driver_pods("q")] == ["q-driver-1"]

        cluster.wait_driver("q", 2, timeout=FORCE_AFTER_S + 30)
        replaced = time.monotonic() - deleted
        assert "q-driver-1" not in [p.metadata.name for p in cluster.driver_pods("q")]
        event = cluster.wait_event("q", "DriverForceDeleted")
        assert "forceDeleteAfter" in event.message
        assert STUCK_SLACK_S <= reported + 1 and FORCE_AFTER_S - 1 <= replaced <= FORCE_AFTER_S + 30, (reported, replaced)
        cluster.pod_runs("q-driver-2")
        status = cluster.wait_phase("q", "Running")
        assert _degraded_reason(status) is None
        print(f"stuck Terminating: reported {reported:.0f}s after the deletion, replaced after {replaced:.0f}s")
    finally:
        cluster.core.delete_node(node)
