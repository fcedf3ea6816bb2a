"""Backend sparkApplication: the operator creates a kubeflow SparkApplication (its
v1beta2 CRD registered from the published API; no spark-operator runs here, so the
test writes the application's status as the spark-operator would)."""

from __future__ import annotations

import pytest

from testbed.operator import JOB_IMAGE
from testbed.specs import RATE_TO_CONSOLE, query_spec
from testbed.wait import wait_for

pytestmark = pytest.mark.integration

SPARK = ("sparkoperator.k8s.io", "v1beta2")


def apps(cluster) -> list[dict]:
    return cluster.custom.list_namespaced_custom_object(*SPARK, cluster.namespace, "sparkapplications")["items"]


def wait_app(cluster, name: str) -> dict:
    return wait_for(lambda: next((a for a in apps(cluster) if a["metadata"]["name"] == name
                                  and not a["metadata"].get("deletionTimestamp")), None), 60, f"SparkApplication {name}")  # fmt: skip


def set_state(cluster, name: str, state: str, error: str = "") -> None:
    status = {"applicationState": {"state": state, "errorMessage": error}}
    cluster.custom.patch_namespaced_custom_object_status(*SPARK, cluster.namespace, "sparkapplications", name,
                                                         {"status": status})  # fmt: skip


def test_spark_application_backend(cluster, operator, kube_apiserver):
    spec = query_spec(RATE_TO_CONSOLE, runtime={"backend": "sparkApplication", "parallelism": 2,
                              "executors": {"instances": 2, "cores": 1, "memory": "1Gi"}})  # fmt: skip
    cluster.apply("q", spec)
    app = wait_app(cluster, "q-driver-1")
    sq = cluster.get("q")
    (owner,) = app["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("StreamingQuery", sq["metadata"]["uid"], True)
    s = app["spec"]
    assert (s["type"], s["mode"], s["image"]) == ("Python", "cluster", JOB_IMAGE)
    assert s["arguments"] == ["/etc/streamq/query.json"] and s["restartPolicy"] == {"type": "Never"}
    assert s["executor"]["instances"] == 2
    assert s["driver"]["labels"]["streamq.io/attempt"] == "1"
    assert cluster.driver_pods("q") == []  # the spark-operator makes the pod, not us
    status = cluster.wait_status("q", lambda st: st.get("driverKind") == "SparkApplication")
    assert status["driver"] == "q-driver-1"

    set_state(cluster, "q-driver-1", "RUNNING")
    kube_apiserver.kubectl("-n", cluster.namespace, "wait", "--for=condition=Ready", "sq/q", "--timeout=60s")

    set_state(cluster, "q-driver-1", "FAILED", "driver container failed with ExitCode: 70")
    wait_app(cluster, "q-driver-2")
    status = cluster.wait_status("q", lambda st: st.get("attempt") == 2)
    assert status["restarts"] == 1
    assert "ExitCode: 70" in status["lastFailure"]["message"]
    assert [a["metadata"]["name"] for a in apps(cluster)] == ["q-driver-2"]


def test_submission_failure_with_never_policy_is_failed(cluster, operator):
    cluster.apply("q", query_spec(RATE_TO_CONSOLE, runtime={"backend": "sparkApplication", "parallelism": 2},
                                 restartPolicy={"type": "Never"}))  # fmt: skip
    wait_app(cluster, "q-driver-1")
    set_state(cluster, "q-driver-1", "SUBMISSION_FAILED", "failed to run spark-submit")
    status = cluster.wait_phase("q", "Failed")
    assert "failed to run spark-submit" in status["message"]
