"""Placement and metadata reach the pods on a real API server (issue #38): a query whose driver
and executors name a node selector, a toleration, a PriorityClass, labels and annotations the
platform's policy allows gets a driver pod that shows them (the API server resolving the
PriorityClass) and an executor pod template that carries them; a PriorityClass the policy does
not list is refused, naming the field. No Spark runs: the pod need not start."""

from __future__ import annotations

import json

import pytest
import yaml
from kubernetes import client

from controller import names, render
from testbed.operator import unique
from testbed.specs import changed, query_spec

pytestmark = pytest.mark.integration

PLACEMENT = {
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "streaming", "effect": "NoSchedule"}],
    "labels": {"team.example.com/cost-center": "cc-42"},
    "annotations": {"team.example.com/owner": "payments@example.com", "prometheus.io/scrape": "false"},
}
POLICY = {
    "allowedTolerationKeys": ["dedicated"],
    "allowedLabelPrefixes": ["team.example.com/*"],
    "allowedAnnotationPrefixes": ["team.example.com/*", "prometheus.io/*"],
}


@pytest.fixture
def priority_class(api_client):
    """A PriorityClass of the test's own (cluster-scoped: deleted at the end)."""
    scheduling = client.SchedulingV1Api(api_client)
    name = unique("streamq-test")
    scheduling.create_priority_class(client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=12345))
    yield name
    scheduling.delete_priority_class(name)


def test_a_placed_querys_driver_pod_and_executor_template_show_its_placement(cluster, start_operator, priority_class,
                                                                            tmp_path):  # fmt: skip
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({**POLICY, "allowedPriorityClasses": [priority_class]}))
    start_operator(STREAMQ_POLICY_FILE=str(policy))
    placed = {**PLACEMENT, "priorityClassName": priority_class}
    spec = query_spec(**{"runtime.driver": placed, "runtime.executors": {"instances": 1, **placed}})
    cluster.apply("placed", spec)
    # a class the policy does not list: refused before any pod, the field named
    cluster.apply("unlisted", changed(spec, {"runtime.driver.priorityClassName": "system-node-critical"}))

    pod = cluster.wait_driver("placed", 1)
    assert pod.spec.node_selector == PLACEMENT["nodeSelector"]
    assert pod.spec.priority_class_name == priority_class and pod.spec.priority == 12345  # resolved by the API server
    tolerations = [t.to_dict() for t in pod.spec.tolerations]
    assert {"key": "dedicated", "operator": "Equal", "value": "streaming", "effect": "NoSchedule",
            "toleration_seconds": None} in tolerations  # fmt: skip
    assert {t["key"] for t in tolerations} >= set(render.NODE_LOST_TAINTS)  # the operator's stay
    assert pod.metadata.annotations.items() >= PLACEMENT["annotations"].items()
    assert names.ANNOTATION_SPEC_HASH in pod.metadata.annotations
    assert pod.metadata.labels.items() >= {**PLACEMENT["labels"], **names.labels("placed", names.COMPONENT_DRIVER, 1)}.items()

    template = json.loads(cluster.config_map("placed").data[render.EXECUTOR_TEMPLATE_FILE])
    assert template["metadata"] == {"labels": PLACEMENT["labels"], "annotations": PLACEMENT["annotations"]}
    assert template["spec"]["nodeSelector"] == PLACEMENT["nodeSelector"]
    assert template["spec"]["tolerations"] == PLACEMENT["tolerations"]
    assert template["spec"]["priorityClassName"] == priority_class

    status = cluster.wait_phase("unlisted", "Invalid")
    assert "spec.runtime.driver.priorityClassName: policy.allowedPriorityClasses: " in status["message"], status
    assert cluster.driver_pods("unlisted") == []
