"""The plain manifests: they parse, kustomizations list real files, RBAC is least privilege."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contract.load import load_document

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = ROOT / "manifests"


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.mark.parametrize("kustomization", sorted(MANIFESTS.glob("*/kustomization.yaml")), ids=lambda p: p.parent.name)
def test_kustomizations_list_existing_files(kustomization):
    k = yaml.safe_load(kustomization.read_text())
    for resource in k["resources"]:
        assert (kustomization.parent / resource).exists(), resource
        if resource.endswith(".yaml"):
            for doc in docs(kustomization.parent / resource):
                assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"]


def _rules(name: str) -> list[dict]:
    for doc in docs(MANIFESTS / "base" / "operator-rbac.yaml"):
        if doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == name:
            return doc["rules"]
    raise AssertionError(name)


def _allowed(rules, group, resource, verb) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


@pytest.mark.parametrize(
    ("group", "resource", "verb"),
    [
        ("streamq.io", "streamingqueries", "watch"),
        ("streamq.io", "streamingqueries", "patch"),
        ("streamq.io", "streamingqueries/status", "patch"),
        ("", "pods", "create"),
        ("", "pods", "delete"),
        ("", "pods", "list"),
        ("", "pods/log", "get"),
        ("", "configmaps", "create"),
        ("", "configmaps", "update"),
        ("", "services", "create"),
        ("", "events", "create"),
        ("sparkoperator.k8s.io", "sparkapplications", "create"),
        ("sparkoperator.k8s.io", "sparkapplications", "delete"),
        ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
    ],
)
def test_operator_may_do_what_it_does(group, resource, verb):
    assert _allowed(_rules("streamq-operator"), group, resource, verb)


def test_operator_rbac_has_no_wildcards_secrets_or_escalation():
    for rule in _rules("streamq-operator"):
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
        if "secrets" in rule["resources"]:  # drivers mount Secrets; the operator reads only their metadata
            assert rule["resources"] == ["secrets"] and rule["verbs"] == ["get", "create"]  # no list, no watch
        assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"])
        if "update" in rule["verbs"]:
            # the query document of the next driver; a standby query's Lease, freed for its standby
            assert rule["resources"] in (["configmaps"], ["leases"])


def test_the_operator_reads_secrets_as_metadata_only():
    """get on secrets is for whose-is-it checks (kube._read_meta, PartialObjectMetadata): no call of
    the operator reads a Secret's data."""
    code = "\n".join(p.read_text() for p in (MANIFESTS.parent / "controller").rglob("*.py"))
    assert "read_namespaced_secret" not in code and "list_namespaced_secret" not in code
    assert 'header_params={"Accept": METADATA_ONLY}' in code


def test_deployment_runs_restricted():
    (deploy,) = [d for d in docs(MANIFESTS / "base" / "operator.yaml") if d["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "streamq-operator"
    assert pod["securityContext"]["runAsNonRoot"] is True
    c = pod["containers"][0]
    assert c["args"][0] == "controller"
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_the_sample_is_the_example():
    sample = load_document(yaml.safe_load((MANIFESTS / "samples" / "rate-to-console.yaml").read_text()))
    example = load_document(yaml.safe_load((ROOT / "examples" / "rate-to-console.yaml").read_text()))
    assert sample == example
