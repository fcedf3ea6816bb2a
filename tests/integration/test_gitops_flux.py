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

import time

import pytest
import yaml

from testbed.flux import NAMESPACE, FluxControllers, FluxMissing, applied_at, flux_dir, ready_condition
from testbed.gitserver import GitServer, Repository
from testbed.kube import KubeApiServer
from testbed.operator import Cluster
from testbed.specs import RATE_TO_CONSOLE, query_spec, resource
from testbed.wait import wait_for

pytestmark = pytest.mark.gitops

INTERVAL_S = 5  # the GitRepository's and the Kustomization's interval: drift shows within it


@pytest.fixture(scope="module")
def flux(kube_apiserver: KubeApiServer, tmp_path_factory):
    work = tmp_path_factory.mktemp("flux")
    try:
        flux_dir()
    except FluxMissing as exc:
        pytest.fail(str(exc))
    with FluxControllers(kube_apiserver.kubeconfig, work) as controllers, GitServer(work / "git") as git:
        yield controllers, git


def test_flux_syncs_queries_from_git_without_drift_and_prunes_through_the_finalizer(kube_apiserver, flux, cluster: Cluster,
                                                                                      operator, tmp_path):  # fmt: skip
    controllers, git = flux
    namespace = cluster.namespace
    repo = Repository(git, f"fleet-{namespace}", tmp_path / "work")
    queries = {name: resource(query_spec(RATE_TO_CONSOLE), name, namespace) for name in ("orders", "refunds")}
    files = {f"queries/{name}.yaml": yaml.safe_dump(q) for name, q in queries.items()}
    files["queries/kustomization.yaml"] = yaml.safe_dump({"resources": [f"{name}.yaml" for name in queries]})
    first = repo.commit(files, "two queries")
    name = f"queries-{namespace}"
    objects = [
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
         "metadata": {"name": name, "namespace": NAMESPACE},
         "spec": {"interval": f"{INTERVAL_S}s", "url": repo.url, "ref": {"branch": "main"}}},
        {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
         "metadata": {"name": name, "namespace": NAMESPACE},
         "spec": {"interval": f"{INTERVAL_S}s", "path": "./queries", "prune": True,
                  "sourceRef": {"kind": "GitRepository", "name": name}}},
    ]  # fmt: skip
    controllers.apply(objects)

    # 1. the sync, as Flux itself reports it
    kustomization = controllers.wait_applied(name, first, 120)
    assert kustomization["status"]["lastAppliedRevision"] == f"main@sha1:{first}"
    # the operator took them over: its finalizer and a status on each
    for query in queries:
        cluster.wait_status(query, lambda s: s.get("phase"), timeout=60, what=f"{query} has a phase")

    # 2. no drift over three intervals, while the operator writes beside Flux
    before = {q: cluster.get(q) for q in queries}
    applies_before = len(controllers.applies(name))
    assert all(applied_at(obj) for obj in before.values()), "the kustomize-controller applied the queries"
    deadline = time.monotonic() + 3 * INTERVAL_S + 2
    while time.monotonic() < deadline:  # a poll, not a sleep: a write in any interval fails at once
        for query, was in before.items():
            now = cluster.get(query)
            assert now["metadata"]["generation"] == was["metadata"]["generation"], f"{query}'s spec was written again"
            assert applied_at(now) == applied_at(was), f"Flux applied {query} again: {now['metadata']['managedFields']}"
        # Flux marks Ready Unknown (Progressing) while each interval's reconcile runs: never False
        assert ready_condition(controllers.kustomization(name))["status"] != "False"
        time.sleep(1)  # poll period
    assert "finalizers" in cluster.get("orders")["metadata"], "the operator's finalizer is there (written beside Flux)"
    # and Flux did look again meanwhile, by its own account: every apply since found nothing to change
    since = controllers.applies(name)[applies_before:]
    assert len(since) >= 2, f"Flux reconciled {len(since)} times in three intervals"
    assert all(set(out.values()) == {"unchanged"} for out in since), since

    # 3. prune: a query removed from Git is deleted (through the operator's finalizer), the other stays
    second = repo.commit({"queries/refunds.yaml": None,
                          "queries/kustomization.yaml": yaml.safe_dump({"resources": ["orders.yaml"]})}, "refunds removed")  # fmt: skip
    controllers.wait_applied(name, second, 120)
    wait_for(lambda: cluster.get("refunds") is None, 60, lambda: f"refunds pruned:\n{operator.log_tail()}")
    assert cluster.get("orders") is not None
