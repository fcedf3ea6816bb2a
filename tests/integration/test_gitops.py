"""The GitOps examples of docs/gitops.md (manifests/gitops/): the chart renders with the
values they give it, and a real kube-apiserver accepts them against Argo CD's and Flux's
own CRDs (server-side dry run, unknown fields refused). Neither tool runs here.

Where the CRDs come from (nothing fetched is kept in the repository; all under the cache):
  * Argo CD's Application: manifests/crds/application-crd.yaml of the Go module
    github.com/argoproj/argo-cd/v3 (Go module proxy);
  * Flux's Kustomization and GitRepository: config/crd/bases/ of the modules
    github.com/fluxcd/kustomize-controller and github.com/fluxcd/source-controller;
  * Flux's HelmRelease: the helm-controller module itself is not served, its API module
    (github.com/fluxcd/helm-controller/api) is: the CRD is generated from its Go types with
    controller-gen (sigs.k8s.io/controller-tools), as helm-controller's own build does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from testbed.wait import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GITOPS = ROOT / "manifests" / "gitops"
CACHE = Path(os.environ.get("STREAMQ_CACHE") or Path.home() / ".cache" / "streamq")
ARGOCD = ("github.com/argoproj/argo-cd/v3", "v3.6.1")
KUSTOMIZE_CONTROLLER = ("github.com/fluxcd/kustomize-controller", "v1.10.1")
SOURCE_CONTROLLER = ("github.com/fluxcd/source-controller", "v1.10.1")
HELM_CONTROLLER_API = ("github.com/fluxcd/helm-controller/api", "v1.7.1")
CONTROLLER_GEN = "sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0"


def go_env() -> dict[str, str]:
    # These modules want a newer Go than the machine's: GOTOOLCHAIN=auto fetches it from the module proxy.
    return {**os.environ, "GOMODCACHE": str(CACHE / "kube" / "go" / "mod"), "GOTOOLCHAIN": "auto", "GOFLAGS": "-mod=mod",
            "GOPATH": str(CACHE / "gitops" / "gopath"), "PATH": f"/usr/local/go/bin:{os.environ['PATH']}"}  # fmt: skip


def go() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if not found:
        pytest.fail("go not found: the Argo CD and Flux CRDs come from the Go module proxy")
    return found


def module_dir(module: str, version: str) -> Path:
    """The module's source in the cache: there already (no go, no proxy: the lookup alone took ~2 min
    in CI), else ``go mod download``. Module paths are case-encoded on disk (Go's "!" + lower case)."""
    escaped = "".join(f"!{c.lower()}" if c.isupper() else c for c in module)
    cached = CACHE / "kube" / "go" / "mod" / f"{escaped}@{version}"
    if (cached / "go.mod").is_file():
        return cached
    out = subprocess.run([go(), "mod", "download", "-json", f"{module}@{version}"], env=go_env(), cwd=CACHE,
                         capture_output=True, text=True, timeout=900)  # fmt: skip
    info = json.loads(out.stdout or "{}")
    assert out.returncode == 0 and "Dir" in info, f"go mod download {module}@{version}: {info.get('Error')} {out.stderr[-2000:]}"
    return Path(info["Dir"])


def helmrelease_crd() -> Path:
    """helm-controller's HelmRelease CRD, generated from its API module's types (cached)."""
    module, version = HELM_CONTROLLER_API
    out = CACHE / "gitops" / f"helm-controller-api-{version}"
    crd = out / "helm.toolkit.fluxcd.io_helmreleases.yaml"
    if crd.is_file():
        return crd
    work = CACHE / "gitops" / f"helm-controller-api-{version}-src"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(module_dir(module, version), work)
    for path in work.rglob("*"):  # the module cache is read-only
        path.chmod(path.stat().st_mode | 0o200)
    gen = subprocess.run([go(), "run", CONTROLLER_GEN, "crd", "paths=./v2/...", f"output:crd:dir={out}"],
                         env=go_env(), cwd=work, capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert gen.returncode == 0 and crd.is_file(), gen.stderr[-3000:]
    shutil.rmtree(work, ignore_errors=True)
    return crd


@pytest.fixture(scope="module")
def tool_crds() -> list[Path]:
    return [
        module_dir(*ARGOCD) / "manifests" / "crds" / "application-crd.yaml",
        module_dir(*KUSTOMIZE_CONTROLLER) / "config" / "crd" / "bases" / "kustomize.toolkit.fluxcd.io_kustomizations.yaml",
        module_dir(*SOURCE_CONTROLLER) / "config" / "crd" / "bases" / "source.toolkit.fluxcd.io_gitrepositories.yaml",
        helmrelease_crd(),
    ]


def kubectl(server, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    from testbed.kube import kube_bin

    return subprocess.run([str(kube_bin("kubectl")), f"--kubeconfig={server.kubeconfig}", *args], input=input,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def example_files() -> list[Path]:
    """The API objects among the examples (a kustomization.yaml is kustomize's own file, read by Flux)."""
    objects = (p for p in GITOPS.rglob("*.yaml") if p.name not in ("argocd-cm.yaml", "kustomization.yaml"))
    return sorted(objects) + [GITOPS / "argocd" / "argocd-cm.yaml"]


def test_the_api_server_accepts_the_examples_against_argocds_and_fluxs_crds(kube_apiserver, tool_crds, tmp_path):
    for crd in tool_crds:
        applied = kubectl(kube_apiserver, "apply", "--server-side", "-f", str(crd))
        assert applied.returncode == 0, applied.stderr
        name = yaml.safe_load(crd.read_text())["metadata"]["name"]
        wait_for(lambda name=name: kubectl(kube_apiserver, "wait", "--for=condition=Established", f"crd/{name}", "--timeout=5s").returncode == 0,
                 60, f"CRD {name} established", interval=1)  # fmt: skip
    for namespace in ("argocd", "flux-system"):
        kubectl(kube_apiserver, "create", "namespace", namespace)
    for path in example_files():
        dry = kubectl(kube_apiserver, "apply", "--dry-run=server", "--validate=strict", "-f", str(path))
        assert dry.returncode == 0, f"{path.relative_to(ROOT)}: {dry.stderr}"
        assert "(server dry run)" in dry.stdout, dry.stdout
    # and the check is a real one: a misspelt field of each kind is refused
    for path, misspell in ((GITOPS / "argocd" / "apps" / "streamq-operator.yaml", ("syncPolicy:", "syncPolicies:")),
                           (GITOPS / "flux" / "operator" / "helmrelease.yaml", ("crds: CreateReplace", "crd: CreateReplace")),
                           (GITOPS / "flux" / "kustomizations.yaml", ("dependsOn:", "dependOn:"))):  # fmt: skip
        bad = tmp_path / path.name
        bad.write_text(path.read_text().replace(*misspell))
        refused = kubectl(kube_apiserver, "apply", "--dry-run=server", "--validate=strict", "-f", str(bad))
        assert refused.returncode != 0 and "unknown field" in refused.stderr, (path.name, refused.stdout, refused.stderr)


def rendered(helm: Path, values: dict, namespace: str, tmp_path: Path) -> list[dict]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    out = subprocess.run([str(helm), "template", "streamq", str(ROOT / "charts" / "streamq"), "--namespace", namespace,
                          "--include-crds", "--values", str(path)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.mark.parametrize("source", ["argocd", "flux"])
def test_the_chart_renders_with_the_examples_values_and_brings_its_crd(helm, tmp_path, source):
    if source == "argocd":
        app = yaml.safe_load((GITOPS / "argocd" / "apps" / "streamq-operator.yaml").read_text())
        values, namespace = app["spec"]["source"]["helm"]["valuesObject"], app["spec"]["destination"]["namespace"]
    else:
        release = yaml.safe_load((GITOPS / "flux" / "operator" / "helmrelease.yaml").read_text())
        values, namespace = release["spec"]["values"], release["spec"]["targetNamespace"]
    docs = rendered(helm, values, namespace, tmp_path)
    crds = [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"]
    assert "streamingqueries.streamq.io" in crds
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    image = f"{values['image']['repository']}:{values['image']['tag']}"
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["STREAMQ_JOB_IMAGE"] == image
    # the operator serves the namespace the queries go to
    assert [d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["namespace"] == "streamq"]
    hooks = [d for d in docs if (d["metadata"].get("annotations") or {}).get("helm.sh/hook") == "pre-delete"]
    assert any(d["kind"] == "Job" for d in hooks), "the uninstall hook both tools run (docs/gitops.md)"
