"""A StreamingQuery is not a key to the cluster: every hostile spec is refused on a real
API server, by the CRD (static limits) or by the operator's policy, with the rule it
broke named where the user looks, and no pod is ever created."""

from __future__ import annotations

import json
import signal

import pytest

from contract.names import LABEL_CREDENTIALS
from controller import names
from testbed.jobs import JobProcess
from testbed.specs import query_spec
from testbed.wait import wait_for
from tests.hostile_specs import REFUSED_BY_LIMITS, REFUSED_BY_POLICY, REFUSED_BY_RULES

pytestmark = pytest.mark.integration


def _name(case: str) -> str:
    """A query name (a DNS-1035 label of at most 40 characters) per case."""
    return ("h-" + "".join(c if c.isalnum() else "-" for c in case.lower()).strip("-"))[:40].strip("-")


def test_the_crd_refuses_specs_past_its_limits(cluster):
    for case, (spec, path, _, _, _) in sorted(REFUSED_BY_LIMITS.items()):
        done = cluster.apply(_name(case), spec, check=False)
        assert done.returncode != 0, f"{case}: accepted by the API server"
        field = path.removeprefix("spec.").split("[", 1)[0].split(".", 1)[0]
        assert field in done.stderr, f"{case}: {done.stderr[-500:]}"
        assert cluster.get(_name(case)) is None, case
    assert cluster.core.list_namespaced_pod(cluster.namespace).items == []


def test_the_operator_refuses_specs_outside_the_policy_before_any_pod(cluster, operator):
    """The operator runs with the chart's default policy; the query's namespace is the test's
    own, so rules that depend on the namespace (the operator's account) name the rule that
    applies there."""
    applied = {}
    for case, (spec, namespace, path, rule) in sorted(REFUSED_BY_POLICY.items()):
        cluster.apply(_name(case), spec)
        applied[case] = (path, rule if namespace in ("team-a", None) else "policy.")
    for case, (path, rule) in applied.items():
        status = cluster.wait_phase(_name(case), "Invalid")
        assert f"{path}: {rule}" in status["message"], f"{case}: {status['message']}"
        invalid = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert invalid["status"] == "False" and invalid["reason"] == "PolicyViolation", (case, invalid)
        cluster.wait_event(_name(case), "PolicyViolation")
    assert cluster.core.list_namespaced_pod(cluster.namespace).items == []
    assert not [cm.metadata.name for cm in cluster.core.list_namespaced_config_map(cluster.namespace).items
                if cm.metadata.name.startswith("h-")]  # fmt: skip


def test_the_operator_refuses_statements_relations_and_text_the_job_must_never_run(cluster, operator):
    """The spec's own rules (what a SQL step or an expression may be): Invalid with the
    field named, an event, and no pod or ConfigMap."""
    for case, (spec, _, _) in sorted(REFUSED_BY_RULES.items()):
        cluster.apply(_name(case), spec)
    for case, (_, path, says) in sorted(REFUSED_BY_RULES.items()):
        status = cluster.wait_phase(_name(case), "Invalid")
        assert f"{path}: " in status["message"] and says in status["message"], f"{case}: {status['message']}"
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        # InvalidSpec; PolicyViolation when the same text also calls a function the policy refuses
        assert ready["status"] == "False" and ready["reason"] in ("InvalidSpec", "PolicyViolation"), (case, ready)
    assert cluster.core.list_namespaced_pod(cluster.namespace).items == []
    assert not [cm.metadata.name for cm in cluster.core.list_namespaced_config_map(cluster.namespace).items
                if cm.metadata.name.startswith("h-")]  # fmt: skip


PASSWORD = "s3cr3t-Pa55-7f0c2e"


