"""A driver gets a token only when it needs one, and a standby query's driver reaches its own
Lease and nothing else (controller.render.lease_access)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contract.load import validate_spec
from contract.policy import Policy
from controller import names, render
from controller.access import DRIVER_ACCESS, LEASE_ACCESS, OPERATOR_ACCESS
from controller.config import Settings
from controller.render import lease_access
from controller.run import Run
from tests.unit.controller.world import base_spec

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = Settings(job_image="streamq:9.9.9", spark_version="4.3.0")
STANDBY = {"runtime.standby": True, "checkpoint.volume": {"persistentVolumeClaim": {"claimName": "cp"}}}
EXECUTORS = {"runtime.executors": {"instances": 2, "cores": 1, "memory": "1Gi"}}


def make_run(**changes) -> Run:
    spec = validate_spec(base_spec(**changes))
    return Run(query="payments", namespace="team-a", attempt=1, spec=spec, checkpoint_location=spec.checkpoint.location)


def _kinds(objs: list[dict]) -> list[str]:
    return [o["kind"] for o in objs]


RESTART = {"upgrade": {"strategy": "restart"}}


def test_warm_upgrades_alone_run_as_the_querys_own_lease_account():
    """The default (upgrade.strategy warm): the next spec's driver waits on the Lease the running one
    holds, so every driver takes it (controller.decide.upgrade); no standby: no disruption budget."""
    run = make_run(**{"checkpoint.volume": {"persistentVolumeClaim": {"claimName": "cp"}}})
    assert lease_access.service_account(run, SETTINGS) == "payments-lease"
    assert render.driver_pod(run, SETTINGS)["spec"]["serviceAccountName"] == "payments-lease"
    assert _kinds(render.children(run, SETTINGS)) == ["ServiceAccount", "Role", "RoleBinding", "Lease", "ConfigMap", "Pod"]


def test_no_executors_no_standby_no_warm_upgrades_no_account_and_no_token():
    run = make_run(**RESTART)  # (its checkpoint is the pod's own too: no warm upgrades either way)
    assert lease_access.service_account(run, SETTINGS) is None
    assert lease_access.objects(run, SETTINGS) == []
    spec = render.driver_pod(run, SETTINGS)["spec"]
    assert spec["automountServiceAccountToken"] is False and "serviceAccountName" not in spec
    assert not [v for v in spec["volumes"] if "projected" in v or "serviceAccountToken" in str(v)]
    assert _kinds(render.children(run, SETTINGS)) == ["ConfigMap", "Pod"]


def test_standby_alone_runs_as_the_querys_own_lease_account():
    run = make_run(**STANDBY)
    assert lease_access.service_account(run, SETTINGS) == "payments-lease"
    pod = render.driver_pod(run, SETTINGS)
    assert pod["spec"]["serviceAccountName"] == "payments-lease"
    assert "automountServiceAccountToken" not in pod["spec"]  # the token of that account is mounted
    children = render.children(run, SETTINGS)
    # the account, its Role and RoleBinding and the Lease come before the pod that names the account
    assert _kinds(children) == ["ServiceAccount", "Role", "RoleBinding", "Lease", "ConfigMap", "PodDisruptionBudget", "Pod"]


def test_the_lease_role_names_one_lease_and_two_verbs():
    account, role, binding, lease = lease_access.objects(make_run(**STANDBY), SETTINGS)
    assert account == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "payments-lease", "namespace": "team-a", "labels": names.labels("payments", names.COMPONENT_LEASE)},
    }
    assert role["apiVersion"] == "rbac.authorization.k8s.io/v1" and role["metadata"]["name"] == "payments-lease"
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "resourceNames": ["payments-driver"], "verbs": ["get", "update"]}]  # fmt: skip
    # no create: RBAC cannot narrow create to a name, so the operator makes the Lease
    assert {(r["apiGroups"][0], r["resources"][0], v) for r in role["rules"] for v in r["verbs"]} == set(LEASE_ACCESS)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "payments-lease"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "payments-lease", "namespace": "team-a"}]
    assert lease["apiVersion"] == "coordination.k8s.io/v1" and lease["metadata"]["name"] == "payments-driver"
    assert "holderIdentity" not in lease["spec"]  # free: the first driver takes it with update


def test_the_lease_is_the_one_the_driver_is_told():
    run = make_run(**STANDBY)
    env = {e["name"]: e.get("value") for e in render.driver_pod(run, SETTINGS)["spec"]["containers"][0]["env"]}
    *_, lease = lease_access.objects(run, SETTINGS)
    assert env["STREAMQ_LEASE"] == lease["metadata"]["name"]


def test_executors_and_standby_the_driver_account_reaches_this_querys_lease_only():
    run = make_run(**STANDBY, **EXECUTORS)
    assert render.driver_pod(run, SETTINGS)["spec"]["serviceAccountName"] == "streamq-driver"
    objs = lease_access.objects(run, SETTINGS)
    assert _kinds(objs) == ["Role", "RoleBinding", "Lease"]  # no per-query account: the driver's is used
    binding = objs[1]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "streamq-driver", "namespace": "team-a"}]
    assert objs[0]["rules"][0]["resourceNames"] == ["payments-driver"]


def test_executors_without_standby_get_the_driver_account_and_no_lease_objects():
    run = make_run(**EXECUTORS, **RESTART)
    assert render.driver_pod(run, SETTINGS)["spec"]["serviceAccountName"] == "streamq-driver"
    assert lease_access.objects(run, SETTINGS) == []


def test_a_spec_account_with_standby_is_bound_to_the_lease():
    run = make_run(**STANDBY, **{"runtime.serviceAccountName": "payments-sa"})
    assert render.driver_pod(run, SETTINGS)["spec"]["serviceAccountName"] == "payments-sa"
    objs = lease_access.objects(run, SETTINGS)
    assert _kinds(objs) == ["Role", "RoleBinding", "Lease"]
    assert objs[1]["subjects"][0]["name"] == "payments-sa"


def test_the_longest_query_names_give_valid_account_names():
    from contract.names import MAX_QUERY_NAME

    name = "a" * MAX_QUERY_NAME
    spec = validate_spec(base_spec(**STANDBY))
    run = Run(query=name, namespace="team-a", attempt=1, spec=spec, checkpoint_location=spec.checkpoint.location)
    account, role, binding, _ = lease_access.objects(run, SETTINGS)
    assert len(account["metadata"]["name"]) <= 63 and account["metadata"]["name"].endswith("-lease")
    assert role["metadata"]["name"] == binding["metadata"]["name"] == account["metadata"]["name"]


def _rules(path: str, kind: str, name: str) -> set[tuple[str, str, str]]:
    docs = [d for d in yaml.safe_load_all((ROOT / path).read_text()) if d]
    role = next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def test_the_operator_holds_what_it_grants_and_what_it_creates():
    """RBAC's escalation check: a Role is created (and bound) only by someone who holds its rules."""
    granted = _rules("manifests/base/operator-rbac.yaml", "ClusterRole", "streamq-operator")
    assert set(LEASE_ACCESS) <= granted
    for kind, resource in [
        ("ServiceAccount", "serviceaccounts"),
        ("Role", "roles"),
        ("RoleBinding", "rolebindings"),
        ("Lease", "leases"),
    ]:
        group = {"ServiceAccount": "", "Lease": "coordination.k8s.io"}.get(kind, "rbac.authorization.k8s.io")
        assert (group, resource, "create") in OPERATOR_ACCESS
    assert ("rbac.authorization.k8s.io", "rolebindings", "patch") in OPERATOR_ACCESS  # the subject follows the spec
    assert ("rbac.authorization.k8s.io", "roles", "bind") not in granted and (
        "rbac.authorization.k8s.io",
        "roles",
        "escalate",
    ) not in granted


