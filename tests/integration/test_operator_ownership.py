"""The operator writes over, or deletes, only what its query controls (issue #35), on a real
API server: objects that hold the names a query's children would take (a Service, a ConfigMap,
a RoleBinding, a Lease, a PodDisruptionBudget) are left byte for byte as they were while the
query starts, changes and goes, and the query says which name is taken (NameConflict) instead
of adopting it. The test plays the kubelet; nothing races: each step waits on a condition."""

from __future__ import annotations

import pytest
from kubernetes import client

from contract import GROUP, PLURAL, VERSION
from contract.lease import lease_name
from controller import names
from controller.decide import spark_ui
from testbed.specs import query_spec
from testbed.wait import wait_for

pytestmark = pytest.mark.integration

Q = "kafka"  # its UI Service would be kafka-ui: the name of the namespace's Kafka UI
CLAIM = {"persistentVolumeClaim": {"claimName": "streamq-ck"}}
# standby: the Lease, its account, Role and RoleBinding, and a PodDisruptionBudget; sparkUI: the UI Service
SPEC = query_spec(**{"runtime.standby": True, "runtime.sparkUI": True, "checkpoint.volume": CLAIM})
TENANT_LABELS = {"app": "kafka-ui"}


def _objects(ns: str) -> dict[str, dict]:
    """What exists before the query, as another controller or a person made it."""
    meta = lambda name: client.V1ObjectMeta(name=name, namespace=ns, labels=TENANT_LABELS)  # noqa: E731
    return {
        "Service": client.V1Service(metadata=meta(names.spark_ui_service_name(Q)), spec=client.V1ServiceSpec(
            selector=TENANT_LABELS, ports=[client.V1ServicePort(port=8080)])),
        "ConfigMap": client.V1ConfigMap(metadata=meta(names.config_map_name(Q)), data={"platform": "settings"}),
        "RoleBinding": client.V1RoleBinding(
            metadata=meta(names.lease_access_name(Q)),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="pod-admin"),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name="platform-bot", namespace=ns)]),
        "Lease": client.V1Lease(metadata=meta(lease_name(Q)), spec=client.V1LeaseSpec(holder_identity="platform-bot")),
        "PodDisruptionBudget": client.V1PodDisruptionBudget(metadata=meta(names.disruption_budget_name(Q)),
                                                            spec=client.V1PodDisruptionBudgetSpec(
                                                                min_available=1, selector=client.V1LabelSelector(
                                                                    match_labels=TENANT_LABELS))),
    }  # fmt: skip


class Existing:
    """Create the tenant's objects and read them back as the API server holds them."""

    def __init__(self, api: client.ApiClient, ns: str):
        self.ns = ns
        self.core, self.rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
        self.coordination, self.policy = client.CoordinationV1Api(api), client.PolicyV1Api(api)

    def _calls(self, kind: str):
        return {
            "Service": (self.core.create_namespaced_service, self.core.read_namespaced_service),
            "ConfigMap": (self.core.create_namespaced_config_map, self.core.read_namespaced_config_map),
            "RoleBinding": (self.rbac.create_namespaced_role_binding, self.rbac.read_namespaced_role_binding),
            "Lease": (self.coordination.create_namespaced_lease, self.coordination.read_namespaced_lease),
            "PodDisruptionBudget": (self.policy.create_namespaced_pod_disruption_budget,
                                    self.policy.read_namespaced_pod_disruption_budget),
        }[kind]  # fmt: skip

    def create(self, kind: str, obj) -> None:
        self._calls(kind)[0](self.ns, obj)

    def read(self, kind: str, name: str) -> dict | None:
        try:
            return self._calls(kind)[1](name, self.ns).to_dict()
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise


