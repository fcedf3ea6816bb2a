"""Scenario: a driver gets an API token only when it needs one, and then only what it needs.

* A query without executors and without standby: its driver pod has no ServiceAccount token
  (automountServiceAccountToken false, no projected token volume, nothing at the token path).
* A standby query without executors: its driver runs as the query's own account
  ``<query>-lease``, which the API server lets get and update that query's Lease and do nothing
  else (``kubectl auth can-i --as``); the driver holds the Lease with it, and the account, its
  Role and RoleBinding and the Lease are owned by the StreamingQuery.

Both queries read the rate source and print to the console (no broker), side by side."""

from __future__ import annotations

import json
import time

import pytest

from contract.lease import lease_name
from controller import names
from testbed.cluster.workload import figure
from testbed.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def rate_spec(location: str, **runtime) -> dict:
    return {
        "source": {"rate": {"rowsPerSecond": 2, "numPartitions": 1}},
        "sink": {"console": {"numRows": 5}},
        "trigger": {"microBatch": {"interval": "2s"}},
        "checkpoint": {"location": location},
        # two or three JVMs on a 2-core node beside Kafka and the operator: a quarter of a core each
        "runtime": {"parallelism": 1, "driver": {"coreRequest": "250m"}, **runtime},
    }


def _pod(sq, name: str) -> dict:
    """The query's current driver pod, once it runs."""

    def running() -> dict | None:
        driver = sq.status(name).get("driver")
        if not driver:
            return None
        pod = json.loads(sq.kubectl("get", "pod", driver, "-o", "json").stdout)
        return pod if pod["status"].get("phase") == "Running" else None

    return wait_for(running, 420, lambda: f"a running driver of {name}\n{sq.describe(name)}", interval=2, ignore=(Exception,))


def _can_i(sq, account: str, verb: str, what: str) -> bool:
    proc = sq.kubectl("auth", "can-i", verb, what, f"--as=system:serviceaccount:{sq.namespace}:{account}", check=False)
    answer = proc.stdout.strip()
    assert answer in ("yes", "no"), (verb, what, proc.stdout, proc.stderr)
    return answer == "yes"


def _owned_by_the_query(sq, kind: str, name: str, query: dict) -> None:
    obj = json.loads(sq.kubectl("get", kind, name, "-o", "json").stdout)
    owners = obj["metadata"].get("ownerReferences") or []
    assert [(o["kind"], o["name"], o["uid"]) for o in owners] == [
        ("StreamingQuery", query["metadata"]["name"], query["metadata"]["uid"])
    ], (kind, owners)


def test_a_driver_gets_no_token_or_only_its_own_lease(cluster, sq):
    t0 = time.monotonic()
    plain = sq.name("no-token")
    standby = sq.name("lease-only")
    sq.apply(plain, rate_spec("/tmp/streamq/checkpoints/plain"))
    # (a standby query needs a checkpoint both drivers reach: a hostPath on the one node)
    sq.apply(standby, {**rate_spec("/checkpoints/q", standby=True),
                       "checkpoint": {"location": "/checkpoints/q", "volume": {"hostPath": cluster.node_dir(standby)}}})  # fmt: skip

    # --- no executors, no standby: no token at all -------------------------------------------
    pod = _pod(sq, plain)
    spec = pod["spec"]
    assert spec.get("automountServiceAccountToken") is False
    assert spec.get("serviceAccountName") in (None, "default")  # the API server's default; its token is not mounted
    assert not [v for v in spec["volumes"] if "projected" in v or "serviceAccountToken" in json.dumps(v)], spec["volumes"]
    mounts = [m["mountPath"] for c in spec["containers"] for m in c.get("volumeMounts", [])]
    assert not [m for m in mounts if m.startswith("/var/run/secrets/kubernetes.io")], mounts
    looked = sq.kubectl("exec", pod["metadata"]["name"], "-c", "driver", "--", "sh", "-c",
                        f"if [ -e {TOKEN_DIR} ]; then echo present; else echo absent; fi")  # fmt: skip
    assert looked.stdout.strip() == "absent"

    # --- standby, no executors: the query's own account, its own Lease only -------------------
    pod = _pod(sq, standby)
    account, lease = names.lease_access_name(standby), lease_name(standby)
    assert pod["spec"]["serviceAccountName"] == account
    yes = {(verb, what) for verb in ("get", "update") for what in (f"leases.coordination.k8s.io/{lease}",)}
    no = {
        ("get", "leases.coordination.k8s.io/some-other-query-driver"),
        ("update", "leases.coordination.k8s.io/some-other-query-driver"),
        ("create", "leases.coordination.k8s.io"),
        ("delete", f"leases.coordination.k8s.io/{lease}"),
        ("patch", f"leases.coordination.k8s.io/{lease}"),
        ("list", "leases.coordination.k8s.io"),
        ("create", "pods"),
        ("delete", "pods"),
        ("patch", "pods"),
        ("get", "pods"),
        ("get", "secrets"),
        ("list", "secrets"),
        ("create", "configmaps"),
        ("create", "rolebindings.rbac.authorization.k8s.io"),
        ("update", "streamingqueries.streamq.io"),
    }
    answers = {(verb, what): _can_i(sq, account, verb, what) for verb, what in sorted(yes | no)}
    assert {k for k, v in answers.items() if v} == yes, answers
    # the driver really holds the Lease, with that account (the operator made it free; no create)
    holder = wait_for(lambda: json.loads(sq.kubectl("get", "lease", lease, "-o", "json").stdout)["spec"].get("holderIdentity"),
                      120, f"a holder of lease {lease}", interval=2, ignore=(Exception,))  # fmt: skip
    assert holder == pod["metadata"]["name"]
    query = sq.get(standby)
    for kind, name in (("serviceaccount", account), ("role", account), ("rolebinding", account), ("lease", lease)):
        _owned_by_the_query(sq, kind, name, query)
    figure("least privilege", f"no token without executors or standby; {account} may get/update lease {lease} only "
                              f"({len(no)} other requests refused); checked in {time.monotonic() - t0:.0f}s")  # fmt: skip
