"""Faults of the control plane (issue #12), injected for real on the session's cluster:

* two operator replicas with kopf's peering, the active one dead mid-reconcile: the
  failpoint exit-after-create (contract.failpoints) makes it exit 137 right after it
  created the driver pod of a new query and before it recorded it in the status, every
  run, whatever the timing; the other takes over, and there are never two driver pods
  for the query (polled all along);
* the kube-apiserver stopped for 60 s: the drivers keep processing (records keep
  arriving on the output topic), the operator acts on a spec change made after it is back;
* the kubelet restarted, then containerd: the running query is Running again.

Nothing is lost in any of them; duplicates are counted. The apiserver, kubelet and
containerd faults need a node this run can reach: the local provider's own (it runs those
processes) or a kind node (systemd in its container; the apiserver is a static pod).
"""

from __future__ import annotations

import json
import time

import pytest

from contract import failpoints
from contract.failpoints import Failpoint
from testbed.cluster.addons import OPERATOR_NAMESPACE, RELEASE
from testbed.cluster.base import REPO_ROOT
from testbed.cluster.workload import DriverWatch, figure, flagged, fraud_spec, payments, wait_output
from testbed.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

RATE = 30  # payments per second while the fault hits: 10 flagged per second
INTERVAL_S = 1  # trigger.continuous.checkpointInterval
EPOCH = RATE * INTERVAL_S // 3  # flagged records per checkpoint interval
OPERATOR_PODS = "app.kubernetes.io/component=operator"


def _own_node(cluster) -> None:
    if cluster.provider == "local" and getattr(cluster, "kube", None) is None:
        pytest.skip(
            "needs the local provider's own cluster (it runs kube-apiserver, kubelet and containerd as processes), "
            "not one another process brought up"
        )


def _start(cluster, kafka, sq, base: str):
    name = sq.name(base)
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    sq.apply(name, fraud_spec(source, sink, cluster.node_dir(name)))
    status = sq.wait_running(name, timeout=420)
    first = payments(90)
    kafka.produce(source, first)
    wait_output(kafka, sink, flagged(first), 240, lambda: sq.describe(name))
    return name, source, sink, status, first


def _flagged_out(kafka, sink: str, records) -> int:
    return len(set(flagged(records)) & set(kafka.read_all(sink)))


# ---------------------------------------------------------------------- operator replicas


def _helm_operator(cluster, *values: str, env: list[dict] | None = None) -> float:
    """The chart upgraded with ``values`` (--set), the operator's extraEnv set to ``env`` ([] clears it)."""
    t0 = time.monotonic()
    extra = ["--set-json", f"operator.extraEnv={json.dumps(env)}"] if env is not None else []
    cluster.helm("upgrade", RELEASE, str(REPO_ROOT / "charts" / "streamq"), "--namespace", OPERATOR_NAMESPACE,
                 "--reuse-values", *[a for v in values for a in ("--set", v)], *extra, "--wait", "--timeout", "5m")  # fmt: skip
    return time.monotonic() - t0


def _operator_container(cluster, pod: str) -> dict:
    pod_ = cluster.kubectl_json("-n", OPERATOR_NAMESPACE, "get", "pod", pod)
    return next(c for c in pod_["status"]["containerStatuses"] if c["name"] == "operator")


def _exit_code(container: dict) -> int | None:
    """The exit code of the container's last run that ended (None: none ended yet)."""
    ended = (container.get("state") or {}).get("terminated") or (container.get("lastState") or {}).get("terminated")
    return ended.get("exitCode") if ended else None


def _operator_pods(cluster) -> list[dict]:
    pods = cluster.kubectl_json("-n", OPERATOR_NAMESPACE, "get", "pods", "-l", OPERATOR_PODS)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _peers(cluster, namespace: str) -> dict[str, dict]:
    """The KopfPeering of the namespace: peer id (the operator pod's name) -> priority, lastseen..."""
    items = cluster.kubectl_json("-n", namespace, "get", "kopfpeerings")["items"]
    return (items[0].get("status") or {}) if items else {}


