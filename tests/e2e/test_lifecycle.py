"""Scenarios 3-6: a spec change of the filter, suspend and resume, a query only
Spark refuses, and deletion with everything the operator made for it."""

from __future__ import annotations

import json
import time

import pytest

from testbed.cluster.workload import Output, figure, flagged, fraud_spec, payments, wait_output
from testbed.kube import KubectlError
from testbed.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]


def _amount(record: tuple[str, str]) -> int:
    return json.loads(record[1])["amount"]


# CI time (~80 s): test_upgrade.py changes the same `where` under a steady feed and asserts more
# (nothing lost, the checkpoint kept, the gap), so CI runs that one.
@pytest.mark.slow
def test_filter_change_restarts_on_the_checkpoint(cluster, kafka, sq):
    """Changing the `where` restarts the query on its checkpoint: records already
    processed are not read again, new records go through the new filter."""
    name = sq.name("change")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    spec = fraud_spec(source, sink, cluster.node_dir(name))
    sq.apply(name, spec)
    status = sq.wait_running(name, timeout=420)
    before = payments(90)
    kafka.produce(source, before)
    wait_output(kafka, sink, flagged(before), 240, lambda: sq.describe(name))
    sq.wait_committed(name, source, kafka.end_offsets(source))

    spec["transforms"] = [dict(t) for t in spec["transforms"]]
    spec["transforms"][1] = {"where": "amount < 23"}
    t0 = time.monotonic()
    sq.apply(name, spec)
    changed = sq.wait_running(name, timeout=420, since_attempt=status["attempt"])
    restarted_in = time.monotonic() - t0
    after = payments(90, start=90)
    kafka.produce(source, after)
    expected = flagged(before) + [r for r in after if _amount(r) < 23]
    out = wait_output(kafka, sink, expected, 300, lambda: sq.describe(name))
    figure(
        "filter change",
        f"{out.summary()}; new driver {changed.get('driver')} Running {restarted_in:.0f}s after "
        f"the change; generation {changed.get('observedGeneration')}",
    )
    assert changed["checkpoint"]["location"] == status["checkpoint"]["location"]
    assert changed.get("observedGeneration") == sq.get(name)["metadata"]["generation"]
    assert not out.unexpected, f"the old filter applied to new records, or old records read again: {sorted(out.unexpected)[:5]}"
    assert out.complete, out.summary()


def test_suspend_then_resume(cluster, kafka, sq):
    """Suspended: no driver, nothing processed. Resumed: everything produced meanwhile arrives."""
    name = sq.name("suspend")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    sq.apply(name, fraud_spec(source, sink, cluster.node_dir(name)))
    status = sq.wait_running(name, timeout=420)
    before = payments(60)
    kafka.produce(source, before)
    wait_output(kafka, sink, flagged(before), 240, lambda: sq.describe(name))
    sq.wait_committed(name, source, kafka.end_offsets(source))

    sq.patch(name, {"spec": {"suspend": True}})
    sq.wait_phase(name, "Suspended", timeout=180)
    wait_for(
        lambda: not [c for c in sq.children(name) if c.startswith("pod/")],
        120,
        lambda: "the driver pod gone" + "\n" + sq.describe(name),
        interval=1,
        ignore=(Exception,),
    )
    during = payments(90, start=60)
    kafka.produce(source, during)
    time.sleep(15)  # on purpose: proves that nothing is processed while suspended (no condition to wait for)
    suspended = Output(kafka.read_all(sink), flagged(before))
    processed = set(flagged(during)) & suspended.unique
    figure("suspend/resume", f"while suspended: {len(during)} payments in, {len(processed)} of their flagged records out")
    assert not processed, f"{len(processed)} records processed while suspended"

    t0 = time.monotonic()
    sq.patch(name, {"spec": {"suspend": False}})
    resumed = sq.wait_running(name, timeout=420, since_attempt=status["attempt"])
    resumed_in = time.monotonic() - t0
    out = wait_output(kafka, sink, flagged(before + during), 300, lambda: sq.describe(name))
    figure("suspend/resume", f"after resume: {out.summary()}; Running {resumed_in:.0f}s after the resume")
    assert resumed["checkpoint"]["location"] == status["checkpoint"]["location"]
    assert not out.unexpected and out.complete, out.summary()


