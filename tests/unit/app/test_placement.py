"""Pod placement and metadata (runtime.driver / runtime.executors) under the platform's policy
(contract.placement): what the default refuses names the field, what a policy opens passes,
and what no policy opens (the operator's and Spark's selector keys) stays refused. The hostile
cases of tests/hostile_specs.py ("placement: ...") run in test_policy.py."""

from __future__ import annotations

from typing import Any

import pytest

from contract.load import validate_spec
from contract.policy import OperatorFacts, Policy
from contract.problems import SpecError
from testbed.specs import changed
from tests.hostile_specs import BASE

pytestmark = pytest.mark.unit

FACTS = OperatorFacts(operator_namespace="streamq-system")


def problems_of(spec: dict, policy: Policy | None = None) -> list[str]:
    try:
        validate_spec(spec, policy=policy or Policy(), facts=FACTS, namespace="team-a")
    except SpecError as exc:
        return [str(p) for p in exc.problems]
    return []


def driver(**fields: Any) -> dict:
    return changed(BASE, {"runtime.driver": fields})


def executors(**fields: Any) -> dict:
    return changed(BASE, {"runtime.executors": {"instances": 2, **fields}})


PLATFORM = Policy(
    allowed_priority_classes=["streaming-*"],
    allowed_toleration_keys=["dedicated", "team.example.com/*"],
    allowed_node_labels=["kubernetes.io/os", "pool"],
    allowed_label_prefixes=["team.example.com/*", "cost-center"],
    allowed_annotation_prefixes=["prometheus.io/*", "team.example.com/*", "cluster-autoscaler.kubernetes.io/*"],
)
PLACED = {
    "nodeSelector": {"kubernetes.io/os": "linux", "pool": "streaming"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "streaming", "effect": "NoSchedule"},
                    {"key": "team.example.com/spot", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["streaming"]}]}}]}},
    "priorityClassName": "streaming-high",
    "labels": {"team.example.com/owner": "payments", "cost-center": "cc-42"},
    "annotations": {"prometheus.io/scrape": "true", "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
}  # fmt: skip


def test_a_benign_placement_passes_the_default_policy():
    """What a node is and where (OS, zone), and pod (anti-)affinity within the namespace."""
    spec = changed(BASE, {"runtime.driver": {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["eu-1a"]}]}]}},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"app": "batch"}}, "topologyKey": "kubernetes.io/hostname"}}]},
        },
    }})  # fmt: skip
    assert problems_of(spec) == []


def test_a_platform_policy_lets_drivers_and_executors_be_placed():
    spec = changed(BASE, {"runtime.driver": PLACED, "runtime.executors": {"instances": 2, **PLACED}})
    assert problems_of(spec) != [], "the default policy should refuse it"
    assert problems_of(spec, PLATFORM) == []


@pytest.mark.parametrize("spec, expected", [
    (driver(priorityClassName="batch-low"),
     "spec.runtime.driver.priorityClassName: policy.allowedPriorityClasses: priority class batch-low is not allowed "
     "(allowed: streaming-*)"),
    (executors(tolerations=[{"key": "gpu", "operator": "Exists"}]),
     "spec.runtime.executors.tolerations[0].key: policy.allowedTolerationKeys: toleration of taint gpu is not allowed "
     "(allowed: dedicated, team.example.com/*)"),
    (driver(annotations={"sidecar.istio.io/inject": "false"}),
     "spec.runtime.driver.annotations.sidecar.istio.io/inject: policy.allowedAnnotationPrefixes: annotation "
     "sidecar.istio.io/inject is not allowed (allowed: prometheus.io/*, team.example.com/*, "
     "cluster-autoscaler.kubernetes.io/*)"),
    (driver(labels={"role": "db"}),
     "spec.runtime.driver.labels.role: policy.allowedLabelPrefixes: label role is not allowed "
     "(allowed: team.example.com/*, cost-center)"),
    (executors(nodeSelector={"gpu": "true"}),
     "spec.runtime.executors.nodeSelector.gpu: policy.allowedNodeLabels: node label gpu is not allowed "
     "(allowed: kubernetes.io/os, pool)"),
], ids=["priority class", "toleration", "annotation", "label", "node label"])  # fmt: skip
def test_what_the_policy_does_not_list_is_refused_naming_the_field(spec, expected):
    assert problems_of(spec, PLATFORM) == [expected]


