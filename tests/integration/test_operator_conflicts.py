"""Conflicting status writes (409) in the reconcile loop (issue #12), for real: the
operator runs against the real kube-apiserver while another client changes the
StreamingQuery (an annotation, in a tight loop) between the operator's read and its
status write, which the operator guards with the resourceVersion it read. The
operator must neither crash nor lose the update it was writing: once the storm
stops, the status is the one the world calls for (the test plays the kubelet)."""

from __future__ import annotations

import collections
import re
import threading
import time

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.contract import GROUP, PLURAL, VERSION
from tests.support.specs import RATE_TO_CONSOLE, query_spec
from tests.support.wait import wait_for

pytestmark = pytest.mark.integration

STORM_S = 15.0
CONVERGE_S = 15.0  # after the storm; the operator's resync is 10 s, its retry after a conflict 0.2 s


class AnnotationStorm:
    """Patches an annotation of one StreamingQuery as fast as the API server takes it."""

    def __init__(self, kube_apiserver, namespace: str, name: str):
        self.api = kube_apiserver.api_client()
        self.custom = client.CustomObjectsApi(self.api)
        self.namespace, self.name = namespace, name
        self.patches = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="annotation-storm", daemon=True)

    def __enter__(self) -> "AnnotationStorm":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.api.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            body = {"metadata": {"annotations": {"test.streamq.io/storm": str(self.patches)}}}
            try:
                self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, self.name, body)
                self.patches += 1
            except ApiException as exc:  # reported, the storm goes on
                self.errors.append(f"{exc.status} {exc.reason}")


def _conflicts(log: str) -> int:
    return len(re.findall(r"status write skipped \(409\)", log))


def test_status_write_conflicts_converge(cluster, operator, kube_apiserver):
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    cluster.wait_driver("q", 1)
    cluster.wait_phase("q", "Starting")
    conflicts_before = _conflicts(operator.log_path.read_text(errors="replace"))
    landed_during = None
    with AnnotationStorm(kube_apiserver, cluster.namespace, "q") as storm:
        t0 = time.monotonic()
        cluster.pod_runs("q-driver-1")  # the world changes while every status write races the storm
        while time.monotonic() - t0 < STORM_S:
            if landed_during is None and cluster.status("q").get("phase") == "Running":
                landed_during = time.monotonic() - t0
            assert not operator.exited, f"the operator exited during the storm:\n{operator.log_tail()}"
            time.sleep(0.2)  # sampling a fixed-length storm, not waiting for a condition
    stopped = time.monotonic()
    status = cluster.wait_status("q", lambda s: s.get("phase") == "Running", CONVERGE_S, "phase Running after the storm")
    converged_in = time.monotonic() - stopped
    log = operator.log_path.read_text(errors="replace")
    conflicts = _conflicts(log) - conflicts_before
    events = collections.Counter(e.reason for e in cluster.events("q"))  # a decision's events go out before its write
    print(f"[figure] {storm.patches} annotation patches in {STORM_S:.0f}s ({storm.errors[:3]} errors); {conflicts} status "
          f"writes lost a race (409); phase Running "
          + (f"landed {landed_during:.1f}s into the storm" if landed_during is not None else
             f"did not land during the storm, {converged_in:.1f}s after it")
          + f"; events on the query {dict(events)}", flush=True)  # fmt: skip

    assert storm.patches > 50, f"the storm was no storm: {storm.patches} patches"
    assert conflicts > 0, "no status write conflicted: the fault was not injected"
    assert not operator.exited, operator.log_tail()
    assert "Traceback" not in log, log[log.index("Traceback"):][:3000]
    # The right status: the one driver, running, counted once, nothing failed.
    assert status["driver"] == "q-driver-1" and status["attempt"] == 1 and status.get("restarts", 0) == 0, status
    assert status.get("observedGeneration") == 1
    assert "lastFailure" not in status, status["lastFailure"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Ready"] == "True" and conditions["Degraded"] == "False", conditions
    assert [p.metadata.name for p in cluster.driver_pods("q")] == ["q-driver-1"]
    # Still working after the storm: a later change of the world is written at once.
    cluster.pod_dies("q-driver-1", 70, "QUERY_FAILED: boom")
    after = wait_for(lambda: (lambda s: s if s.get("restarts") == 1 else None)(cluster.status("q")), 30, "the failure recorded")
    assert after["lastFailure"]["driver"] == "q-driver-1", after["lastFailure"]
