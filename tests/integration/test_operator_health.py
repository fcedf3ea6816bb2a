"""Health as GitOps tools compute it, on StreamingQueries the operator runs against a real
kube-apiserver (the test plays the kubelet and the scheduler by writing the driver pod's
status): Argo CD's script and kstatus's rules over the objects as the API returns them.

    STREAMQ_CAPTURE_STATUSES=1 pytest tests/integration/test_operator_health.py

also writes those objects to tests/unit/controller/captured_statuses.json, which the unit
tier (test_gitops_health.py) judges again without a cluster."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from testbed.specs import RATE_TO_CONSOLE, query_spec
from tests.unit.controller.gitops_rules import argo_health, kstatus

pytestmark = pytest.mark.integration

CAPTURED = Path(__file__).resolve().parents[1] / "unit" / "controller" / "captured_statuses.json"
QUICK = {"restartPolicy": {"backoff": {"initial": "1s", "max": "1s"}, "maxRestarts": 0}}
PVC_MISSING = '0/1 nodes are available: persistentvolumeclaim "checkpoints" not found.'

# state -> (phase, Argo CD health, kstatus)
EXPECTED = {
    "starting": ("Starting", "Progressing", "InProgress"),
    "running": ("Running", "Healthy", "Current"),
    "unschedulable": ("Starting", "Degraded", "InProgress"),
    "invalid": ("Invalid", "Degraded", "Failed"),
    "out of restarts": ("Failed", "Degraded", "Failed"),
    "suspended": ("Suspended", "Suspended", "Current"),
}


def _kept(obj: dict) -> dict:
    """What the tools read, without what changes on every run (uid, resourceVersion, managedFields)."""
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "metadata": {"name": meta["name"], "generation": meta["generation"]}, "status": obj["status"]}  # fmt: skip


def test_argo_cd_and_kstatus_read_real_queries_alike(cluster, operator):
    states = {state: state.replace(" ", "-") for state in EXPECTED}
    for name in states.values():
        cluster.apply(name, query_spec(RATE_TO_CONSOLE, **QUICK, suspend=name == "suspended"))
    for name in ("running", "unschedulable", "invalid", "out-of-restarts"):
        cluster.wait_driver(name, 1)
    cluster.pod_runs("running-driver-1")
    cluster.core.patch_namespaced_pod_status(  # what the scheduler writes
        "unschedulable-driver-1",
        cluster.namespace,
        {
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": PVC_MISSING}],
            }
        },
        _content_type="application/merge-patch+json",
    )
    cluster.pod_dies("invalid-driver-1", 65, "QUERY_REFUSED: Continuous processing does not support Aggregate operations.")
    cluster.pod_dies("out-of-restarts-driver-1", 70, "QUERY_FAILED: broker gone")

    captured = {}
    for state, name in states.items():
        phase, argo, kstat = EXPECTED[state]
        cluster.wait_phase(name, phase)
        if state == "unschedulable":
            cluster.wait_status(name, lambda s: PVC_MISSING in (s.get("message") or ""), what="the scheduler's reason")
        obj = cluster.get(name)
        assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
        assert (argo_health(obj)[0], kstatus(obj)) == (argo, kstat), (state, obj["status"])
        captured[state] = _kept(obj)
    assert cluster.wait_event("unschedulable", "Unschedulable").type == "Warning"
    if os.environ.get("STREAMQ_CAPTURE_STATUSES") == "1":
        CAPTURED.write_text(json.dumps(captured, indent=1, sort_keys=True) + "\n")
