"""GitOps with Flux itself (issue #42, first part): Flux's own source-controller and
kustomize-controller, built from source by hack/install-flux.sh, sync StreamingQueries from a
real Git server (git's http-backend, testbed/gitserver.py) into a real kube-apiserver where the
operator runs. What the tools' dry runs (test_gitops.py) cannot show:

- the sync, read from the Kustomization's own Ready condition and applied revision;
- no drift: across three sync intervals nothing is applied again (the kustomize-controller's
  managed-fields time and every query's generation stay put, and its own log says "unchanged" for
  every query at every interval) although the operator writes its finalizer and status meanwhile;
- prune: a query removed from Git is deleted through the operator's finalizer; the others stay.

There is no kubelet here: the queries' health as Flux's `wait` computes it (kstatus) needs the
e2e cluster, which is the next part of #42. `hack/test.sh -m gitops` runs this tier (~1 min
warm; the controllers cold: ~9 min to build)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from testbed.gitserver import GitServer, Repository
from testbed.kube import KubeApiServer, free_port
from testbed.operator import Cluster
from testbed.specs import RATE_TO_CONSOLE, query_spec, resource
from testbed.wait import wait_for

pytestmark = pytest.mark.gitops

INTERVAL_S = 5  # the GitRepository's and the Kustomization's interval: drift shows within it
FLUX_NAMESPACE = "flux-system"


def _flux_dir() -> Path:
    done = subprocess.run(["hack/install-flux.sh", "--print-dir"], cwd=Path(__file__).parents[2], check=True,
                          capture_output=True, text=True)  # fmt: skip
    found = Path(done.stdout.strip())
    if not (found / ".complete").exists():
        pytest.fail(f"Flux's controllers are not built in {found}: run hack/install-flux.sh (hack/test.sh -m gitops does)")
    return found


@pytest.fixture(scope="module")
def flux(kube_apiserver: KubeApiServer, tmp_path_factory):
    """Flux's source and kustomize controllers against the test API server, as the admin (the
    chart's install would give them their own ServiceAccount; what they do is the same)."""
    flux_dir = _flux_dir()
    work = tmp_path_factory.mktemp("flux")
    (work / "artifacts").mkdir()
    kube_apiserver.kubectl("apply", "--server-side", "-f", str(flux_dir / "crds"))
    kube_apiserver.kubectl("create", "namespace", FLUX_NAMESPACE, check=False)
    for crd in ("gitrepositories.source.toolkit.fluxcd.io", "kustomizations.kustomize.toolkit.fluxcd.io"):
        # a controller started before its CRD is served exits ("no matches for kind")
        kube_apiserver.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    env = {**os.environ, "KUBECONFIG": str(kube_apiserver.kubeconfig), "RUNTIME_NAMESPACE": FLUX_NAMESPACE}
    storage = free_port()
    argv = {
        "source-controller": [f"--storage-path={work}/artifacts", f"--storage-addr=127.0.0.1:{storage}",
                              f"--storage-adv-addr=127.0.0.1:{storage}"],
        "kustomize-controller": ["--no-remote-bases=true"],
    }  # fmt: skip
    procs = []
    for name, args in argv.items():
        ports = [f"--metrics-addr=127.0.0.1:{free_port()}", f"--health-addr=127.0.0.1:{free_port()}"]
        log = open(work / f"{name}.log", "wb")
        procs.append((subprocess.Popen([str(flux_dir / "bin" / name), *args, *ports], env=env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True), log))  # fmt: skip
    with GitServer(work / "git") as git:
        yield git, work, procs
    for proc, log in procs:
        proc.terminate()
        proc.wait(30)
        log.close()


def _kustomization(kube: KubeApiServer, name: str) -> dict:
    return json.loads(kube.kubectl("get", "kustomization", "-n", FLUX_NAMESPACE, name, "-o", "json").stdout)


def _ready(kustomization: dict) -> dict | None:
    for condition in kustomization.get("status", {}).get("conditions", []):
        if condition["type"] == "Ready":
            return condition
    return None


def _applied_at(obj: dict) -> str | None:
    """When the kustomize-controller last wrote the object (its managed-fields entry)."""
    for entry in obj["metadata"].get("managedFields", []):
        if entry.get("manager") == "kustomize-controller":
            return entry.get("time")
    return None


def _applies(log: Path, kustomization: str) -> list[dict[str, str]]:
    """What the kustomize-controller reported of each server-side apply of ``kustomization``: object -> created,
    configured or unchanged (its own words, in its log)."""
    found = []
    for line in log.read_text().splitlines():
        entry = json.loads(line) if line.startswith("{") else {}
        if entry.get("msg") == "server-side apply completed" and entry.get("name") == kustomization:
            found.append(entry.get("output") or {})
    return found


