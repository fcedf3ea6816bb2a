"""Argo CD itself runs streamq (issue #42): its own application controller and repo server (built from
source by hack/install-argocd.sh, with Debian's Redis) sync the app of apps of docs/gitops.md from a
Git server onto a fresh cluster: root.yaml's Application, which syncs apps/ (the operator's
Application from the chart, wave 0; the queries', wave 1), with the project's argocd-cm (the health
of a StreamingQuery and of an Application). The examples are the repository's own files, with the
Git server's URL, this cluster's address and the e2e values put in.

The five steps, each read from Argo CD's own status (`status.sync`, `status.health`,
`status.operationState`), never recomputed here:

1. the sync, in order (no query before the operator is Available), and flagged payments out;
2. no drift: over three resyncs every Application stays Synced and no sync operation starts again;
3. a threshold change in Git: synced, carried out as a warm upgrade, the queries' Application
   Progressing while it runs, then Healthy, Synced, no drift after it;
4. an invalid change: the queries' Application Degraded with the operator's message; the running
   driver goes on; a fix in Git makes it Healthy again;
5. the query removed from Git: pruned through the operator's finalizer; then the whole app (the
   root Application deleted): the PreDelete hook releases the queries, nothing is left stuck.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.argocd import NAMESPACE, ArgoCD
from testbed.cluster.addons import E2E_NAMESPACE, OPERATOR_NAMESPACE, operator_values
from testbed.cluster.base import REPO_ROOT
from testbed.cluster.workload import figure
from testbed.gitserver import Repository
from testbed.wait import wait_for
from tests.e2e.gitops.fleet import AUDIT, BROKEN_FILTER, BROKEN_MESSAGE, FRAUD, NEW_THRESHOLD, Fleet, elapsed

pytestmark = [pytest.mark.gitops, pytest.mark.timeout(2400)]

RESYNC_S = 5  # the application controller's resync period: drift shows within it
EXAMPLES = REPO_ROOT / "manifests" / "gitops" / "argocd"
APPS = "manifests/gitops/argocd/apps"  # where root.yaml points, in the repository as in ours
CHART = REPO_ROOT / "charts" / "streamq"
TEST = "gitops (Argo CD)"
ROOT, OPERATOR, QUERIES = "streamq", "streamq-operator", "streamq-queries"


def _pointed(path: Path, repo: Repository, argocd: ArgoCD) -> dict[str, Any]:
    """An example Application with this Git server's URL and this cluster's address put in."""
    app = yaml.safe_load(path.read_text())
    app["spec"]["source"]["repoURL"] = repo.url
    app["spec"]["destination"]["server"] = argocd.server
    return app


def _repository_files(repo: Repository, argocd: ArgoCD, cluster: Any, fleet: Fleet) -> dict[str, str | None]:
    """The repository as docs/gitops.md lays it out: the chart, apps/ and the queries."""
    files: dict[str, str | None] = {f"charts/streamq/{p.relative_to(CHART)}": p.read_text()
                                    for p in CHART.rglob("*") if p.is_file()}  # fmt: skip
    operator = _pointed(EXAMPLES / "apps" / f"{OPERATOR}.yaml", repo, argocd)
    operator["spec"]["source"]["helm"]["valuesObject"] = operator_values(cluster)
    operator["spec"]["destination"]["namespace"] = OPERATOR_NAMESPACE
    queries = _pointed(EXAMPLES / "apps" / f"{QUERIES}.yaml", repo, argocd)
    queries["spec"]["destination"]["namespace"] = E2E_NAMESPACE
    files[f"{APPS}/{OPERATOR}.yaml"] = yaml.safe_dump(operator)
    files[f"{APPS}/{QUERIES}.yaml"] = yaml.safe_dump(queries)
    return {**files, **fleet.files(kustomization=False)}


def _status(argocd: ArgoCD, name: str) -> dict[str, Any]:
    return argocd.application(name).get("status", {})


def _assert_no_drift(argocd: ArgoCD, fleet: Fleet, resyncs: int = 3) -> None:
    """Over ``resyncs`` resync periods Argo CD compares again (reconciledAt moves) and finds nothing: every
    Application stays Synced, no sync operation starts (self-heal would start one), no spec is written."""
    apps = (ROOT, OPERATOR, QUERIES)
    before = {app: _status(argocd, app) for app in apps}
    generations = {q: fleet.sq.get(q)["metadata"]["generation"] for q in fleet.queries}
    compared: dict[str, set[str]] = {app: set() for app in apps}
    deadline = time.monotonic() + resyncs * RESYNC_S + 2
    while time.monotonic() < deadline:  # a poll, not a sleep: drift at any moment fails at once
        for app, was in before.items():
            now = _status(argocd, app)
            assert now["sync"]["status"] == "Synced", f"{app} is {now['sync']}: {argocd.state(app)}"
            assert now["operationState"]["startedAt"] == was["operationState"]["startedAt"], (
                f"{app} synced again: {now['operationState']}"
            )
            compared[app].add(now.get("reconciledAt", ""))
        for query, generation in generations.items():
            assert fleet.sq.get(query)["metadata"]["generation"] == generation, f"{query}'s spec was written again"
        time.sleep(1)  # poll period
    for app, times in compared.items():
        assert len(times) >= 3, f"Argo CD compared {app} {len(times)} times in {resyncs} resyncs: {sorted(times)}"


def test_argocd_syncs_upgrades_refuses_and_prunes_streamq(cluster, kafka, argocd, tmp_path):
    argocd, git = argocd
    fleet = Fleet.create("argocd", cluster, kafka)
    repo = Repository(git, "platform", tmp_path / "work")
    t0 = time.monotonic()
    revision = repo.commit(_repository_files(repo, argocd, cluster, fleet), "streamq and two queries")
    argocd.apply([_pointed(EXAMPLES / "root.yaml", repo, argocd)])
    try:
        # 1. the sync, in waves, as Argo CD reports it
        for app in (ROOT, OPERATOR, QUERIES):
            argocd.wait_synced(app, revision, 600)
        synced = elapsed(t0)
        fleet.assert_created_after_the_operator(cluster)
        for name in fleet.queries:
            assert fleet.sq.status(name)["phase"] == "Running", fleet.sq.describe(name)  # what Healthy waited for
        fleet.produce_and_wait(150)
        figure(
            TEST,
            f"sync from Git to all three Applications Synced and Healthy {synced:.0f}s, flagged payments out {elapsed(t0):.0f}s",
        )

        # 2. no drift, while the operator writes the queries' status and finalizers
        _assert_no_drift(argocd, fleet)

        # 3. a threshold change: synced, upgraded warm, Progressing until the new driver runs
        was = fleet.sq.status(FRAUD)
        fleet.set_filter(f"amount > {NEW_THRESHOLD}")
        t1 = time.monotonic()
        changed = repo.commit(fleet.files(kustomization=False), f"fraud: flag above {NEW_THRESHOLD}")
        seen: list[tuple[float, str, str]] = []

        def upgraded() -> bool:
            status = _status(argocd, QUERIES)
            now = (status.get("health", {}).get("status", "?"), fleet.sq.status(FRAUD).get("phase", "?"))
            if not seen or seen[-1][1:] != now:
                seen.append((elapsed(t1), *now))
            return status.get("sync", {}).get("revision") == changed and now == ("Healthy", "Running") and \
                fleet.sq.status(FRAUD)["attempt"] > was["attempt"]  # fmt: skip

        wait_for(upgraded, 600, lambda: f"{QUERIES} Healthy after the upgrade: {seen}\n{argocd.state(QUERIES)}", interval=0.3)
        assert any(phase == "Upgrading" for *_, phase in seen), f"the change was not a warm upgrade: {seen}"
        assert any(health == "Progressing" and phase == "Upgrading" for _, health, phase in seen), seen
        argocd.wait_synced(QUERIES, changed, 60)
        fleet.above = NEW_THRESHOLD
        fleet.produce_and_wait(150)
        running = next(t for t, _, phase in seen[[p for *_, p in seen].index("Upgrading") :] if phase == "Running")
        figure(TEST, f"threshold change pushed: new driver Running {running:.0f}s later, Healthy {seen[-1][0]:.0f}s, "
                     f"through {' > '.join(f'{h}/{p}' for _, h, p in seen)}")  # fmt: skip
        _assert_no_drift(argocd, fleet)

        # 4. an invalid change: Degraded with the operator's message; the running driver goes on
        driver = fleet.sq.status(FRAUD)["driver"]
        broken = copy.deepcopy(fleet.queries)
        fleet.set_filter(BROKEN_FILTER)
        bad = repo.commit(fleet.files(kustomization=False), "fraud: a broken filter")

        def degraded() -> dict[str, Any] | None:
            status = _status(argocd, QUERIES)
            ok = status.get("sync", {}).get("revision") == bad and status.get("health", {}).get("status") == "Degraded"
            return status if ok else None

        status = wait_for(degraded, 300, lambda: f"{QUERIES} Degraded: {argocd.state(QUERIES)}")
        resource = next(r for r in status["resources"] if r["kind"] == "StreamingQuery" and r["name"] == FRAUD)
        assert BROKEN_MESSAGE in resource["health"]["message"], resource
        assert fleet.sq.status(FRAUD)["driver"] == driver, "the running driver goes on under a refused change"
        figure(TEST, f"invalid change: {QUERIES} Degraded, the query's health says: {resource['health']['message'][:160]}")
        fleet.queries = broken
        fixed = repo.commit(fleet.files(kustomization=False), "fraud: the filter fixed")
        argocd.wait_synced(QUERIES, fixed, 300)

        # 5. the query removed from Git: pruned; then the whole app, by deleting the root Application
        del fleet.queries[FRAUD]
        removed = repo.commit({f"queries/{FRAUD}.yaml": None, **fleet.files(kustomization=False)}, "fraud removed")
        argocd.wait_synced(QUERIES, removed, 300)
        fleet.wait_gone(FRAUD)
        assert fleet.sq.status(AUDIT)["phase"] == "Running"
        t2 = time.monotonic()
        cluster.kubectl("delete", "application", "-n", NAMESPACE, ROOT, "--wait=false")
        for app in (ROOT, OPERATOR, QUERIES):  # each one's resources finalizer done: nothing stuck
            wait_for(lambda app=app: argocd.kubectl("get", "application", "-n", NAMESPACE, app, check=False).returncode != 0,
                     300, lambda app=app: f"{app} deleted: {argocd.state(app)}")  # fmt: skip
        fleet.wait_gone(AUDIT)
        left = cluster.kubectl("get", "deployment", "-n", OPERATOR_NAMESPACE, "-o", "name", check=False).stdout.strip()
        assert not left, f"the operator is left: {left}"
        figure(TEST, f"whole app removed (root Application deleted) in {elapsed(t2):.0f}s")
    finally:
        fleet.sq.report()