@pytest.mark.slow  # minutes on a 2-core machine: `hack/test.sh -m slow` (CI time, tests/e2e/README.md)
def test_two_operators_active_killed_mid_reconcile(cluster, kafka, sq):
    test = "operator replicas, active killed"
    # Both replicas are armed; only the one that creates a driver reaches the point. The other
    # adopts the driver it finds (one that created a second would exit too, and fail the test).
    armed = [{"name": failpoints.ENV, "value": Failpoint.EXIT_AFTER_CREATE.value}]
    upgraded = _helm_operator(cluster, "operator.replicas=2", "operator.peering.enabled=true", env=armed)
    try:

        def two_peers() -> dict | None:
            pods = {p["metadata"]["name"] for p in _operator_pods(cluster)
                    if all(c.get("ready") for c in p["status"].get("containerStatuses") or [{}])}  # fmt: skip
            peers = _peers(cluster, sq.namespace)
            live = {k: v for k, v in peers.items() if k in pods}
            return live if len(pods) == 2 and len(live) == 2 else None

        peers = wait_for(two_peers, 180, lambda: "2 operator replicas in the KopfPeering\n" + json.dumps(_peers(cluster, sq.namespace)),
                         interval=1, ignore=(Exception,))  # fmt: skip
        active = max(peers, key=lambda k: int(peers[k].get("priority") or 0))
        standby = next(k for k in peers if k != active)

        name = sq.name("ha")
        source = kafka.create_topic(f"{name}-payments", partitions=2)
        sink = kafka.create_topic(f"{name}-flagged", partitions=1)
        first = payments(90)
        kafka.produce(source, first)
        with DriverWatch(sq, name, interval=0.25) as drivers:
            sq.apply(name, fraud_spec(source, sink, cluster.node_dir(name)))
            # Mid-reconcile: the active operator created the driver pod and exited before writing the status.
            wait_for(lambda: drivers.seen, 120, f"the first driver pod of {name}", interval=0.1)
            exited = wait_for(lambda: _exit_code(_operator_container(cluster, active)), 60,
                              f"the active operator {active} exited at the failpoint", interval=0.2, ignore=(Exception,))  # fmt: skip
            status_then = sq.status(name)
            killed_at = time.monotonic()
            # Its pod goes too (kubelet would restart the container in place): the other replica takes over.
            cluster.kubectl("-n", OPERATOR_NAMESPACE, "delete", "pod", active, "--grace-period=0", "--force", "--wait=false")
            status = sq.wait_running(name, timeout=420)
            running_after = time.monotonic() - killed_at
            second = payments(90, start=90)
            kafka.produce(source, second)
            out = wait_output(kafka, sink, flagged(first + second), 300, lambda: sq.describe(name))
        peers_after = _peers(cluster, sq.namespace)
        working = max(peers_after, key=lambda k: int(peers_after[k].get("priority") or 0)) if peers_after else None
        figure(
            test,
            f"{len(first) + len(second)} payments in, {out.summary()}; operators {active} (active, exit {exited} "
            f"after creating driver {sorted(drivers.seen)}; status then: driver {status_then.get('driver')}) and {standby}; "
            f"Running {running_after:.0f}s after the kill, peering now led by {working}; driver pods at once: at most "
            f"{drivers.most} in {drivers.samples} samples; attempt {status.get('attempt')}; chart upgrade {upgraded:.0f}s",
        )
        assert exited == 137, f"the failpoint was not reached: {active} ended with {exited}"
        assert drivers.most <= 1, f"two driver pods at once: {drivers.overlaps[:3]}"
        assert status.get("attempt") == 1 and len(drivers.seen) == 1, (status.get("attempt"), sorted(drivers.seen))
        assert not out.unexpected, sorted(out.unexpected)[:5]
        assert out.complete, out.summary()
    finally:
        restored = _helm_operator(cluster, "operator.replicas=1", "operator.peering.enabled=false", env=[])
        wait_for(lambda: len(_operator_pods(cluster)) == 1, 120, "one operator pod again", interval=1, ignore=(Exception,))
        figure(test, f"chart back to 1 standalone replica in {restored:.0f}s")


# ---------------------------------------------------------------------- API server


