"""Say why it waits: a driver that cannot be scheduled or pulled shows the real reason in
status, a condition, one event and `kubectl get sq` within 30 s, stays retryable, and
(for a missing PVC) starts by itself once the cause is fixed outside the spec.

The health GitOps tools compute (Argo CD's script, kstatus) is checked on the same live
objects."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from testbed.cluster.addons import UNPULLABLE_IMAGE
from testbed.cluster.workload import figure, fraud_spec
from testbed.wait import wait_for
from tests.unit.controller.gitops_rules import argo_health, kstatus

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SAID_WITHIN_S = 30


def _conditions(status: dict) -> dict[str, dict]:
    return {c["type"]: c for c in status.get("conditions") or []}


def _events(sq, name: str, reason: str) -> list[dict]:
    out = sq.kubectl("get", "events", "-o", "json", "--field-selector",
                     f"involvedObject.kind=StreamingQuery,involvedObject.name={name},reason={reason}").stdout  # fmt: skip
    return json.loads(out)["items"]


def _said(sq, name: str, reason: str, needle: str) -> dict | None:
    status = sq.status(name)
    ready = _conditions(status).get("Ready") or {}
    return status if ready.get("reason") == reason and needle in (status.get("message") or "") else None


def _check_retryable(sq, name: str, status: dict, reason: str) -> None:
    """Said in every place at once, and nothing that gives up or counts a restart."""
    conditions = _conditions(status)
    assert status["phase"] == "Starting" and status.get("restarts", 0) == 0 and status.get("attempt") == 1, status
    assert {k: conditions[k]["status"] for k in ("Ready", "Reconciling", "Stalled", "Degraded")} == {
        "Ready": "False", "Reconciling": "True", "Stalled": "False", "Degraded": "True"}  # fmt: skip
    assert conditions["Degraded"]["reason"] == reason
    table = sq.kubectl("get", "sq", name).stdout  # the default columns, as a user types it
    assert reason in table.splitlines()[1].split(), table
    obj = sq.get(name)
    assert kstatus(obj) == "InProgress" and argo_health(obj)[0] == "Degraded"


def test_a_missing_pvc_is_said_and_the_query_starts_once_it_exists(cluster, kafka, sq):
    name = sq.name("nopvc")
    claim = f"streamq-{name}"  # a claim named for queries (policy.allowedClaims)
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    spec = fraud_spec(source, sink, None, **{"checkpoint.volume": {"persistentVolumeClaim": {"claimName": claim}}})
    t0 = time.monotonic()
    sq.apply(name, spec)
    status = wait_for(lambda: _said(sq, name, "Unschedulable", f'persistentvolumeclaim "{claim}" not found'),
                      SAID_WITHIN_S, lambda: "the missing PVC in status\n" + sq.describe(name), interval=1,
                      ignore=(Exception,))  # fmt: skip
    said_in = time.monotonic() - t0
    _check_retryable(sq, name, status, "Unschedulable")
    assert len(_events(sq, name, "Unschedulable")) == 1
    driver = status["driver"]

    # The platform team creates the claim (a hostPath volume bound to it): no spec change.
    volume = f"{name}-pv"
    cluster.apply(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                  "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": cluster.node_dir(name), "type": "Directory"},
                  "claimRef": {"namespace": sq.namespace, "name": claim}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": sq.namespace},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": volume,
                  "resources": {"requests": {"storage": "1Gi"}}}},
    ]))  # fmt: skip
    try:
        t1 = time.monotonic()
        running = sq.wait_running(name, timeout=420)
        started_in = time.monotonic() - t1
        figure("missing PVC", f"reason in status {said_in:.0f}s after apply; Running {started_in:.0f}s after the PVC appeared")
        assert running["driver"] == driver and running["attempt"] == 1 and running.get("restarts", 0) == 0
        conditions = _conditions(running)
        assert conditions["Degraded"]["status"] == "False" and conditions["Ready"]["status"] == "True"
        obj = sq.get(name)
        assert (kstatus(obj), argo_health(obj)[0]) == ("Current", "Healthy")
    finally:
        sq.kubectl("delete", "sq", name, "--wait=true", "--timeout=120s", check=False)
        sq.kubectl("delete", "pvc", claim, "--ignore-not-found", "--wait=false", check=False)
        cluster.kubectl("delete", "pv", volume, "--ignore-not-found", "--wait=false", check=False)


def test_an_image_that_cannot_be_pulled_is_said_once_and_stays_retryable(cluster, kafka, sq):
    # The session's policy allows the image (testbed.cluster.addons.E2E_POLICY); it never pulls.
    unpullable_allowed = UNPULLABLE_IMAGE
    name = sq.name("nopull")
    spec = fraud_spec(f"{name}-payments", f"{name}-flagged", None, **{"runtime.image": unpullable_allowed})
    t0 = time.monotonic()
    sq.apply(name, spec)
    status = wait_for(lambda: _said(sq, name, "ImagePullFailed", unpullable_allowed), SAID_WITHIN_S,
                      lambda: "the image pull failure in status\n" + sq.describe(name), interval=1, ignore=(Exception,))  # fmt: skip
    said_in = time.monotonic() - t0
    _check_retryable(sq, name, status, "ImagePullFailed")
    assert any(k in status["message"] for k in ("ErrImagePull", "ImagePullBackOff")), status["message"]

    # The kubelet goes on alternating ErrImagePull and ImagePullBackOff: still one cause, one event.
    def backed_off() -> bool:
        pod = sq.driver_pod(name)
        waiting = ((pod["status"].get("containerStatuses") or [{}])[0].get("state") or {}).get("waiting") or {}
        return waiting.get("reason") == "ImagePullBackOff"

    wait_for(backed_off, 60, lambda: "the driver in ImagePullBackOff\n" + sq.describe(name), interval=1, ignore=(Exception,))
    wait_for(lambda: _said(sq, name, "ImagePullFailed", unpullable_allowed), 10, "still said", interval=1, ignore=(Exception,))
    assert len(_events(sq, name, "ImagePullFailed")) == 1
    later = sq.status(name)
    assert later["phase"] == "Starting" and later.get("restarts", 0) == 0 and later.get("attempt") == 1
    figure("unpullable image", f"reason in status {said_in:.0f}s after apply; still Starting, 0 restarts, 1 event")