def test_a_password_in_a_secret_appears_nowhere_the_operator_writes(cluster, operator, kube_apiserver):
    """The Secret is referenced, never copied: not into the ConfigMap, the pod, status or
    events; and a spec that puts the same value into sparkConf is refused without echoing it."""
    from kubernetes import client

    cluster.core.create_namespaced_secret(cluster.namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="streamq-kafka-creds", labels={LABEL_CREDENTIALS: "true"}),
        string_data={"username": "app", "password": PASSWORD}))  # fmt: skip
    auth = {"secretRef": {"name": "streamq-kafka-creds"}}
    ok = query_spec(**{"source.kafka.auth": auth, "sink.kafka.auth": auth})
    cluster.apply("creds", ok)
    cluster.wait_driver("creds", 1)
    cluster.apply("creds-in-conf", query_spec(**{"runtime.sparkConf": {"spark.hadoop.fs.s3a.secret.key": PASSWORD}}))
    refused = cluster.wait_phase("creds-in-conf", "Invalid")
    assert "policy.secretSparkConf" in refused["message"]
    cluster.pod_dies("creds-driver-1", 70, "QUERY_FAILED: broker refused login")
    cluster.wait_status("creds", lambda s: s.get("restarts", 0) >= 1 or s.get("phase") == "Restarting")
    seen = [
        json.dumps([cluster.status("creds"), cluster.status("creds-in-conf")]),  # the spec is the user's own text
        kube_apiserver.kubectl("-n", cluster.namespace, "get", "events", "-o", "json").stdout,
        kube_apiserver.kubectl("-n", cluster.namespace, "get", "configmaps", "-o", "json").stdout,
        kube_apiserver.kubectl("-n", cluster.namespace, "get", "pods", "-o", "json").stdout,
        operator.log_tail(10_000),
    ]
    for text in seen:
        assert PASSWORD not in text
    assert "streamq-kafka-creds" in seen[3] and "streamq-kafka-creds" in seen[2]  # referenced by name, mounted by the pod


def test_console_rows_of_a_real_driver_carry_the_password_and_nothing_the_operator_writes_does(
    cluster, start_operator, kube_apiserver, kafka_broker, kafka_topic, kubelet, tmp_path
):
    """The password of the tenant's Secret is in the records its query reads, and the console
    sink prints those rows: the driver runs for real (the job from the document the operator
    wrote, real Spark and Kafka), its log holds the password, and the operator reads that log
    for progress. Status, events, ConfigMaps, pods, Secrets and the operator's log must not."""
    from kubernetes import client

    operator = start_operator(STREAMQ_PROGRESS_INTERVAL_SECONDS="1")
    cluster.core.create_namespaced_secret(cluster.namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="kafka-creds"), string_data={"username": "app", "password": PASSWORD}))  # fmt: skip
    topic = kafka_topic()
    kafka_broker.produce(topic, [(f"k{i}", json.dumps({"id": i, "note": f"pin {PASSWORD}"})) for i in range(5)])
    spec = query_spec(bootstrap=kafka_broker.bootstrap, topic=topic, location=tmp_path / "ck", mode="microBatch",
                      transforms=[{"select": ["CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"]}],
                      sink={"console": {"numRows": 20, "truncate": False}}, runtime={"parallelism": 2})  # fmt: skip
    cluster.apply("rows", spec)
    pod = cluster.wait_driver("rows", 1).metadata.name
    document = tmp_path / "query.json"
    document.write_text(json.dumps(cluster.query_document("rows")))
    kubelet.bind(cluster.core, cluster.namespace, pod, kubelet.node)
    job = JobProcess(document, tmp_path, env={"STREAMQ_WATCH_PERIOD_SECONDS": "1", "STREAMQ_REPORT_PERIOD_SECONDS": "1"})
    kubelet.serve(cluster.namespace, pod, names.DRIVER_CONTAINER, job.log_path)
    cluster.pod_runs(pod)
    try:
        wait_for(lambda: PASSWORD in job.log(), 180, lambda: "the console rows in the driver's log\n" + job.log()[-3000:])
        # the operator has read the log since the rows were printed: the progress after them is in status
        printed = len(job.records())
        wait_for(lambda: len(job.records()) > printed, 60, "a progress record after the rows")
        cluster.wait_status("rows", lambda s: (s.get("progress") or {}).get("totalLag") == 0, timeout=60,
                            what="the progress after the rows in status")  # fmt: skip
        assert PASSWORD in kube_apiserver.kubectl("-n", cluster.namespace, "logs", pod).stdout  # the API serves those rows
        job.signal(signal.SIGTERM)
        code = job.wait(60)
    finally:
        job.stop()
    cluster.pod_dies(pod, code or 70, job.termination_message() or "stopped")
    cluster.wait_status("rows", lambda s: s.get("phase") != "Running", what="the driver's end in status")
    seen = {
        "status": json.dumps(cluster.status("rows")),
        "events": kube_apiserver.kubectl("-n", cluster.namespace, "get", "events", "-o", "json").stdout,
        "configmaps": kube_apiserver.kubectl("-n", cluster.namespace, "get", "configmaps", "-o", "json").stdout,
        "pods": kube_apiserver.kubectl("-n", cluster.namespace, "get", "pods", "-o", "json").stdout,
        "operator log": operator.log_tail(10_000),
    }
    for where, text in seen.items():
        assert PASSWORD not in text, where
