"""Two operator shards on a real cluster (issue #39): the chart's ``operator.shards`` makes one Deployment
per shard, each over its own namespaces. Each reconciles only its own; deleting one shard's operator pod
leaves the other shard's queries served and its own queries as they were, until its successor adopts them.

The queries' drivers never run: their checkpoint claim does not exist in the shard namespaces, so each
driver pod waits Pending and costs the node nothing. What is tested is the operators. The session's
operator (one Deployment, no shards) is installed again at the end.
"""

from __future__ import annotations

import json

import pytest

from testbed.cluster.addons import E2E_NAMESPACE, OPERATOR_NAMESPACE, RESTRICTED_NAMESPACE, install_operator
from testbed.cluster.workload import Queries
from testbed.specs import RATE_TO_CONSOLE, query_spec
from testbed.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NAMESPACES = {"a": "streamq-shard-a", "b": "streamq-shard-b"}


def operator_pods(cluster, shard: str) -> list[dict]:
    """The shard's operator pods that are not going away."""
    out = cluster.kubectl("-n", OPERATOR_NAMESPACE, "get", "pods", "-l", f"streamq.io/shard={shard}", "-o", "json").stdout
    return [p for p in json.loads(out)["items"] if not p["metadata"].get("deletionTimestamp")]


def ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions", []))


def operator_log(cluster, shard: str) -> str:
    return cluster.kubectl("-n", OPERATOR_NAMESPACE, "logs", "-l", f"streamq.io/shard={shard}", "--tail=-1", check=False).stdout


def driver(queries: Queries) -> dict:
    """The query's driver pod, once the operator made it."""
    name = wait_for(lambda: queries.status("q").get("driver"), 120, f"a driver for q in {queries.namespace}", interval=1,
                    ignore=(Exception,))  # fmt: skip
    return json.loads(queries.kubectl("get", "pod", name, "-o", "json").stdout)


def test_two_shards_each_reconcile_only_their_namespaces_and_deleting_one_touches_no_query(cluster):
    for namespace in NAMESPACES.values():
        cluster.kubectl("create", "namespace", namespace, check=False)
    served = [E2E_NAMESPACE, RESTRICTED_NAMESPACE, *NAMESPACES.values()]
    shards = [{"name": "a", "namespaces": [E2E_NAMESPACE, RESTRICTED_NAMESPACE, NAMESPACES["a"]]},
              {"name": "b", "namespaces": [NAMESPACES["b"]]}]  # fmt: skip
    queries = {shard: Queries(cluster, "shards", namespace) for shard, namespace in NAMESPACES.items()}
    try:
        install_operator(cluster, values=("--set", f"operator.watchNamespaces={{{','.join(served)}}}",
                                          "--set-json", f"operator.shards={json.dumps(shards)}"))  # fmt: skip
        for q in queries.values():
            q.apply("q", query_spec(RATE_TO_CONSOLE))
        drivers = {shard: driver(q) for shard, q in queries.items()}
        for q in queries.values():
            q.wait_phase("q", "Starting", "Pending", timeout=120)

        # 1. each shard's operator read and wrote only its own namespaces
        for mine, other in (("a", "b"), ("b", "a")):
            log = operator_log(cluster, mine)
            assert f"[{NAMESPACES[mine]}/q]" in log, log[-3000:]
            assert NAMESPACES[other] not in log, f"shard {mine}'s operator touched {NAMESPACES[other]}:\n{log[-3000:]}"

        # 2. shard a's operator pod deleted: shard b serves on (its query is suspended while a is away)
        [pod_a] = operator_pods(cluster, "a")
        cluster.kubectl("-n", OPERATOR_NAMESPACE, "delete", "pod", pod_a["metadata"]["name"], "--wait=false")
        queries["b"].patch("q", {"spec": {"suspend": True}})
        queries["b"].wait_phase("q", "Suspended", timeout=120)
        wait_for(lambda: queries["b"].kubectl("get", "pod", drivers["b"]["metadata"]["name"], check=False).returncode != 0,
                 120, "shard b's suspended driver gone", interval=1)  # fmt: skip

        # 3. shard a's successor adopts its queries: the same driver pod, attempt 1, and it acts on an edit
        successor = wait_for(lambda: next((p for p in operator_pods(cluster, "a")
                                           if p["metadata"]["uid"] != pod_a["metadata"]["uid"] and ready(p)), None),
                             180, "shard a's new operator pod Ready", interval=1, ignore=(Exception,))  # fmt: skip
        assert successor is not None
        after = driver(queries["a"])
        assert after["metadata"]["uid"] == drivers["a"]["metadata"]["uid"], "shard a's query lost its driver pod"
        assert queries["a"].status("q").get("attempt") == 1
        queries["a"].patch("q", {"spec": {"suspend": True}})
        queries["a"].wait_phase("q", "Suspended", timeout=120)
        assert NAMESPACES["b"] not in operator_log(cluster, "a")
    finally:
        for q in queries.values():  # while their shards still serve them: their finalizers need an operator
            q.cleanup()
        install_operator(cluster)  # the session's operator again
        for namespace in NAMESPACES.values():
            cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
