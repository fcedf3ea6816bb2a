"""A StreamingQuery is not a key to the cluster: every hostile spec is refused on a real
API server, by the CRD (static limits) or by the operator's policy, with the rule it
broke named where the user looks, and no pod is ever created."""

from __future__ import annotations

import json

import pytest

from tests.hostile_specs import REFUSED_BY_LIMITS, REFUSED_BY_POLICY
from tests.support.specs import query_spec

pytestmark = pytest.mark.integration


def _name(case: str) -> str:
    return "h-" + "".join(c if c.isalnum() else "-" for c in case.lower()).strip("-")[:40].strip("-")


def test_the_crd_refuses_specs_past_its_limits(cluster):
    for case, (spec, path, _, _, _) in sorted(REFUSED_BY_LIMITS.items()):
        done = cluster.apply(_name(case), spec, check=False)
        assert done.returncode != 0, f"{case}: accepted by the API server"
        field = path.removeprefix("spec.").split("[", 1)[0].split(".", 1)[0]
        assert field in done.stderr, f"{case}: {done.stderr[-500:]}"
        assert cluster.get(_name(case)) is None, case
    assert cluster.core.list_namespaced_pod(cluster.namespace).items == []


def test_the_operator_refuses_specs_outside_the_policy_before_any_pod(cluster, operator):
    """The operator runs with the chart's default policy; the query's namespace is the test's
    own, so rules that depend on the namespace (the operator's account) name the rule that
    applies there."""
    applied = {}
    for case, (spec, namespace, path, rule) in sorted(REFUSED_BY_POLICY.items()):
        cluster.apply(_name(case), spec)
        applied[case] = (path, rule if namespace in ("team-a", None) else "policy.")
    for case, (path, rule) in applied.items():
        status = cluster.wait_phase(_name(case), "Invalid")
        assert f"{path}: {rule}" in status["message"], f"{case}: {status['message']}"
        invalid = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert invalid["status"] == "False" and invalid["reason"] == "PolicyViolation", (case, invalid)
        cluster.wait_event(_name(case), "PolicyViolation")
    assert cluster.core.list_namespaced_pod(cluster.namespace).items == []
    assert not [cm.metadata.name for cm in cluster.core.list_namespaced_config_map(cluster.namespace).items
                if cm.metadata.name.startswith("h-")]  # fmt: skip


PASSWORD = "s3cr3t-Pa55-7f0c2e"


def test_a_password_in_a_secret_appears_nowhere_the_operator_writes(cluster, operator, kube_apiserver):
    """The Secret is referenced, never copied: not into the ConfigMap, the pod, status or
    events; and a spec that puts the same value into sparkConf is refused without echoing it."""
    from kubernetes import client

    cluster.core.create_namespaced_secret(cluster.namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="kafka-creds"), string_data={"username": "app", "password": PASSWORD}))  # fmt: skip
    auth = {"secretRef": {"name": "kafka-creds"}}
    ok = query_spec(**{"source.kafka.auth": auth, "sink.kafka.auth": auth})
    cluster.apply("creds", ok)
    cluster.wait_driver("creds", 1)
    cluster.apply("creds-in-conf", query_spec(**{"runtime.sparkConf": {"spark.hadoop.fs.s3a.secret.key": PASSWORD}}))
    refused = cluster.wait_phase("creds-in-conf", "Invalid")
    assert "policy.secretSparkConf" in refused["message"]
    cluster.pod_dies("creds-driver-1", 70, "QUERY_FAILED: broker refused login")
    cluster.wait_status("creds", lambda s: s.get("restarts", 0) >= 1 or s.get("phase") == "Restarting")
    seen = [
        json.dumps([cluster.status("creds"), cluster.status("creds-in-conf")]),  # the spec is the user's own text
        kube_apiserver.kubectl("-n", cluster.namespace, "get", "events", "-o", "json").stdout,
        kube_apiserver.kubectl("-n", cluster.namespace, "get", "configmaps", "-o", "json").stdout,
        kube_apiserver.kubectl("-n", cluster.namespace, "get", "pods", "-o", "json").stdout,
        operator.log_tail(10_000),
    ]
    for text in seen:
        assert PASSWORD not in text
    assert "kafka-creds" in seen[3] and "kafka-creds" in seen[2]  # referenced by name, mounted by the pod
