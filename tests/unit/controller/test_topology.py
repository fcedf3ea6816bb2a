"""Several nodes: a standby query's drivers spread and budgeted, drivers leave a lost node after
restartPolicy.nodeLostAfter, and what the operator reads of a pod evicted from a lost node."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contract.load import validate_spec
from controller import names, render
from controller.config import Settings
from controller.observe import LeaseState, driver_from_pod, lease_from, needs_lease, observe
from controller.run import Run, run_fields, spec_hash
from tests.unit.controller.world import base_spec

pytestmark = pytest.mark.unit

SETTINGS = Settings(job_image="streamq:9.9.9", spark_version="4.3.0")
STANDBY = {"runtime.standby": True, "checkpoint.volume": {"persistentVolumeClaim": {"claimName": "ck"}}}


def run_of(spec: dict, standby: bool = False) -> Run:
    parsed = validate_spec(spec)
    return Run(query="payments", namespace="team-a", attempt=2, spec=parsed,
                      checkpoint_location=parsed.checkpoint.location, standby=standby)  # fmt: skip


@pytest.mark.parametrize("value, seconds", [(None, 30), ("2m", 120), ("0s", 0), ("1500ms", 2)])
def test_drivers_tolerate_a_lost_node_for_node_lost_after(value, seconds):
    spec = base_spec(**({"restartPolicy.nodeLostAfter": value} if value else {}))
    for backend in ("pod", "sparkApplication"):
        run = run_of({**spec, "runtime": {**spec.get("runtime", {}), "backend": backend}})
        pod_spec = (render.driver_pod(run, SETTINGS)["spec"] if backend == "pod"
                    else render.spark_application(run, SETTINGS)["spec"]["driver"])  # fmt: skip
        assert pod_spec["tolerations"] == [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds},
        ]


@pytest.mark.parametrize("value, seconds", [(None, 5), ("2m", 120)])
def test_a_driver_that_holds_the_lease_leaves_a_lost_node_sooner_unless_told(value, seconds):
    """Fenced by its Lease (app/driver/write_fence.py), it writes nothing once its hold lapses: its replacement may
    start as soon as Kubernetes gives up on the node."""
    spec = base_spec(**STANDBY, **({"restartPolicy.nodeLostAfter": value} if value else {}))
    run = run_of(spec)
    assert render.lease_access.needs_lease(run, SETTINGS.policy)
    assert {t["tolerationSeconds"] for t in render.driver_pod(run, SETTINGS)["spec"]["tolerations"]} == {seconds}


def test_node_lost_after_unset_changes_no_running_drivers_hash_nor_document():
    spec = base_spec()
    parsed = validate_spec(spec)
    assert parsed.restart_policy.node_lost_after is None
    assert "nodeLostAfter" not in parsed.model_dump(mode="json", by_alias=True, exclude_none=True)["restartPolicy"]
    assert "restartPolicy" not in run_fields(parsed)
    set_ = validate_spec(base_spec(**{"restartPolicy.nodeLostAfter": "45s"}))
    assert spec_hash(set_, "/checkpoints/q") == spec_hash(parsed, "/checkpoints/q")  # taken by the next driver


def test_a_standby_querys_drivers_prefer_different_nodes_and_only_theirs():
    for standby in (False, True):  # the first driver and its standby alike
        pod = render.driver_pod(run_of(base_spec(**STANDBY), standby=standby), SETTINGS)
        (term,) = pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod["spec"]["affinity"]["podAntiAffinity"]
        assert term["podAffinityTerm"] == {"labelSelector": {"matchLabels": names.labels("payments", "driver")},
                                           "topologyKey": "kubernetes.io/hostname"}  # fmt: skip
        # it selects the query's driver pods (both attempts), not its executors
        selector = term["podAffinityTerm"]["labelSelector"]["matchLabels"]
        assert selector.items() <= pod["metadata"]["labels"].items()
        assert not selector.items() <= names.labels("payments", "executor", 2).items()
    plain = render.driver_pod(run_of(base_spec()), SETTINGS)
    assert "affinity" not in plain["spec"]
    on_one_node = base_spec(**{**STANDBY, "checkpoint.volume": {"hostPath": "/var/lib/streamq"}})
    assert "affinity" not in render.driver_pod(run_of(on_one_node), SETTINGS)["spec"]  # its checkpoint is that node's


def test_a_standby_query_gets_a_disruption_budget_over_its_drivers():
    run = run_of(base_spec(**STANDBY))
    kinds = [c["kind"] for c in render.children(run, SETTINGS)]
    assert kinds.count("PodDisruptionBudget") == 1 and kinds[-1] == "Pod"
    pdb = render.disruption_budget(run)
    assert pdb["apiVersion"] == "policy/v1" and pdb["metadata"]["name"] == "payments-drivers"
    assert pdb["metadata"]["namespace"] == "team-a"
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": names.labels("payments", "driver")},
                           "unhealthyPodEvictionPolicy": "AlwaysAllow"}  # fmt: skip
    assert render.absent_children(run) == []
    plain = run_of(base_spec())
    assert "PodDisruptionBudget" not in [c["kind"] for c in render.children(plain, SETTINGS)]
    assert render.absent_children(plain) == [("PodDisruptionBudget", "payments-drivers")]  # standby turned off


def evicted_pod(env: list | None = None, reason: str = "DeletionByTaintManager") -> dict:
    return {
        "metadata": {"name": "q-driver-1", "labels": {names.LABEL_ATTEMPT: "1"},
                     "deletionTimestamp": "2026-01-01T12:01:00Z"},
        "spec": {"containers": [{"name": "driver", "env": env or []}]},
        "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "DisruptionTarget", "status": "True", "reason": reason,
             "message": "Taint manager: deleting due to NoExecute taint"},
        ]},
    }  # fmt: skip


def test_a_pod_evicted_from_a_lost_node_and_whether_a_lease_fences_it():
    d = driver_from_pod(evicted_pod(env=[{"name": "STREAMQ_LEASE", "value": "q-driver"}]))
    assert d.deleting and d.node_lost and d.fenced
    assert needs_lease((d,))
    other = driver_from_pod(evicted_pod(reason="PreemptionByScheduler"))
    assert not other.node_lost and not other.fenced and not needs_lease((other,))
    plain = driver_from_pod(evicted_pod())
    assert plain.node_lost and not needs_lease((plain,))  # no Lease to read: forceDeleteAfter decides


def test_the_lease_as_read():
    state = lease_from({"metadata": {"name": "q-driver"}, "spec": {
        "holderIdentity": "q-driver-1", "leaseDurationSeconds": 8, "renewTime": "2026-01-01T12:00:00.250000Z"}})  # fmt: skip
    assert state == LeaseState("q-driver", "q-driver-1", datetime(2026, 1, 1, 12, 0, 0, 250000, tzinfo=UTC), 8.0)
    assert state.expires_at == datetime(2026, 1, 1, 12, 0, 8, 250000, tzinfo=UTC)
    free = lease_from({"metadata": {"name": "q-driver"}, "spec": {"leaseDurationSeconds": 8}})
    assert free.holder is None and free.expires_at is None


class FakeKube:
    def __init__(self, pods):
        self.pods, self.leases_read = pods, []

    def list_pods(self, namespace, selector):
        return self.pods

    def read_lease(self, namespace, name):
        self.leases_read.append(name)
        return {"metadata": {"name": name}, "spec": {"holderIdentity": "q-driver-2", "leaseDurationSeconds": 8}}


def test_observe_reads_the_lease_only_when_a_fenced_drivers_node_is_lost():
    fenced = evicted_pod(env=[{"name": "STREAMQ_LEASE", "value": "q-driver"}])
    kube = FakeKube([fenced])
    assert observe(kube, "ns", "q", include_spark_apps=False).lease.holder == "q-driver-2"
    assert kube.leases_read == ["q-driver"]
    healthy = {**fenced, "status": {"phase": "Running"}, "metadata": {**fenced["metadata"], "deletionTimestamp": None}}
    kube = FakeKube([healthy])
    assert observe(kube, "ns", "q", include_spark_apps=False).lease is None and kube.leases_read == []
