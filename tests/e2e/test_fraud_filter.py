"""Scenario 1: the fraud filter in continuous mode, records Kafka -> Spark -> Kafka
through the driver pod the operator creates. Scenario 7: the same with executors
as pods, started by Spark's Kubernetes scheduler from the driver."""

from __future__ import annotations

import json
import time

import pytest

from testbed.cluster.addons import E2E_PRIORITY_CLASS
from testbed.cluster.workload import figure, flagged, fraud_spec, payments, wait_output
from testbed.kube import KubectlError

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

N = 300  # payments in; every third is flagged
TOLERATION = {"key": "example.com/dedicated", "operator": "Equal", "value": "streaming", "effect": "NoSchedule"}


def _run_fraud_filter(cluster, kafka, sq, name: str, spec_extra: dict, test: str, pod_check=None,
                      node_checkpoint: bool = True) -> None:  # fmt: skip
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    first, second = payments(N // 2), payments(N - N // 2, start=N // 2)
    kafka.produce(source, first)  # before the query starts: read from the earliest offset
    t0 = time.monotonic()
    sq.apply(name, fraud_spec(source, sink, cluster.node_dir(name) if node_checkpoint else None, **spec_extra))
    status = sq.wait_running(name, timeout=420)
    started = time.monotonic() - t0
    if pod_check is not None:
        pod_check(name)
    kafka.produce(source, second)  # while it runs
    expected = flagged(first + second)
    out = wait_output(kafka, sink, expected, 300, lambda: sq.describe(name))
    figure(
        test,
        f"{N} payments in, {out.summary()}; Running {started:.0f}s after apply "
        f"(driver {status.get('driver')}, attempt {status.get('attempt')})",
    )
    assert not out.unexpected, f"records that are not flagged payments: {sorted(out.unexpected)[:5]}"
    assert out.complete, out.summary()


def test_fraud_filter_continuous(cluster, kafka, sq):
    """N payments in, exactly the flagged ones out (at least once: duplicates are counted)."""
    _run_fraud_filter(cluster, kafka, sq, sq.name("fraud"), {}, "fraud filter (continuous)")


def test_fraud_filter_with_executor_pods(cluster, kafka, sq_restricted):
    """spec.runtime.executors.instances = 2: the driver starts two executor pods through
    Spark's Kubernetes scheduler (client mode); the output is the same as without them.
    In a namespace that enforces Pod Security "restricted": the driver and the executors
    (from the operator's pod template) pass it; a hostPath could not, so the checkpoint is an emptyDir."""
    sq = sq_restricted
    refused = sq.kubectl("run", "privileged-probe", "--image=streamq:0.1.0", "--restart=Never", "--privileged",
                         "--dry-run=server", check=False)  # fmt: skip
    assert refused.returncode != 0 and "PodSecurity" in refused.stderr, refused.stderr  # the namespace enforces
    name = sq.name("fraud-exec")
    # Placed as a platform places streaming pods (the policy allows these: testbed.cluster.addons.E2E_POLICY)
    sq.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": E2E_PRIORITY_CLASS},
                "value": 1000,
            }
        ),
    )
    placed = {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [TOLERATION],
        "priorityClassName": E2E_PRIORITY_CLASS,
        "labels": {"example.com/cost-center": "e2e"},
        "annotations": {"example.com/owner": "streamq-e2e"},
    }
    runtime = {
        "parallelism": 4,
        "driver": {"cores": 1, "memory": "1536Mi", **placed},
        # The node has 2 CPUs: executors ask for a quarter each instead of their 2 cores.
        "executors": {"instances": 2, "cores": 2, "memory": "1Gi", "coreRequest": "250m", **placed},
    }

    def executors_run(query: str) -> None:
        from testbed.wait import wait_for

        def running() -> list[str] | None:
            out = sq.kubectl(
                "get",
                "pods",
                "-l",
                f"streamq.io/query={query},streamq.io/component=executor",
                "-o",
                'jsonpath={range .items[*]}{.metadata.name}={.status.phase}{"\\n"}{end}',
            ).stdout
            pods = [line for line in out.splitlines() if line.endswith("=Running")]
            return pods if len(pods) >= 2 else None

        pods = wait_for(
            running, 300, lambda: "2 executor pods Running" + "\n" + sq.describe(query), interval=2, ignore=(Exception,)
        )
        print(sq.kubectl("get", "pods", "-l", f"streamq.io/query={query}", "-o", "wide").stdout)
        # Spark's RPC is authenticated with the query's own Secret (the executors would not
        # register without it), read from a file: the key is in no pod's spec.
        import json

        from controller.names import auth_secret_name

        secret = json.loads(sq.kubectl("get", "secret", auth_secret_name(query), "-o", "json").stdout)
        assert [o["kind"] for o in secret["metadata"]["ownerReferences"]] == ["StreamingQuery"]
        spec_of_pods = sq.kubectl("get", "pods", "-l", f"streamq.io/query={query}", "-o", "json").stdout
        for value in secret["data"].values():  # base64 of what Spark uses: the file and the key itself
            assert value not in spec_of_pods
        for pod in json.loads(spec_of_pods)["items"]:
            where = f"{pod['metadata']['name']}: {pod['spec']}"
            assert pod["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}, where
            assert TOLERATION in pod["spec"]["tolerations"], where
            assert (pod["spec"]["priorityClassName"], pod["spec"]["priority"]) == (E2E_PRIORITY_CLASS, 1000), where
            assert pod["metadata"]["labels"]["example.com/cost-center"] == "e2e", where
            assert pod["metadata"]["annotations"]["example.com/owner"] == "streamq-e2e", where
            if pod["metadata"]["labels"].get("streamq.io/component") == "executor":  # Spark never needs a token there
                assert pod["spec"].get("automountServiceAccountToken") is False, pod["metadata"]["name"]
            for env in pod["spec"]["containers"][0].get("env", []):
                if env["name"] == "_SPARK_AUTH_SECRET":
                    assert "value" not in env and env["valueFrom"]["secretKeyRef"]["name"] == secret["metadata"]["name"]
        figure("fraud filter (executor pods)", f"executor pods: {', '.join(p.split('=')[0] for p in pods)}")

    _run_fraud_filter(cluster, kafka, sq, name, {"runtime": runtime}, "fraud filter (executor pods, restricted)", executors_run,
                      node_checkpoint=False)  # fmt: skip

    # What the platform does not allow is refused, naming the field: a priority class, a toleration key
    for field, value, policy in [("priorityClassName", "system-cluster-critical", "allowedPriorityClasses"),
                                 ("tolerations", [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                                                   "effect": "NoSchedule"}], "allowedTolerationKeys")]:  # fmt: skip
        refused = sq.name("fraud-placed")
        spec = fraud_spec("payments", "flagged", None, **{f"runtime.driver.{field}": value})
        try:  # refused by the API server (the chart's admission policy), or else by the operator
            sq.apply(refused, spec)
        except KubectlError as exc:
            message = exc.stderr
        else:
            message = sq.wait_phase(refused, "Invalid", timeout=60)["message"]
        assert f"spec.runtime.driver.{field}" in message and policy in message, message
        assert not sq.kubectl("get", "pods", "-l", f"streamq.io/query={refused}", "-o", "name").stdout.strip()
