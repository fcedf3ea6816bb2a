"""The operator against a real kube-apiserver: create, run, fail, restart, give up, suspend,
refuse, delete. The test plays the kubelet by writing the driver pod's status."""

from __future__ import annotations

import time

import pytest

from testbed.operator import JOB_IMAGE
from testbed.specs import RATE_TO_CONSOLE, query_spec
from testbed.wait import wait_for

pytestmark = pytest.mark.integration


def test_apply_creates_the_driver_pod_and_its_query(cluster, operator):
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    pod = cluster.wait_driver("q", 1)
    sq = cluster.get("q")
    assert pod.spec.containers[0].image == JOB_IMAGE
    assert pod.spec.containers[0].args == ["job", "/etc/streamq/query.json"]
    assert pod.spec.restart_policy == "Never"
    owner = pod.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller, owner.block_owner_deletion) == (
        "StreamingQuery",
        "q",
        sq["metadata"]["uid"],
        True,
        True,
    )
    status = cluster.wait_phase("q", "Starting")
    assert status["driver"] == "q-driver-1" and status["attempt"] == 1 and status["mode"] == "continuous"
    doc = cluster.query_document("q")
    assert doc["metadata"] == {"name": "q", "namespace": cluster.namespace}
    assert doc["spec"]["checkpoint"]["location"] == "/checkpoints/q"
    assert cluster.config_map("q").metadata.owner_references[0].uid == sq["metadata"]["uid"]


def test_ready_condition_works_with_kubectl_wait(cluster, operator, kube_apiserver):
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    cluster.wait_driver("q", 1)
    cluster.pod_runs("q-driver-1")
    kube_apiserver.kubectl("-n", cluster.namespace, "wait", "--for=condition=Ready", "sq/q", "--timeout=60s")
    status = cluster.status("q")
    assert status["phase"] == "Running" and status["observedGeneration"] == 1
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {
        "Ready": "True",
        "Progressing": "False",
        "Reconciling": "False",
        "Stalled": "False",
        "Degraded": "False",
    }
    cluster.wait_event("q", "DriverRunning")


