"""Flux itself runs streamq (issue #42): its own source-controller and kustomize-controller (built from
source by hack/install-flux.sh) sync the operator and the fraud filter from a Git server onto a fresh
cluster, laid out as docs/gitops.md ("Flux without helm-controller") tells a user to: the chart
rendered with `helm template` in operator/, the queries in queries/, the queries' Kustomization
waiting on the operator's (dependsOn), both with `wait: true` so Flux's health is kstatus's.

The five steps, each read from Flux's own status (the Kustomization's Ready condition and applied
revision), never recomputed here:

1. the sync, in order (no query before the operator is Ready), and flagged payments out of the sink;
2. no drift: over three intervals Flux finds nothing to change (its own log) and writes nothing;
3. a threshold change in Git: Flux applies it, the operator carries it out as a warm upgrade, and
   Flux stays Progressing until the new driver runs, then Ready; no drift after it either;
4. an invalid change: Flux fails with the query's stall, the operator's message is on the query,
   and the running driver goes on; a fix in Git makes it Ready again;
5. the query removed from Git: pruned through the operator's finalizer (driver and Lease gone);
   then the whole app, queries first: nothing stuck, the CRD kept (as Helm keeps it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from testbed.cluster.addons import E2E_NAMESPACE, OPERATOR_NAMESPACE, render_operator
from testbed.cluster.base import REPO_ROOT
from testbed.cluster.workload import figure
from testbed.flux import NAMESPACE, FluxControllers, applied_at, ready_condition
from testbed.gitserver import Repository
from testbed.wait import wait_for
from tests.e2e.gitops.fleet import AUDIT, BROKEN_FILTER, BROKEN_MESSAGE, FRAUD, NEW_THRESHOLD, Fleet, elapsed

pytestmark = [pytest.mark.gitops, pytest.mark.timeout(2400)]

INTERVAL_S = 5  # the GitRepository's and both Kustomizations' interval: drift shows within it
CRD = "streamingqueries.streamq.io"
# the operator's folder as docs/gitops.md ("Flux without helm-controller") has it: the CRD kept on prune
OPERATOR_KUSTOMIZATION = REPO_ROOT / "manifests" / "gitops" / "flux" / "rendered" / "kustomization.yaml"
TEST = "gitops (Flux)"


def _kustomizations(repo: Repository) -> list[dict[str, Any]]:
    """What docs/gitops.md has a user apply once (the cluster's entry point; everything else is in Git)."""
    source = {"kind": "GitRepository", "name": "streamq"}
    common = {"interval": f"{INTERVAL_S}s", "prune": True, "wait": True, "timeout": "5m", "sourceRef": source}
    return [
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
         "metadata": {"name": "streamq", "namespace": NAMESPACE},
         "spec": {"interval": f"{INTERVAL_S}s", "url": repo.url, "ref": {"branch": "main"}}},
        {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
         "metadata": {"name": "streamq-operator", "namespace": NAMESPACE},
         "spec": {**common, "path": "./operator"}},
        {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
         "metadata": {"name": "streamq-queries", "namespace": NAMESPACE},
         "spec": {**common, "path": "./queries", "dependsOn": [{"name": "streamq-operator"}],
                  "targetNamespace": E2E_NAMESPACE}},
    ]  # fmt: skip