STILL_REFUSED = {
    "'*' does not open a system priority class": (
        Policy(allowed_priority_classes=["*"]), driver(priorityClassName="system-cluster-critical"),
        "spec.runtime.driver.priorityClassName", "policy.allowedPriorityClasses",
    ),
    "a prefix does not allow tolerating every taint": (
        Policy(allowed_toleration_keys=["team-*"]), driver(tolerations=[{"operator": "Exists"}]),
        "spec.runtime.driver.tolerations[0].key", "policy.allowedTolerationKeys",
    ),
    "'*' does not open the node-lost taints": (
        Policy(allowed_toleration_keys=["*"]),
        driver(tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]),
        "spec.runtime.driver.tolerations[0].key", "policy.operatorTolerations",
    ),
    "'*' does not open Kubernetes' own annotations": (
        Policy(allowed_annotation_prefixes=["*"]), driver(annotations={"kubernetes.io/ingress-bandwidth": "1G"}),
        "spec.runtime.driver.annotations.kubernetes.io/ingress-bandwidth", "policy.allowedAnnotationPrefixes",
    ),
    "a wide prefix does not open a subdomain of k8s.io": (
        Policy(allowed_label_prefixes=["*k8s.io/*"]), driver(labels={"policy.k8s.io/x": "y"}),
        "spec.runtime.driver.labels.policy.k8s.io/x", "policy.allowedLabelPrefixes",
    ),
    "no policy opens the operator's labels": (
        Policy(allowed_label_prefixes=["*", "streamq.io/*"]), executors(labels={"streamq.io/component": "driver"}),
        "spec.runtime.executors.labels.streamq.io/component", "policy.reservedMetadata",
    ),
    "no policy opens a subdomain of the operator's": (
        Policy(allowed_annotation_prefixes=["*"]), driver(annotations={"x.streamq.io/spec-hash": "0"}),
        "spec.runtime.driver.annotations.x.streamq.io/spec-hash", "policy.reservedMetadata",
    ),
    "no policy opens the chart's selector labels": (
        Policy(allowed_label_prefixes=["app.kubernetes.io/*"]), driver(labels={"app.kubernetes.io/instance": "streamq"}),
        "spec.runtime.driver.labels.app.kubernetes.io/instance", "policy.reservedMetadata",
    ),
    "no policy opens Spark's executor labels": (
        Policy(allowed_label_prefixes=["*"]), driver(labels={"spark-app-selector": "spark-0123"}),
        "spec.runtime.driver.labels.spark-app-selector", "policy.reservedMetadata",
    ),
    "node affinity by an unlisted label": (
        Policy(), executors(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                              "values": ["node-1"]}]}}]}}),
        "spec.runtime.executors.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
        ".matchExpressions[0].key", "policy.allowedNodeLabels",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(STILL_REFUSED))
def test_what_a_policy_does_not_open(case):
    policy, spec, path, rule = STILL_REFUSED[case]
    assert any(p.startswith(f"{path}: {rule}: ") for p in problems_of(spec, policy)), problems_of(spec, policy)


def test_a_domain_prefix_opens_kubernetes_keys_and_star_allows_a_keyless_toleration():
    policy = Policy(allowed_annotation_prefixes=["cluster-autoscaler.kubernetes.io/*"], allowed_toleration_keys=["*"])
    spec = driver(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
                  tolerations=[{"operator": "Exists"}])  # fmt: skip
    assert problems_of(spec, policy) == []


@pytest.mark.parametrize("fields, says", [
    ({"tolerations": [{"operator": "Equal", "value": "x"}]}, "needs operator Exists"),
    ({"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]}, "takes no value"),
    ({"tolerations": [{"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}]}, "needs effect NoExecute"),
    ({"labels": {"-bad": "x"}}, "is not a Kubernetes label key"),
    ({"labels": {"team/": "x"}}, "is not a Kubernetes label key"),
    ({"labels": {"ok": "-bad-"}}, "should match pattern"),
    ({"nodeSelector": {"ok": "x" * 64}}, "at most 63 characters"),
    ({"labels": {f"k{i}": "v" for i in range(33)}}, "at most 32 items"),
    ({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {
        "matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["a"]}]}}]}}}, "one integer value"),
    ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}, "topologyKey": "x"}]}}}, "needs values"),
    ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {}, "topologyKey": "x", "namespaces": ["team-b"]}]}}}, "namespaces: unknown field"),
], ids=["keyless Equal", "Exists with a value", "seconds without NoExecute", "label key", "empty name", "label value",
        "long value", "too many labels", "Gt", "In without values", "another namespace"])  # fmt: skip
def test_the_model_refuses_what_the_api_server_would(fields, says):
    found = problems_of(driver(**fields))
    assert any(p.startswith("spec.runtime.driver.") and says in p for p in found), found