def test_printer_columns(cluster, operator, kube_apiserver):
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    cluster.wait_driver("q", 1)
    cluster.pod_runs("q-driver-1")
    cluster.wait_phase("q", "Running")
    # progress comes from the driver's log, which needs a kubelet; write one record as the operator would
    cluster.custom.patch_namespaced_custom_object_status(
        "streamq.io", "v1alpha1", cluster.namespace, "streamingqueries", "q",
        {"status": {"progress": {"batchId": 42, "totalLag": 17, "slots": 4, "health": {"state": "Healthy"}}}})  # fmt: skip
    out = kube_apiserver.kubectl("-n", cluster.namespace, "get", "sq").stdout.splitlines()
    assert out[0].split() == ["NAME", "PHASE", "REASON", "MODE", "RESTARTS", "EPOCH", "LAG", "AGE"]
    assert out[1].split()[:7] == ["q", "Running", "DriverRunning", "continuous", "0", "42", "17"]
    wide = kube_apiserver.kubectl("-n", cluster.namespace, "get", "sq", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[:11] == [
        "NAME",
        "PHASE",
        "REASON",
        "MODE",
        "RESTARTS",
        "EPOCH",
        "LAG",
        "HEALTH",
        "LAST-COMMIT",
        "SLOTS",
        "DRIVER",
    ]
    assert "q-driver-1" in wide[1] and "Healthy" in wide[1]
    assert "q" in kube_apiserver.kubectl("-n", cluster.namespace, "get", "streamq").stdout  # the category
    # and only that one: `kubectl delete all --all` must not delete queries (issue 38)
    assert "streamingquery" not in kube_apiserver.kubectl("-n", cluster.namespace, "get", "all", "-o", "name").stdout


def test_a_dying_driver_is_restarted_after_the_backoff_on_the_same_checkpoint(cluster, operator):
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    cluster.wait_driver("q", 1)
    cluster.pod_runs("q-driver-1")
    cluster.wait_phase("q", "Running")
    first_doc = cluster.query_document("q")

    cluster.pod_dies("q-driver-1", 70, "QUERY_FAILED: Task failed while writing rows")
    status = cluster.wait_status("q", lambda s: s.get("restarts") == 1, what="one restart")
    assert status["lastFailure"]["exitCode"] == 70
    assert "Task failed while writing rows" in status["lastFailure"]["message"]
    assert status["lastFailure"]["reason"] == "DriverFailed"
    pod2 = cluster.wait_driver("q", 2, timeout=30)  # after the 1s backoff, the old driver deleted first
    assert [p.metadata.name for p in cluster.driver_pods("q")] == ["q-driver-2"]
    assert pod2.metadata.annotations["streamq.io/checkpoint-location"] == "/checkpoints/q"
    assert cluster.query_document("q")["spec"]["checkpoint"] == first_doc["spec"]["checkpoint"]
    claim = {v.name: v for v in pod2.spec.volumes}["checkpoint"].persistent_volume_claim.claim_name
    assert claim == "streamq-checkpoints"  # testbed.specs: a claim the policy allows (streamq-*)
    status = cluster.wait_phase("q", "Starting")
    assert status["restarts"] == 1 and status["attempt"] == 2
    cluster.wait_event("q", "DriverFailed")


def test_exit_65_is_invalid_and_not_restarted(cluster, operator):
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    cluster.wait_driver("q", 1)
    cluster.pod_dies("q-driver-1", 65, "QUERY_REFUSED: Continuous processing does not support Aggregate operations.")
    status = cluster.wait_phase("q", "Invalid")
    assert "does not support Aggregate" in status["message"]
    assert status["restarts"] == 0 and status["lastFailure"]["reason"] == "QueryRefused"
    degraded = cluster.condition("q", "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == "QueryRefused"
    event = cluster.wait_event("q", "QueryRefused")
    assert event.type == "Warning"
    # the operator looks again (a resync, events) but never makes a second driver
    cluster.patch_spec(
        "q", {"restartPolicy": {"backoff": {"initial": "1s", "max": "2s"}, "maxRestarts": 3}}
    )  # same spec: no new generation
    assert [p.metadata.name for p in cluster.driver_pods("q")] == ["q-driver-1"]
    assert cluster.status("q")["phase"] == "Invalid"


def test_max_restarts_exhausted_is_failed(cluster, operator):
    cluster.apply("q", query_spec(RATE_TO_CONSOLE, restartPolicy={"backoff": {"initial": "1s", "max": "1s"}, "maxRestarts": 1}))
    cluster.wait_driver("q", 1)
    cluster.pod_dies("q-driver-1", 70, "QUERY_FAILED: one")
    cluster.wait_driver("q", 2, timeout=30)
    cluster.pod_dies("q-driver-2", 70, "QUERY_FAILED: two")
    status = cluster.wait_phase("q", "Failed")
    assert status["restarts"] == 1
    assert "gave up after 1 restart(s) (maxRestarts 1)" in status["message"]
    assert cluster.condition("q", "Degraded")["reason"] == "RestartLimitReached"
    assert cluster.condition("q", "Ready")["status"] == "False"
    cluster.wait_event("q", "RestartLimitReached")
    assert [p.metadata.name for p in cluster.driver_pods("q")] == ["q-driver-2"]  # kept for its logs


def test_suspend_and_resume(cluster, operator):
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    cluster.wait_driver("q", 1)
    cluster.pod_runs("q-driver-1")
    cluster.wait_phase("q", "Running")
    cluster.patch_spec("q", {"suspend": True})
    cluster.wait_status("q", lambda s: s.get("phase") == "Suspended" and s.get("message", "").startswith("suspended"))
    assert cluster.driver_pods("q") == []
    assert cluster.condition("q", "Ready")["status"] == "False"
    cluster.patch_spec("q", {"suspend": False})
    pod = cluster.wait_driver("q", 2)
    assert pod.metadata.annotations["streamq.io/checkpoint-location"] == "/checkpoints/q"
    cluster.wait_event("q", "Resumed")


def test_an_incompatible_source_change_is_refused_in_status(cluster, operator, kube_apiserver):
    spec = query_spec(RATE_TO_CONSOLE, source={"kafka": {"bootstrapServers": "kafka:9092", "topics": ["payments"]}},
                     sink={"console": {}}, runtime={"parallelism": 2})  # fmt: skip
    cluster.apply("q", spec)
    cluster.wait_driver("q", 1)
    cluster.pod_runs("q-driver-1")
    cluster.wait_phase("q", "Running")
    spec["source"]["kafka"]["topics"] = ["orders"]
    cluster.apply("q", spec)  # accepted by the API server: the refusal is the operator's
    status = cluster.wait_status(
        "q", lambda s: any(c["type"] == "Degraded" and c["status"] == "True" for c in s.get("conditions", [])),
        what="Degraded")  # fmt: skip
    degraded = cluster.condition("q", "Degraded")
    assert degraded["reason"] == "IncompatibleChange"
    assert "spec.source.kafka.topics changed from ['payments'] to ['orders']" in degraded["message"]
    assert status["phase"] == "Running" and status["observedGeneration"] == 2
    assert [p.metadata.name for p in cluster.driver_pods("q")] == ["q-driver-1"]  # still the old query
    event = cluster.wait_event("q", "IncompatibleChange")
    assert event.type == "Warning" and "spec.source.kafka.topics" in event.message
    # a fresh checkpoint location makes the change acceptable
    spec["checkpoint"]["location"] = "/checkpoints/q-orders"
    cluster.apply("q", spec)
    pod = cluster.wait_driver("q", 2)
    assert pod.metadata.annotations["streamq.io/checkpoint-location"] == "/checkpoints/q-orders"
    cluster.wait_status("q", lambda s: s.get("checkpoint", {}).get("location") == "/checkpoints/q-orders")
    assert cluster.condition("q", "Degraded")["status"] == "False"


def test_a_compatible_change_and_a_restart_nonce_restart_the_driver(cluster, operator):
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    cluster.wait_driver("q", 1)
    cluster.patch_spec("q", {"transforms": [{"where": "value % 3 = 0"}]})
    cluster.wait_driver("q", 2)
    assert cluster.query_document("q")["spec"]["transforms"] == [{"where": "value % 3 = 0"}]
    cluster.patch_spec("q", {"restartNonce": "again"})
    cluster.wait_driver("q", 3)
    cluster.wait_event("q", "RestartRequested")
    assert cluster.status("q")["restarts"] == 0


def test_delete_leaves_owned_children_and_no_stuck_finalizer(cluster, operator, kube_apiserver):
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    pod = cluster.wait_driver("q", 1)
    sq = cluster.get("q")
    assert sq["metadata"]["finalizers"] == ["streamq.io/finalizer"]
    for child in (pod, cluster.config_map("q")):
        (ref,) = child.metadata.owner_references
        assert (ref.kind, ref.uid, ref.controller, ref.block_owner_deletion) == (
            "StreamingQuery",
            sq["metadata"]["uid"],
            True,
            True,
        )
    started = time.monotonic()
    kube_apiserver.kubectl("-n", cluster.namespace, "delete", "sq", "q", "--timeout=60s")
    wait_for(lambda: cluster.get("q") is None, 30, "the StreamingQuery to be gone")
    # The reconciler leaves when kopf says stop, well before kopf would cancel it (5 s).
    assert time.monotonic() - started < 4, operator.log_tail()
    assert "is cancelled" not in operator.log_path.read_text(errors="replace")
    # no kube-controller-manager here: garbage collection of the owned pod is the cluster's job
    assert operator.proc.poll() is None


def test_a_spec_invalid_for_the_static_rules_is_invalid(cluster, operator):
    # the CRD cannot express this rule (an aggregation in continuous mode); the operator's validation can
    cluster.apply("q", query_spec(RATE_TO_CONSOLE, transforms=[{"sql": "SELECT count(*) AS n FROM input"}]))
    status = cluster.wait_phase("q", "Invalid")
    assert "spec.transforms[0].sql: continuous mode supports map-like steps only" in status["message"]
    assert cluster.driver_pods("q") == []
    cluster.wait_event("q", "InvalidSpec")
    cluster.patch_spec("q", {"transforms": [{"where": "value > 0"}]})
    cluster.wait_driver("q", 1)


def test_metrics_and_liveness(cluster, start_operator):
    import urllib.request

    from testbed.kube import free_port

    port = free_port()
    op = start_operator(metrics_port=port)
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    cluster.wait_driver("q", 1)
    cluster.pod_runs("q-driver-1")
    cluster.wait_phase("q", "Running")

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return r.read().decode()

    wait_for(lambda: 'streamq_queries{phase="Running"} 1.0' in scrape(), 30, "the Running gauge")
    text = scrape()
    assert 'streamq_reconciles_total{verb="create"} 1.0' in text
    with urllib.request.urlopen(f"http://127.0.0.1:{op.liveness_port}/healthz", timeout=5) as r:
        assert r.status == 200 and b"reconcilers" in r.read()