def _assert_no_drift(flux: FluxControllers, fleet: Fleet, intervals: int = 3) -> None:
    """Over ``intervals`` sync intervals Flux looks again (its log) and changes nothing: every
    server-side apply of both Kustomizations says "unchanged", no query's spec or Flux's
    managed-fields entry is written, and neither Kustomization turns False."""

    def get(query: str) -> dict[str, Any]:  # with Flux's managed-fields entry, which kubectl leaves out unless told
        return json.loads(fleet.sq.kubectl("get", "sq", query, "-o", "json", "--show-managed-fields").stdout)

    before = {q: get(q) for q in fleet.queries}
    assert all(applied_at(obj) for obj in before.values()), "the kustomize-controller applied the queries"
    seen = {k: len(flux.applies(k)) for k in ("streamq-operator", "streamq-queries")}
    deadline = time.monotonic() + intervals * INTERVAL_S + 2
    while time.monotonic() < deadline:  # a poll, not a sleep: a write in any interval fails at once
        for query, was in before.items():
            now = get(query)
            assert now["metadata"]["generation"] == was["metadata"]["generation"], f"{query}'s spec was written again"
            assert applied_at(now) == applied_at(was), f"Flux applied {query} again: {now['metadata']['managedFields']}"
        for k in seen:  # Ready turns Unknown (Progressing) while each interval's reconcile runs: never False,
            # but for the queries' DependencyNotReady when their reconcile meets the operator's (Flux's dependsOn
            # reads Ready, which is Unknown then; docs/gitops.md)
            ready = ready_condition(flux.kustomization(k))
            assert ready["status"] != "False" or ready["reason"] == "DependencyNotReady", flux.state(k)
        time.sleep(1)  # poll period
    for k, count in seen.items():
        since = flux.applies(k)[count:]
        assert len(since) >= 2, f"Flux reconciled {k} {len(since)} times in {intervals} intervals"
        changed = [out for out in since if set(out.values()) != {"unchanged"}]
        assert not changed, f"Flux re-applied {k}'s objects: {changed}"


