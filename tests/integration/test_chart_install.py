"""The chart and the samples on the real API server: server-side apply of every
rendered object, the samples accepted by the installed CRD, and the operator's
pod admitted by Pod Security's `restricted` profile."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from testbed.kube import wait_established

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "streamq-chart-install"


@pytest.fixture(scope="module")
def rendered(kube_apiserver, helm) -> list[dict]:
    out = subprocess.run(
        [str(helm), "template", "streamq", str(ROOT / "charts" / "streamq"), "--namespace", NAMESPACE, "--include-crds"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def installed(kube_apiserver, rendered):
    kube_apiserver.kubectl(
        "create",
        "namespace",
        NAMESPACE,
        check=False,
    )
    kube_apiserver.kubectl(
        "label",
        "--overwrite",
        "namespace",
        NAMESPACE,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )
    crds = [d for d in rendered if d["kind"] == "CustomResourceDefinition"]
    rest = [d for d in rendered if d["kind"] != "CustomResourceDefinition"]
    # --force-conflicts: another test on this session's API server may have installed the CRD already
    kube_apiserver.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(crds))
    wait_established(kube_apiserver.kubectl, *(crd["metadata"]["name"] for crd in crds))
    result = kube_apiserver.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(rest))
    return result.stdout


def test_every_rendered_object_is_stored(kube_apiserver, installed, rendered):
    assert len(rendered) >= 8
    for doc in rendered:
        kind = doc["kind"] if "." not in doc["apiVersion"].split("/")[0] else f"{doc['kind']}.{doc['apiVersion'].split('/')[0]}"
        stored = kube_apiserver.kubectl("get", kind, doc["metadata"]["name"], "-n", NAMESPACE, "-o", "name", check=False)
        assert stored.returncode == 0 and stored.stdout.strip(), f"{doc['kind']}/{doc['metadata']['name']}: {stored.stderr}"


def test_operator_pod_passes_the_restricted_profile(kube_apiserver, installed, rendered):
    deployment = next(d for d in rendered if d["kind"] == "Deployment")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "operator-admission-check", "namespace": NAMESPACE},
        "spec": deployment["spec"]["template"]["spec"],
    }
    result = kube_apiserver.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(pod), check=False)
    assert result.returncode == 0, result.stderr
    assert "violate" not in result.stderr.lower(), result.stderr


def test_a_privileged_pod_is_refused_there(kube_apiserver, installed):
    # The check above can fail: the namespace really enforces the profile.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "privileged", "namespace": NAMESPACE},
        "spec": {"containers": [{"name": "c", "image": "streamq:0.1.0", "securityContext": {"privileged": True}}]},
    }
    result = kube_apiserver.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(pod), check=False)
    assert result.returncode != 0 and "restricted" in result.stderr


def test_the_network_policy_is_accepted_by_the_api_server(kube_apiserver, installed, helm):
    out = subprocess.run(
        [str(helm), "template", "streamq", str(ROOT / "charts" / "streamq"), "--namespace", NAMESPACE,
         "--set", "networkPolicy.enabled=true", "--set", "networkPolicy.apiServer.cidrs={10.0.0.1/32}",
         "--set", "networkPolicy.kafka.cidrs={10.20.0.0/16}", "--show-only", "templates/networkpolicy.yaml"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "kind: NetworkPolicy" in out
    result = kube_apiserver.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=out, check=False)
    assert result.returncode == 0, result.stderr


def test_the_default_network_policy_keeping_queries_from_the_metadata_ranges_is_accepted(kube_apiserver, installed, helm):
    out = subprocess.run(
        [str(helm), "template", "streamq", str(ROOT / "charts" / "streamq"), "--namespace", NAMESPACE,
         "--show-only", "templates/networkpolicy-metadata.yaml"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "169.254.0.0/16" in out and "fe80::/10" in out
    result = kube_apiserver.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=out, check=False)
    assert result.returncode == 0, result.stderr


def test_the_network_policy_blocking_the_metadata_endpoint_is_accepted(kube_apiserver, installed, helm, tmp_path):
    """The `except` entries the chart adds (cloud metadata endpoints) pass the API server's check
    that each lies inside its cidr, with values that cover the endpoint every way."""
    import yaml

    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"networkPolicy": {
        "enabled": True,
        "apiServer": {"cidrs": ["169.254.0.0/16", "10.0.0.1/32"]},
        "kafka": {"cidrs": ["0.0.0.0/0", "::/0", "169.254.169.254/32"]},
        "extraEgress": [{"ports": [{"protocol": "TCP", "port": 443}]},
                        {"to": [{"ipBlock": {"cidr": "fd00::/8", "except": ["fd00:1::/32"]}}]}],
    }}))  # fmt: skip
    out = subprocess.run(
        [str(helm), "template", "streamq", str(ROOT / "charts" / "streamq"), "--namespace", NAMESPACE,
         "-f", str(values), "--show-only", "templates/networkpolicy.yaml"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "169.254.0.0/16" in out and "fd00:ec2::/32" in out
    result = kube_apiserver.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=out, check=False)
    assert result.returncode == 0, result.stderr


SAMPLES = sorted(p for p in (ROOT / "manifests" / "samples").glob("*.yaml") if p.name != "kustomization.yaml")


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_samples_are_accepted_by_the_installed_crd(kube_apiserver, installed, sample):
    result = kube_apiserver.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "-n",
        NAMESPACE,
        "-f",
        str(sample),
        check=False,
    )
    assert result.returncode == 0, result.stderr