def test_flux_syncs_queries_from_git_without_drift_and_prunes_through_the_finalizer(kube_apiserver, flux, cluster: Cluster,
                                                                                      operator, tmp_path):  # fmt: skip
    git, work, procs = flux

    def flux_state() -> str:
        exited = [f"{p.args[0]} exited {p.returncode}" for p, _ in procs if p.poll() is not None]
        logs = "\n".join((work / f"{n}.log").read_text()[-1500:] for n in ("source-controller", "kustomize-controller"))
        return f"{_kustomization(kube_apiserver, name).get('status')}\n{exited}\n{logs}"

    namespace = cluster.namespace
    repo = Repository(git, f"fleet-{namespace}", tmp_path / "work")
    queries = {name: resource(query_spec(RATE_TO_CONSOLE), name, namespace) for name in ("orders", "refunds")}
    files = {f"queries/{name}.yaml": yaml.safe_dump(q) for name, q in queries.items()}
    files["queries/kustomization.yaml"] = yaml.safe_dump({"resources": [f"{name}.yaml" for name in queries]})
    first = repo.commit(files, "two queries")
    name = f"queries-{namespace}"
    objects = [
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
         "metadata": {"name": name, "namespace": FLUX_NAMESPACE},
         "spec": {"interval": f"{INTERVAL_S}s", "url": repo.url, "ref": {"branch": "main"}}},
        {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
         "metadata": {"name": name, "namespace": FLUX_NAMESPACE},
         "spec": {"interval": f"{INTERVAL_S}s", "path": "./queries", "prune": True,
                  "sourceRef": {"kind": "GitRepository", "name": name}}},
    ]  # fmt: skip
    kube_apiserver.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))

    # 1. the sync, as Flux itself reports it
    def synced(revision: str):
        k = _kustomization(kube_apiserver, name)
        ready = _ready(k)
        return ready and ready["status"] == "True" and k["status"].get("lastAppliedRevision", "").endswith(revision) and k

    kustomization = wait_for(
        lambda: synced(first), 120, lambda: f"Flux applies {first}: {_kustomization(kube_apiserver, name).get('status')}"
    )
    assert kustomization["status"]["lastAppliedRevision"] == f"main@sha1:{first}"
    # the operator took them over: its finalizer and a status on each
    for query in queries:
        cluster.wait_status(query, lambda s: s.get("phase"), timeout=60, what=f"{query} has a phase")

    # 2. no drift over three intervals, while the operator writes beside Flux
    before = {q: cluster.get(q) for q in queries}
    applies_before = len(_applies(work / "kustomize-controller.log", name))
    assert all(_applied_at(obj) for obj in before.values()), "the kustomize-controller applied the queries"
    deadline = time.monotonic() + 3 * INTERVAL_S + 2
    while time.monotonic() < deadline:  # a poll, not a sleep: a write in any interval fails at once
        for query, was in before.items():
            now = cluster.get(query)
            assert now["metadata"]["generation"] == was["metadata"]["generation"], f"{query}'s spec was written again"
            assert _applied_at(now) == _applied_at(was), f"Flux applied {query} again: {now['metadata']['managedFields']}"
        # Flux marks Ready Unknown (Progressing) while each interval's reconcile runs: never False
        assert _ready(_kustomization(kube_apiserver, name))["status"] != "False"
        time.sleep(1)  # poll period
    assert "finalizers" in cluster.get("orders")["metadata"], "the operator's finalizer is there (written beside Flux)"
    # and Flux did look again meanwhile, by its own account: every apply since found nothing to change
    since = _applies(work / "kustomize-controller.log", name)[applies_before:]
    assert len(since) >= 2, f"Flux reconciled {len(since)} times in three intervals"
    assert all(set(out.values()) == {"unchanged"} for out in since), since

    # 3. prune: a query removed from Git is deleted (through the operator's finalizer), the other stays
    second = repo.commit({"queries/refunds.yaml": None,
                          "queries/kustomization.yaml": yaml.safe_dump({"resources": ["orders.yaml"]})}, "refunds removed")  # fmt: skip
    wait_for(lambda: synced(second), 120, lambda: f"Flux applies {second}: {flux_state()}")
    wait_for(lambda: cluster.get("refunds") is None, 60, lambda: f"refunds pruned:\n{operator.log_tail()}")
    assert cluster.get("orders") is not None