def test_the_driver_account_is_executor_pods_and_their_config_map_only():
    """The smallest role Spark's client mode works with (controller.access names the code)."""
    driver = _rules("manifests/base/driver-rbac.yaml", "ClusterRole", "streamq-driver")
    assert driver == set(DRIVER_ACCESS)
    assert {r for _, r, _ in driver} == {"pods", "configmaps"}
    assert {v for _, r, v in driver if r == "configmaps"} == {"create", "deletecollection"}
    assert not {v for _, _, v in driver} & {"escalate", "bind", "impersonate", "*"}
    assert not any(r in ("secrets", "leases", "serviceaccounts", "roles", "rolebindings") for _, r, _ in driver)


def test_executor_pods_get_no_token_either():
    """Spark names no executor account in client mode: without this the namespace's default
    account's token would be mounted into every executor."""
    template = render.executor_pod_template(SETTINGS)
    assert template["spec"]["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in template["spec"]


def test_a_driver_taking_the_operators_lease_keeps_its_owner_and_labels():
    """The driver writes the Lease with update (a whole-object replace): the StreamingQuery's
    ownerReference and the labels the operator put on it must survive, or it outlives the query."""
    import threading

    from kubernetes import client

    from app.driver.lease_holder import DriverLease

    class Api:
        api_client = client.ApiClient()

        def __init__(self):
            self.written: list[dict] = []

        def read_namespaced_lease(self, name, namespace, **_):
            owner = client.V1OwnerReference(api_version="streamq.io/v1alpha1", kind="StreamingQuery", name="payments",
                                            uid="u-1", controller=True, block_owner_deletion=True)  # fmt: skip
            meta = client.V1ObjectMeta(name=name, namespace=namespace, resource_version="7",
                                       labels={"streamq.io/query": "payments"}, owner_references=[owner])  # fmt: skip
            return client.V1Lease(metadata=meta, spec=client.V1LeaseSpec(lease_duration_seconds=8))

        def replace_namespaced_lease(self, name, namespace, body, **_):  # answers as the API server does
            self.written.append(body)
            meta = client.V1ObjectMeta(name=name, namespace=namespace, resource_version="8")
            return client.V1Lease(metadata=meta, spec=client.V1LeaseSpec(holder_identity=body["spec"]["holderIdentity"]))

    api = Api()
    assert DriverLease("payments-driver", "team-a", "payments-driver-1", api=api).acquire(threading.Event())
    (body,) = api.written
    meta = body["metadata"]
    assert meta["ownerReferences"] == [{"apiVersion": "streamq.io/v1alpha1", "kind": "StreamingQuery", "name": "payments",
                                        "uid": "u-1", "controller": True, "blockOwnerDeletion": True}]  # fmt: skip
    assert meta["labels"] == {"streamq.io/query": "payments"} and meta["resourceVersion"] == "7"
    assert body["spec"]["holderIdentity"] == "payments-driver-1"


# --- policy.allowStandby: false: no query holds a Lease token ---------------------------------

NO_STANDBY = Settings(job_image="streamq:9.9.9", spark_version="4.3.0", policy=Policy(allow_standby=False))
SHARED_CHECKPOINT = {"checkpoint.volume": {"persistentVolumeClaim": {"claimName": "cp"}}}


@pytest.mark.parametrize(("changes", "kinds", "account"), [
    (SHARED_CHECKPOINT, ["ConfigMap", "Pod"], None),  # warm upgrades by default: off with the policy
    ({**SHARED_CHECKPOINT, **{"upgrade": {"strategy": "blueGreen"}}}, ["ConfigMap", "Pod"], None),
    (RESTART, ["ConfigMap", "Pod"], None),
    ({**SHARED_CHECKPOINT, **EXECUTORS}, ["ConfigMap", "Service", "Pod"], "streamq-driver"),
])  # fmt: skip
def test_without_standby_on_the_platform_no_lease_objects_and_no_lease_account(changes, kinds, account):
    run = make_run(**changes)
    assert lease_access.objects(run, NO_STANDBY) == []
    assert not lease_access.needs_lease(run, NO_STANDBY.policy)
    assert lease_access.service_account(run, NO_STANDBY) == account
    assert [k for k in _kinds(render.children(run, NO_STANDBY)) if k != "Secret"] == kinds
    pod = render.driver_pod(run, NO_STANDBY)["spec"]
    assert "STREAMQ_LEASE" not in {e["name"] for e in pod["containers"][0]["env"]}
    assert pod.get("serviceAccountName") == account and (account is not None or pod["automountServiceAccountToken"] is False)


def test_the_same_query_takes_the_lease_where_the_platform_allows_standby():
    run = make_run(**SHARED_CHECKPOINT)
    assert lease_access.needs_lease(run, Policy()) and lease_access.needs_lease(run, None)
    assert _kinds(lease_access.objects(run, SETTINGS)) == ["ServiceAccount", "Role", "RoleBinding", "Lease"]


# --- the driver account is for drivers that start executors ----------------------------------


@pytest.mark.parametrize(("changes", "account"), [
    ({"runtime.serviceAccountName": "streamq-driver", **RESTART}, None),
    ({"runtime.serviceAccountName": "streamq-driver", **SHARED_CHECKPOINT}, "payments-lease"),
    ({"runtime.serviceAccountName": "streamq-driver", **EXECUTORS}, "streamq-driver"),
    ({"runtime.serviceAccountName": "payments-sa", **RESTART}, "payments-sa"),
])  # fmt: skip
def test_a_named_driver_account_without_executors_is_never_the_drivers(changes, account):
    """The policy refuses such a spec first (policy.allowedServiceAccounts); this is the second line."""
    assert lease_access.service_account(make_run(**changes), SETTINGS) == account
