"""The operator, under its own RBAC (manifests/base) against a real kube-apiserver, gives a standby
query's driver an account that reaches the query's Lease and nothing else: it can create the
ServiceAccount, Role and RoleBinding (RBAC's escalation check passes because it holds what the
Role grants), and the API server's own answer (SubjectAccessReview, `kubectl auth can-i --as`)
is yes for get/update of that Lease only. No kubelet here: the driver pods never run."""

from __future__ import annotations

import json

import pytest

from contract.lease import lease_name
from controller import names
from testbed.specs import RATE_TO_CONSOLE, query_spec
from testbed.wait import wait_for

pytestmark = pytest.mark.integration

STANDBY = {"runtime.standby": True, "checkpoint.volume": {"persistentVolumeClaim": {"claimName": "streamq-cp"}}}


def _can_i(kube, namespace: str, account: str, verb: str, what: str) -> bool:
    proc = kube.kubectl(
        "-n", namespace, "auth", "can-i", verb, what, f"--as=system:serviceaccount:{namespace}:{account}", check=False
    )
    assert proc.stdout.strip() in ("yes", "no"), (proc.stdout, proc.stderr)
    return proc.stdout.strip() == "yes"


def _get(kube, namespace: str, kind: str, name: str) -> dict:
    return json.loads(kube.kubectl("-n", namespace, "get", kind, name, "-o", "json").stdout)


def test_a_standby_driver_runs_as_an_account_that_reaches_its_own_lease_only(cluster, operator, kube_apiserver):
    ns = cluster.namespace
    cluster.apply("q", query_spec(RATE_TO_CONSOLE, **STANDBY))
    pod = cluster.wait_driver("q", 1)
    account, lease = names.lease_access_name("q"), lease_name("q")
    assert pod.spec.service_account_name == account == "q-lease"
    uid = cluster.get("q")["metadata"]["uid"]
    for kind, name in (("serviceaccount", account), ("role", account), ("rolebinding", account), ("lease", lease),
                       ("poddisruptionbudget", "q-drivers")):  # fmt: skip
        refs = _get(kube_apiserver, ns, kind, name)["metadata"]["ownerReferences"]
        assert [(r["kind"], r["uid"]) for r in refs] == [("StreamingQuery", uid)], kind
    assert not _get(kube_apiserver, ns, "lease", lease)["spec"].get("holderIdentity")  # free for the first driver
    yes = {("get", f"leases.coordination.k8s.io/{lease}"), ("update", f"leases.coordination.k8s.io/{lease}")}
    no = {("get", "leases.coordination.k8s.io/other-driver"), ("update", "leases.coordination.k8s.io/other-driver"),
          ("create", "leases.coordination.k8s.io"), ("delete", f"leases.coordination.k8s.io/{lease}"),
          ("list", "leases.coordination.k8s.io"), ("create", "pods"), ("delete", "pods"), ("get", "secrets"),
          ("create", "configmaps"), ("create", "rolebindings.rbac.authorization.k8s.io")}  # fmt: skip
    answers = {(v, w): _can_i(kube_apiserver, ns, account, v, w) for v, w in sorted(yes | no)}
    assert {k for k, v in answers.items() if v} == yes, answers
    # the operator itself holds no bind or escalate: it can grant only what it holds
    operator_sa = "system:serviceaccount:streamq-system:streamq-operator"
    for verb in ("bind", "escalate"):
        proc = kube_apiserver.kubectl(
            "-n", ns, "auth", "can-i", verb, "roles.rbac.authorization.k8s.io", f"--as={operator_sa}", check=False
        )
        assert proc.stdout.strip() == "no"
    # standby turned off: the next driver is alone, so the disruption budget that would block every drain goes
    pdb = _get(kube_apiserver, ns, "poddisruptionbudget", "q-drivers")
    assert pdb["spec"]["minAvailable"] == 1 and pdb["spec"]["selector"]["matchLabels"] == names.labels("q", "driver")
    cluster.patch_spec("q", {"runtime": {"standby": False}})
    cluster.wait_driver("q", 2)
    wait_for(lambda: kube_apiserver.kubectl("-n", ns, "get", "poddisruptionbudget", "q-drivers", check=False).returncode != 0,
             30, "the PodDisruptionBudget deleted")  # fmt: skip


def test_with_executors_the_binding_moves_to_the_driver_account(cluster, operator, kube_apiserver):
    """Executors turned on for a standby query: the next driver runs as the driver account, and the
    query's RoleBinding now names it, so it reaches that one Lease (the driver role has no Leases)."""
    ns = cluster.namespace
    kube_apiserver.kubectl("-n", ns, "create", "serviceaccount", "streamq-driver")
    cluster.apply("q", query_spec(RATE_TO_CONSOLE, **STANDBY))
    cluster.wait_driver("q", 1)
    cluster.patch_spec("q", {"runtime": {"executors": {"instances": 1, "cores": 2, "memory": "1Gi"}}})
    pod = cluster.wait_driver("q", 2)
    assert pod.spec.service_account_name == "streamq-driver"
    binding = wait_for(lambda: (b := _get(kube_apiserver, ns, "rolebinding", "q-lease"))["subjects"][0]["name"] == "streamq-driver" and b,
                       30, "the binding naming the driver account")  # fmt: skip
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "streamq-driver", "namespace": ns}]
    assert _can_i(kube_apiserver, ns, "streamq-driver", "update", "leases.coordination.k8s.io/q-driver")
    assert not _can_i(kube_apiserver, ns, "streamq-driver", "update", "leases.coordination.k8s.io/other-driver")
    assert not _can_i(kube_apiserver, ns, "q-lease", "update", "leases.coordination.k8s.io/q-driver")