def test_objects_holding_a_query_child_names_are_never_adopted_changed_or_deleted(cluster, operator, api_client):
    existing = Existing(api_client, cluster.namespace)
    for kind, obj in _objects(cluster.namespace).items():
        existing.create(kind, obj)
    before = {kind: existing.read(kind, obj.metadata.name) for kind, obj in _objects(cluster.namespace).items()}

    def unchanged(step: str) -> None:
        for kind, obj in before.items():
            now = existing.read(kind, obj["metadata"]["name"])
            assert now == obj, f"{step}: {kind} {obj['metadata']['name']} was changed or deleted:\n{now}"

    cluster.apply(Q, SPEC)
    # The first name the query needs that another object holds: the RoleBinding (lease access comes first).
    status = cluster.wait_status(Q, lambda s: "NameConflict" in str(s.get("conditions")), 60, "a NameConflict")
    assert f"RoleBinding {names.lease_access_name(Q)} already exists and is not this query's" in status["message"]
    assert cluster.wait_event(Q, "NameConflict").type == "Warning"
    assert cluster.driver_pods(Q) == []
    unchanged("the query applied")

    # The tenant frees the RoleBinding's name; the next name taken is said, the next object still untouched.
    existing.rbac.delete_namespaced_role_binding(names.lease_access_name(Q), cluster.namespace)
    del before["RoleBinding"]
    status = cluster.wait_status(Q, lambda s: f"Lease {lease_name(Q)} already" in (s.get("message") or ""), 60,
                                 "a NameConflict naming the Lease")  # fmt: skip
    unchanged("the Lease's name taken")
    existing.coordination.delete_namespaced_lease(lease_name(Q), cluster.namespace)
    del before["Lease"]
    cluster.wait_status(Q, lambda s: f"ConfigMap {names.config_map_name(Q)} already" in (s.get("message") or ""), 60,
                        "a NameConflict naming the ConfigMap")  # fmt: skip
    unchanged("the ConfigMap's name taken")
    existing.core.delete_namespaced_config_map(names.config_map_name(Q), cluster.namespace)
    del before["ConfigMap"]
    # The disruption budget's name is taken too: the driver does not start beside another's budget.
    cluster.wait_status(Q, lambda s: "PodDisruptionBudget" in (s.get("message") or ""), 60, "a NameConflict naming the PDB")
    unchanged("the budget's name taken")
    existing.policy.delete_namespaced_pod_disruption_budget(names.disruption_budget_name(Q), cluster.namespace)
    del before["PodDisruptionBudget"]

    # Now the driver runs; the UI Service's name stays another's: no UI, said, the Service untouched.
    cluster.wait_driver(Q, 1)
    cluster.pod_runs(names.driver_name(Q, 1))
    cluster.wait_phase(Q, "Running")
    taken = f"no Spark UI: Service {names.spark_ui_service_name(Q)} already exists and is not this query's"
    wait_for(lambda: any(taken in (e.message or "") for e in cluster.events(Q)), 30, "a NameConflict on the UI Service")
    assert cluster.status(Q).get("sparkUI") is None
    unchanged("the query running")

    # The UI turned off, with a status that says the query has one (as an older operator that adopted
    # the Service would have written): the operator deletes only its own UI Service, so none.
    cluster.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, cluster.namespace, PLURAL, Q, {"status": {"sparkUI": spark_ui.url(Q, cluster.namespace)}}
    )
    cluster.patch_spec(Q, {"runtime": {"sparkUI": False}})
    cluster.wait_status(Q, lambda s: s.get("observedGeneration") == 2 and not s.get("sparkUI"), 30,
                        "generation 2 seen, no UI")  # fmt: skip
    unchanged("the UI turned off")
    cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, cluster.namespace, PLURAL, Q)
    cluster.kube.kubectl("wait", "--for=delete", f"streamingquery/{Q}", "-n", cluster.namespace, "--timeout=60s")
    unchanged("the query deleted")


def test_a_query_name_with_a_dot_is_refused_by_the_api_server(cluster):
    """fraud.filter would share every child name with fraud-filter: the CRD refuses the name."""
    done = cluster.apply("fraud.filter", query_spec(), check=False)
    assert done.returncode != 0 and "metadata.name must be a DNS-1035 label" in done.stderr, done.stderr
    assert cluster.get("fraud.filter") is None