@pytest.mark.slow  # 3-4 minutes: `hack/test.sh -m slow`
def test_apiserver_stopped_60s(cluster, kafka, sq):
    _own_node(cluster)
    test = "apiserver stopped 60 s"
    outage_s = 60
    name, source, sink, status, first = _start(cluster, kafka, sq, "apiserver")
    during = payments(RATE * (outage_s + 30), start=len(first))  # paced through the whole outage and beyond
    producer = kafka.produce_paced(source, during, RATE)
    wait_for(lambda: _flagged_out(kafka, sink, during) >= 2 * EPOCH, 30, "the paced payments flowing", interval=1)
    cluster.stop_apiserver()
    stopped_at = time.monotonic()
    samples: list[tuple[float, int]] = []
    try:
        while time.monotonic() - stopped_at < outage_s:
            samples.append((time.monotonic() - stopped_at, _flagged_out(kafka, sink, during)))
            time.sleep(5)  # sampling a fixed-length outage, not waiting for a condition
    finally:
        cluster.start_apiserver()
    down_for = time.monotonic() - stopped_at
    producer.join(120)
    back = sq.wait_running(name, timeout=300)
    last = payments(60, start=len(first) + len(during))
    kafka.produce(source, last)
    source_records = kafka.read_all(source)
    out = wait_output(kafka, sink, flagged(source_records), 300, lambda: sq.describe(name))

    # The operator works again: a spec change made now is acted on.
    generation = sq.get(name)["metadata"]["generation"]
    t0 = time.monotonic()
    sq.patch(name, {"spec": {"suspend": True}})
    suspended = sq.wait_phase(name, "Suspended", timeout=180)
    acted_in = time.monotonic() - t0
    growth = samples[-1][1] - samples[0][1] if samples else 0
    figure(
        test,
        f"{len(source_records)} payments in, {out.summary()}; apiserver down {down_for:.0f}s; flagged records "
        f"out during the outage: {' '.join(f'{t:.0f}s:{n}' for t, n in samples)} (+{growth}); driver "
        f"{status.get('driver')} -> {back.get('driver')} (restarts {back.get('restarts')}); spec change "
        f"(suspend, generation {generation + 1}) acted on in {acted_in:.0f}s (observedGeneration "
        f"{suspended.get('observedGeneration')})",
    )
    assert growth >= 3 * EPOCH, f"the output did not grow while the apiserver was down: {samples}"
    late = [n for t, n in samples if t >= outage_s / 2]
    assert late and late[-1] > late[0], f"the output stopped growing in the second half of the outage: {samples}"
    assert not out.unexpected, sorted(out.unexpected)[:5]
    assert out.complete, out.summary()
    assert suspended.get("observedGeneration") == generation + 1
    wait_for(
        lambda: not [c for c in sq.children(name) if c.startswith("pod/")], 120, "the driver pod gone (suspended)", interval=1
    )


# ---------------------------------------------------------------------- kubelet, containerd


def test_kubelet_and_containerd_restarted(cluster, kafka, sq):
    _own_node(cluster)
    test = "kubelet and containerd restarted"
    name, source, sink, status, first = _start(cluster, kafka, sq, "node-restart")
    driver = sq.driver_pod(name)
    during = payments(RATE * 40, start=len(first))
    producer = kafka.produce_paced(source, during, RATE)
    wait_for(lambda: _flagged_out(kafka, sink, during) >= 2 * EPOCH, 30, "the paced payments flowing", interval=1)
    times = {}
    for component in ("kubelet", "containerd"):
        t0 = time.monotonic()
        cluster.restart_node_component(component)
        restarted = time.monotonic() - t0
        seen = _flagged_out(kafka, sink, during)
        # Running, and still processing: the output grows after the restart.
        st = sq.wait_running(name, timeout=300)
        wait_for(lambda: _flagged_out(kafka, sink, during) > seen or not producer.is_alive(), 120,  # noqa: B023
                 f"output growing after the {component} restart", interval=1)  # fmt: skip
        times[component] = (restarted, time.monotonic() - t0, st.get("driver"), st.get("attempt"))

    def node_ready() -> bool:
        node = cluster.kubectl_json("get", "nodes")["items"][0]
        return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])

    wait_for(node_ready, 120, "the node Ready", interval=1, ignore=(Exception,))
    producer.join(120)
    back = sq.wait_running(name, timeout=300)
    last = payments(60, start=len(first) + len(during))
    kafka.produce(source, last)
    source_records = kafka.read_all(source)
    out = wait_output(kafka, sink, flagged(source_records), 300, lambda: sq.describe(name))
    after = sq.driver_pod(name)
    restarts_in_pod = sum(c.get("restartCount", 0) for c in after["status"].get("containerStatuses") or [])
    figure(test, f"{len(source_records)} payments in, {out.summary()}; " + "; ".join(
        f"{c}: back in {r:.0f}s, query Running and output growing {w:.0f}s after the restart (driver {d}, attempt {a})"
        for c, (r, w, d, a) in times.items()) + f"; driver pod {driver['metadata']['name']} -> {after['metadata']['name']} "
        f"(container restarts {restarts_in_pod}, query restarts {back.get('restarts')})")  # fmt: skip
    assert not out.unexpected, sorted(out.unexpected)[:5]
    assert out.complete, out.summary()