def _watch_until_ready(flux: FluxControllers, kustomization: str, revision: str, also: Callable[[], Any],
                       timeout: float) -> list[tuple[float, str, str, Any]]:  # fmt: skip
    """Every 0.3 s until the Kustomization is Ready with ``revision`` applied: (time, Ready status,
    reason, also()) at each change of what is seen."""
    seen: list[tuple[float, str, str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        k = flux.kustomization(kustomization)
        ready = ready_condition(k) or {}
        now = (ready.get("status", "?"), ready.get("reason", "?"), also())
        if not seen or seen[-1][1:] != now:
            seen.append((time.monotonic(), *now))
        if now[0] == "True" and k["status"].get("lastAppliedRevision", "").endswith(revision):
            return seen
        time.sleep(0.3)  # between reads of the condition above: each change of it is recorded, not only the end
    raise AssertionError(f"{kustomization} not Ready with {revision} in {timeout}s: {seen}\n{flux.state(kustomization)}")


def test_flux_syncs_upgrades_refuses_and_prunes_streamq(cluster, kafka, flux, tmp_path):
    controllers, git = flux
    fleet = Fleet.create("flux", cluster, kafka)
    repo = Repository(git, "streamq", tmp_path / "work")
    operator_files = {
        "operator/namespace.yaml": yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}}),
        "operator/streamq.yaml": render_operator(cluster),
        "operator/kustomization.yaml": OPERATOR_KUSTOMIZATION.read_text(),
    }  # fmt: skip
    t0 = time.monotonic()
    revision = repo.commit({**operator_files, **fleet.files()}, "streamq and two queries")
    controllers.apply(_kustomizations(repo))
    try:
        # 1. the sync, in the documented order, as Flux reports it
        controllers.wait_applied("streamq-operator", revision, 420)
        queries_ready = controllers.wait_applied("streamq-queries", revision, 600)
        synced = elapsed(t0)
        assert queries_ready["status"]["lastAppliedRevision"] == f"main@sha1:{revision}"
        fleet.assert_created_after_the_operator(cluster)
        for name in fleet.queries:
            assert fleet.sq.status(name)["phase"] == "Running", fleet.sq.describe(name)  # what kstatus waited for
        fleet.produce_and_wait(150)
        figure(TEST, f"sync from Git to both Kustomizations Ready {synced:.0f}s, flagged payments out {elapsed(t0):.0f}s")

        # 2. no drift, while the operator writes the queries' status and finalizers beside Flux
        _assert_no_drift(controllers, fleet)

        # 3. a threshold change: Flux applies it, the operator upgrades warm, Flux waits for it
        was = fleet.sq.status(FRAUD)
        fleet.set_filter(f"amount > {NEW_THRESHOLD}")
        t1 = time.monotonic()
        changed = repo.commit(fleet.files(), f"fraud: flag above {NEW_THRESHOLD}")
        seen = _watch_until_ready(controllers, "streamq-queries", changed,
                                  lambda: fleet.sq.status(FRAUD).get("phase"), 600)  # fmt: skip
        phases = [phase for *_, phase in seen]
        assert "Upgrading" in phases, f"the change was not a warm upgrade: {seen}"
        assert any(status == "Unknown" and reason == "Progressing" and phase == "Upgrading"
                   for _, status, reason, phase in seen), seen  # fmt: skip
        now = fleet.sq.status(FRAUD)  # Flux's Ready came after the new driver's, not before
        assert now["phase"] == "Running" and now["attempt"] > was["attempt"] and now["driver"] != was["driver"], (was, now)
        upgraded = next(t for t, *_, phase in seen[phases.index("Upgrading") :] if phase == "Running") - t1
        fleet.above = NEW_THRESHOLD
        fleet.produce_and_wait(150)
        figure(TEST, f"threshold change pushed: new driver Running {upgraded:.0f}s later, Ready {seen[-1][0] - t1:.0f}s, "
                     f"through {' > '.join(f'{s}/{r}/{p}' for _, s, r, p in seen)}")  # fmt: skip
        _assert_no_drift(controllers, fleet)

        # 4. an invalid change: Flux fails with the query's stall; the running driver goes on
        driver = fleet.sq.status(FRAUD)["driver"]
        fleet.set_filter(BROKEN_FILTER)
        bad = repo.commit(fleet.files(), "fraud: a broken filter")

        def failed() -> dict[str, Any] | None:
            k = controllers.kustomization("streamq-queries")
            ready = ready_condition(k) or {}
            return k if ready.get("status") == "False" and k["status"].get("lastAttemptedRevision", "").endswith(bad) else None

        refused = wait_for(failed, 300, lambda: f"Flux fails {bad}: {controllers.state('streamq-queries')}")
        message = ready_condition(refused)["message"]
        assert f"StreamingQuery/{E2E_NAMESPACE}/{FRAUD}" in message, message
        stalled = next(c for c in fleet.sq.status(FRAUD)["conditions"] if c["type"] == "Stalled")
        assert stalled["status"] == "True" and BROKEN_MESSAGE in stalled["message"], stalled
        assert fleet.sq.status(FRAUD)["driver"] == driver, "the running driver goes on under a refused change"
        figure(TEST, f"invalid change: Flux says {ready_condition(refused)['reason']}: {message[:200]}; "
                     f"the query: {stalled['message'][:160]}")  # fmt: skip
        fleet.set_filter(f"amount > {NEW_THRESHOLD}")
        fixed = repo.commit(fleet.files(), "fraud: the filter fixed")
        controllers.wait_applied("streamq-queries", fixed, 300)

        # 5. the query removed from Git: pruned through the operator's finalizer
        del fleet.queries[FRAUD]
        removed = repo.commit({f"queries/{FRAUD}.yaml": None, **fleet.files()}, "fraud removed")
        controllers.wait_applied("streamq-queries", removed, 300)
        fleet.wait_gone(FRAUD)
        assert fleet.sq.status(AUDIT)["phase"] == "Running"
        # then the whole app, as docs/gitops.md says: the queries' Kustomization first (the operator
        # releases them), then the operator's
        t2 = time.monotonic()
        cluster.kubectl("delete", "kustomization", "-n", NAMESPACE, "streamq-queries", "--wait=true", "--timeout=300s")
        fleet.wait_gone(AUDIT)
        cluster.kubectl("delete", "kustomization", "-n", NAMESPACE, "streamq-operator", "--wait=true", "--timeout=300s")
        wait_for(lambda: cluster.kubectl("get", "namespace", OPERATOR_NAMESPACE, check=False).returncode != 0, 300,
                 f"namespace {OPERATOR_NAMESPACE} deleted")  # fmt: skip
        assert cluster.kubectl("get", "crd", CRD, check=False).returncode == 0, "the CRD is kept, as Helm keeps it"
        figure(TEST, f"whole app removed (queries, then operator) in {elapsed(t2):.0f}s; CRD kept")
    finally:
        fleet.sq.report()
