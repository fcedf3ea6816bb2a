"""Warm upgrades against a real kube-apiserver, the test playing the kubelet (no Spark runs): a spec
change starts the new spec's driver beside the running one; once it is Ready the old one is deleted
and the new one is the current driver. A quota that refuses the second driver means a plain restart,
said in an event. A new driver that cannot start leaves the old one running, and says why."""

from __future__ import annotations

import pytest

from contract.lease import LEASE_ENV
from testbed.specs import RATE_TO_CONSOLE, query_spec
from testbed.wait import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CHANGE = {"transforms": [{"where": "value % 3 = 0"}]}


def _names(cluster, query: str) -> list[str]:
    return sorted(p.metadata.name for p in cluster.driver_pods(query) if not p.metadata.deletion_timestamp)


def _env(pod) -> dict:
    return {e.name: e.value for e in pod.spec.containers[0].env}


def test_a_spec_change_starts_the_new_driver_beside_the_old_and_hands_over_once_it_is_ready(cluster, start_operator):
    start_operator()
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))  # a persistentVolumeClaim checkpoint: both drivers reach it
    first = cluster.wait_driver("q", 1)
    assert _env(first)[LEASE_ENV] == "q-driver"  # every driver of a warm query takes the Lease
    cluster.pod_runs("q-driver-1")
    cluster.wait_phase("q", "Running")

    cluster.patch_spec("q", CHANGE)
    new = cluster.wait_driver("q", 2)
    assert new.metadata.labels["streamq.io/role"] == "standby" and new.spec.containers[0].readiness_probe is not None
    status = cluster.wait_phase("q", "Upgrading")
    assert status["driver"] == "q-driver-1" and status["upgrade"]["state"] == "Warming"
    assert _names(cluster, "q") == ["q-driver-1", "q-driver-2"]  # the old one serves while the new one warms up
    cluster.wait_event("q", "UpgradeStarted")

    cluster.pod_runs("q-driver-2")  # Ready: warm
    status = cluster.wait_status("q", lambda s: s.get("driver") == "q-driver-2", 30, "the new driver current")
    assert status["upgrade"]["state"] == "HandingOver" and status["phase"] == "Upgrading"
    wait_for(lambda: _names(cluster, "q") == ["q-driver-2"], 30, "the old driver deleted")
    cluster.wait_event("q", "UpgradeHandover")
    ready = cluster.condition("q", "Ready")
    assert ready["status"] == "False"  # until the new driver reports progress (no kubelet logs here)


def test_a_quota_without_room_for_the_second_driver_falls_back_to_a_restart(cluster, start_operator):
    # What the quota controller (not running here) would write: one pod used of one.
    quota = {"metadata": {"name": "one-pod"}, "spec": {"hard": {"pods": "1"}}}
    cluster.core.create_namespaced_resource_quota(cluster.namespace, quota)
    cluster.core.patch_namespaced_resource_quota_status("one-pod", cluster.namespace,
                                                        {"status": {"hard": {"pods": "1"}, "used": {"pods": "0"}}})  # fmt: skip
    start_operator()
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    cluster.wait_driver("q", 1)
    cluster.pod_runs("q-driver-1")
    cluster.wait_phase("q", "Running")

    cluster.patch_spec("q", CHANGE)
    event = cluster.wait_event("q", "NoRoomForUpgrade", timeout=60)
    assert "exceeded quota" in event.message, event.message
    wait_for(lambda: "q-driver-1" not in _names(cluster, "q"), 60, "the old driver deleted: a plain restart")
    cluster.core.delete_namespaced_resource_quota("one-pod", cluster.namespace)  # its usage is never recounted here
    pod = wait_for(lambda: next((p for p in cluster.driver_pods("q") if p.metadata.name != "q-driver-1"), None), 90,
                   "the new spec's driver")  # fmt: skip
    assert "streamq.io/role" not in (pod.metadata.labels or {})  # started cold, not as a standby


def test_a_new_driver_that_cannot_start_leaves_the_old_one_running_and_says_why(cluster, start_operator):
    start_operator()
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    cluster.wait_driver("q", 1)
    cluster.pod_runs("q-driver-1")
    cluster.wait_phase("q", "Running")

    cluster.patch_spec("q", CHANGE)
    cluster.wait_driver("q", 2)
    cluster.pod_cannot_pull("q-driver-2")  # a bad image, as the kubelet would say it
    event = cluster.wait_event("q", "UpgradeFailed", timeout=60)
    assert "ErrImagePull" in event.message, event.message
    status = cluster.wait_status("q", lambda s: (s.get("upgrade") or {}).get("state") == "Failed", 30, "the upgrade failed")
    assert status["driver"] == "q-driver-1" and status["phase"] == "Running", status
    degraded = cluster.condition("q", "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == "UpgradeFailed", degraded
    wait_for(lambda: _names(cluster, "q") == ["q-driver-1"], 30, "the new driver deleted, the old one running on")
