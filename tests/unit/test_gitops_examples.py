"""docs/gitops.md shows the GitOps example files as they are, their health scripts are the
repository's, and their shape is what Argo CD and Flux read (the API server validates
them against those tools' CRDs in tests/integration/test_gitops.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
GITOPS = ROOT / "manifests" / "gitops"
DOC = (ROOT / "docs" / "gitops.md").read_text()
SHOWN = dict(re.findall(r"<!-- file: (\S+) -->\n```yaml\n(.*?)```\n", DOC, re.S))


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_the_doc_shows_every_example_file_as_it_is():
    files = sorted(str(p.relative_to(ROOT)) for p in GITOPS.rglob("*.yaml"))
    assert sorted(SHOWN) == files
    for path, text in SHOWN.items():
        assert text == (ROOT / path).read_text(), f"docs/gitops.md's block of {path} differs from the file"


def test_argocd_cm_carries_the_repositorys_health_scripts():
    data = docs(GITOPS / "argocd" / "argocd-cm.yaml")[0]["data"]
    assert data["resource.customizations.health.streamq.io_StreamingQuery"] == (ROOT / "docs" / "argocd-health.lua").read_text()
    assert (
        data["resource.customizations.health.argoproj.io_Application"]
        == (GITOPS / "argocd" / "application-health.lua").read_text()
    )


@pytest.mark.parametrize(("status", "expected"), [
    (None, ("Progressing", "")),
    ({"health": {"status": "Progressing"}}, ("Progressing", "")),
    ({"health": {"status": "Healthy"}}, ("Healthy", "")),
    ({"health": {"status": "Degraded", "message": "Deployment streamq-operator: 0 available"}},
     ("Degraded", "Deployment streamq-operator: 0 available")),
])  # fmt: skip
def test_an_application_is_as_healthy_as_argocd_computed_it(status, expected):
    from tests.unit.controller.gitops_rules import argo_health

    obj = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "a"}}
    if status is not None:
        obj["status"] = status
    assert argo_health(obj, (GITOPS / "argocd" / "application-health.lua").read_text()) == expected


def test_argocd_syncs_the_operator_and_its_crd_before_the_queries():
    operator = docs(GITOPS / "argocd" / "apps" / "streamq-operator.yaml")[0]
    queries = docs(GITOPS / "argocd" / "apps" / "streamq-queries.yaml")[0]
    wave = lambda app: int(app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"])  # noqa: E731
    assert wave(operator) < wave(queries)
    assert operator["spec"]["source"]["path"] == "charts/streamq"
    assert not operator["spec"]["source"].get("helm", {}).get("skipCrds"), "the CRD comes with the chart"
    assert "SkipDryRunOnMissingResource=true" in queries["spec"]["syncPolicy"]["syncOptions"]
    # the queries go where the operator serves
    served = operator["spec"]["source"]["helm"]["valuesObject"]["operator"]["watchNamespaces"]
    assert queries["spec"]["destination"]["namespace"] in served
    root = docs(GITOPS / "argocd" / "root.yaml")[0]
    assert root["spec"]["source"]["path"] == "manifests/gitops/argocd/apps"
    assert (ROOT / root["spec"]["source"]["path"]).is_dir()


def test_flux_orders_the_queries_after_the_operator_and_upgrades_the_crd():
    operator, queries = docs(GITOPS / "flux" / "kustomizations.yaml")
    release = docs(GITOPS / "flux" / "operator" / "helmrelease.yaml")[0]
    assert queries["spec"]["dependsOn"] == [{"name": operator["metadata"]["name"]}]
    assert operator["spec"]["wait"] is True and queries["spec"]["wait"] is True
    assert (ROOT / operator["spec"]["path"]).resolve() == (GITOPS / "flux" / "operator").resolve()
    assert release["spec"]["chart"]["spec"]["chart"] == "./charts/streamq"
    assert release["spec"]["install"]["crds"] == release["spec"]["upgrade"]["crds"] == "CreateReplace"
    assert release["spec"]["uninstall"]["disableHooks"] is False
    assert queries["spec"]["targetNamespace"] in release["spec"]["values"]["operator"]["watchNamespaces"]
    assert release["spec"]["targetNamespace"] == queries["spec"]["targetNamespace"]