def test_query_only_spark_refuses_is_invalid_without_a_crash_loop(cluster, kafka, sq):
    """A UNION in continuous mode: the static rules and the API server accept it,
    Spark's analyser refuses it when the query starts. The status says Invalid with
    Spark's reason and the operator does not restart the driver."""
    name = sq.name("invalid")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    spec = fraud_spec(source, sink, cluster.node_dir(name))
    spec["transforms"] = spec["transforms"] + [{"sql": "SELECT key, value FROM input UNION ALL SELECT key, value FROM input"}]
    sq.apply(name, spec)  # accepted by the API server (CRD schema and CEL rules)
    status = sq.wait_phase(name, "Invalid", timeout=420)
    reason = json.dumps({k: status.get(k) for k in ("message", "lastFailure", "conditions")})
    figure(
        "invalid query",
        f"phase Invalid after attempt {status.get('attempt')}, restarts {status.get('restarts')}: "
        f"{(status.get('lastFailure') or {}).get('message') or status.get('message')}"[:400],
    )
    assert "does not support" in reason and "Union" in reason, reason
    time.sleep(20)  # on purpose: proves it is not retried; long enough for several backoffs (initial 2 s)
    later = sq.status(name)
    assert later["phase"] == "Invalid", later
    assert later.get("attempt") == status.get("attempt") and later.get("restarts", 0) == status.get("restarts", 0), later
    drivers = [c for c in sq.children(name) if c.startswith("pod/")]
    assert len(drivers) <= 1, f"drivers re-created: {drivers}"


def test_kubectl_apply_of_a_spec_over_a_cap_is_refused_by_the_api_server(cluster, sq):
    """The chart's ValidatingAdmissionPolicy (controller/admission.py, from the tenant policy): a spec over
    the executor cap never reaches the store, and kubectl says why with the policy's own message."""
    name = sq.name("over-cap")
    spec = fraud_spec("payments", "flagged", None, **{"runtime.executors": {"instances": 11, "coreRequest": "100m"}})
    with pytest.raises(KubectlError) as refused:
        sq.apply(name, spec)
    message = refused.value.stderr
    figure("apply-time policy", message.strip()[:300])
    assert "ValidatingAdmissionPolicy" in message, message
    assert "spec.runtime.executors.instances: policy.maxExecutors" in message and "at most 10 allowed" in message, message
    assert sq.kubectl("get", "sq", name, check=False).returncode != 0  # not stored


def test_delete_removes_every_child(cluster, kafka, sq):
    """kubectl delete sq: the driver pod and its ConfigMap go (the garbage collector
    of kube-controller-manager follows their owner references)."""
    name = sq.name("delete")
    source = kafka.create_topic(f"{name}-payments", partitions=2)
    sink = kafka.create_topic(f"{name}-flagged", partitions=1)
    sq.apply(name, fraud_spec(source, sink, cluster.node_dir(name)))
    sq.wait_running(name, timeout=420)
    children = sq.children(name)
    assert any(c.startswith("pod/") for c in children) and any(c.startswith("configmap/") for c in children), children
    owners = {c: json.loads(sq.kubectl("get", c, "-o", "json").stdout)["metadata"].get("ownerReferences") for c in children}
    t0 = time.monotonic()
    sq.kubectl("delete", "sq", name, "--wait=true", timeout=180)
    wait_for(
        lambda: not sq.children(name),
        180,
        lambda: "every child gone" + "\n" + "\n".join(sq.children(name)),
        interval=1,
        ignore=(Exception,),
    )
    figure(
        "delete",
        f"children {', '.join(children)} gone {time.monotonic() - t0:.0f}s after kubectl delete; "
        f"owners: {sorted({o[0]['kind'] for o in owners.values() if o})}",
    )
    assert sq.kubectl("get", "sq", name, check=False).returncode != 0
