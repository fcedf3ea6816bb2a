"""Conflicting status writes (409) in the reconcile loop (issue #12), for real: the
operator runs against the real kube-apiserver while another client changes the
StreamingQuery (an annotation) between the operator's read and its status write,
which the operator guards with the resourceVersion it read. The operator must
neither crash nor lose the update it was writing: once the conflicts stop, the
status is the one the world calls for (the test plays the kubelet).

The other client does not race the operator: a race can be lost, and a cold CI run
once saw no conflict at all. The operator talks to the API server through a proxy
that makes the change just before it forwards each of the operator's next CONFLICTS
status writes, so every one of them conflicts."""

from __future__ import annotations

import collections
import re
import time

import pytest

from contract import GROUP, PLURAL, VERSION
from testbed.specs import RATE_TO_CONSOLE, query_spec
from testbed.wait import wait_for
from tests.support.proxy import InterposingProxy

pytestmark = pytest.mark.integration

CONFLICTS = 5
CONVERGE_S = 15.0  # the operator's resync is 10 s, its retry after a conflict 0.2 s


def _conflicts(log: str) -> int:
    return len(re.findall(r"status write skipped \(409\)", log))


@pytest.fixture
def proxy(kube_apiserver):
    """Outlives the operator it serves (requested before start_operator)."""
    proxy = InterposingProxy(kube_apiserver.server, kube_apiserver.pki)
    yield proxy
    proxy.close()


def test_status_write_conflicts_converge(proxy, cluster, start_operator, streamq_installed, tmp_path):
    operator = start_operator(KUBECONFIG=str(proxy.kubeconfig_through(streamq_installed, tmp_path / "kubeconfig")))
    status_write = f"/apis/{GROUP}/{VERSION}/namespaces/{cluster.namespace}/{PLURAL}/q/status"
    changes = 0

    def change_the_query_first(method: str, path: str) -> None:
        nonlocal changes
        if method == "PATCH" and path == status_write and changes < CONFLICTS:
            body = {"metadata": {"annotations": {"test.streamq.io/change": str(changes)}}}
            cluster.custom.patch_namespaced_custom_object(GROUP, VERSION, cluster.namespace, PLURAL, "q", body)
            changes += 1

    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    cluster.wait_driver("q", 1)
    cluster.wait_phase("q", "Starting")
    # Before now a write may have conflicted by itself (kopf adds its finalizer while the first pass runs).
    conflicts_before = _conflicts(operator.log_path.read_text(errors="replace"))
    answered_before = proxy.answered("PATCH", status_write, 409)
    proxy.before = change_the_query_first
    t0 = time.monotonic()
    cluster.pod_runs("q-driver-1")  # the world changes: the status write it calls for conflicts CONFLICTS times
    status = cluster.wait_status("q", lambda s: s.get("phase") == "Running", CONVERGE_S, "phase Running")
    converged_in = time.monotonic() - t0
    proxy.before = lambda method, path: None
    log = operator.log_path.read_text(errors="replace")
    conflicts = _conflicts(log) - conflicts_before
    answered_409 = proxy.answered("PATCH", status_write, 409) - answered_before
    cluster.wait_event("q", "DriverRunning")  # posted after the write that landed
    events = collections.Counter(e.reason for e in cluster.events("q"))
    print(f"[figure] {changes} changes of the query ahead of a status write; the API server answered {answered_409} "
          f"of them 409, the operator logged {conflicts} skipped (409); phase Running {converged_in:.1f}s after the "
          f"driver ran; events on the query {dict(events)}", flush=True)  # fmt: skip

    assert changes == CONFLICTS, f"only {changes} status writes came through the proxy while Running was due"
    assert answered_409 == CONFLICTS, (
        f"{answered_409} of {CONFLICTS} status writes after a change conflicted: is the write still guarded?"
    )
    assert conflicts == CONFLICTS, f"the operator took {conflicts} of {CONFLICTS} 409s for a conflict:\n{operator.log_tail()}"
    assert events["DriverRunning"] == 1, f"a conflicted decision's events went out too: {dict(events)}"
    assert not operator.exited, operator.log_tail()
    assert "Traceback" not in log, log[log.index("Traceback") :][:3000]
    # The right status: the one driver, running, counted once, nothing failed.
    assert status["driver"] == "q-driver-1" and status["attempt"] == 1 and status.get("restarts", 0) == 0, status
    assert status.get("observedGeneration") == 1
    assert "lastFailure" not in status, status["lastFailure"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Ready"] == "True" and conditions["Degraded"] == "False", conditions
    assert [p.metadata.name for p in cluster.driver_pods("q")] == ["q-driver-1"]
    # Still working after the conflicts: a later change of the world is written at once.
    cluster.pod_dies("q-driver-1", 70, "QUERY_FAILED: boom")
    after = wait_for(lambda: (lambda s: s if s.get("restarts") == 1 else None)(cluster.status("q")), 30, "the failure recorded")
    assert after["lastFailure"]["driver"] == "q-driver-1", after["lastFailure"]
