"""Two operator shards on a real cluster (issue #39): the chart's ``operator.shards`` makes one Deployment
per shard, each over its own namespaces. With one shard's operator gone, an edit is carried out in the
other shard only, the other shard's queries are not touched, and the shard's own queries wait as they
were until its next operator adopts them.

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


def shard_deployment(cluster, shard: str) -> str:
    """deployment/<name> of the shard's operator."""
    out = cluster.kubectl("-n", OPERATOR_NAMESPACE, "get", "deployment", "-l", f"streamq.io/shard={shard}", "-o", "name").stdout
    [name] = out.split()
    return name


def driver(queries: Queries, query: str) -> dict:
    """The query's driver pod, once the operator made it."""
    name = wait_for(lambda: queries.status(query).get("driver"), 120, f"a driver for {query} in {queries.namespace}",
                    interval=1, ignore=(Exception,))  # fmt: skip
    return json.loads(queries.kubectl("get", "pod", name, "-o", "json").stdout)


def test_two_shards_each_reconcile_only_their_namespaces_and_deleting_one_touches_no_query(cluster):
    for namespace in NAMESPACES.values():
        cluster.kubectl("create", "namespace", namespace, check=False)
    served = [E2E_NAMESPACE, RESTRICTED_NAMESPACE, *NAMESPACES.values()]
    shards = [{"name": "a", "namespaces": [E2E_NAMESPACE, RESTRICTED_NAMESPACE, NAMESPACES["a"]]},
              {"name": "b", "namespaces": [NAMESPACES["b"]]}]  # fmt: skip
    a, b = (Queries(cluster, "shards", NAMESPACES[shard]) for shard in ("a", "b"))
    try:
        install_operator(cluster, values=("--set", f"operator.watchNamespaces={{{','.join(served)}}}",
                                          "--set-json", f"operator.shards={json.dumps(shards)}"))  # fmt: skip
        for queries, name in ((a, "q"), (b, "q"), (b, "untouched")):
            queries.apply(name, query_spec(RATE_TO_CONSOLE))
        drivers = {(queries.namespace, name): driver(queries, name) for queries, name in ((a, "q"), (b, "q"), (b, "untouched"))}
        for queries, name in ((a, "q"), (b, "q"), (b, "untouched")):
            queries.wait_phase(name, "Starting", "Pending", timeout=120)

        # 1. shard a's operator gone (its pod deleted, none to replace it): the same edit to a query of each
        # shard is carried out in b only, so nothing but shard a serves a's namespace
        deployment_a = shard_deployment(cluster, "a")
        cluster.kubectl("-n", OPERATOR_NAMESPACE, "scale", deployment_a, "--replicas=0")
        cluster.kubectl("-n", OPERATOR_NAMESPACE, "delete", "pod", "-l", "streamq.io/shard=a", "--wait=true", "--timeout=120s")
        for queries in (a, b):
            queries.patch("q", {"spec": {"suspend": True}})
        b.wait_phase("q", "Suspended", timeout=120)
        gone = drivers[b.namespace, "q"]["metadata"]["name"]
        wait_for(lambda: b.kubectl("get", "pod", gone, check=False).returncode != 0, 120, f"{gone} deleted", interval=1)
        assert a.status("q").get("phase") in ("Starting", "Pending"), a.status("q")
        assert driver(a, "q")["metadata"]["uid"] == drivers[a.namespace, "q"]["metadata"]["uid"]

        # 2. shard b's other query was not touched: the same driver pod, attempt 1
        assert driver(b, "untouched")["metadata"]["uid"] == drivers[b.namespace, "untouched"]["metadata"]["uid"]
        assert b.status("untouched").get("attempt") == 1

        # 3. shard a back: its new operator adopts its query and carries out the edit it missed
        cluster.kubectl("-n", OPERATOR_NAMESPACE, "scale", deployment_a, "--replicas=1")
        a.wait_phase("q", "Suspended", timeout=180)
        assert driver(b, "untouched")["metadata"]["uid"] == drivers[b.namespace, "untouched"]["metadata"]["uid"]
    finally:
        for queries in (a, b):  # while their shards still serve them: their finalizers need an operator
            queries.cleanup()
        install_operator(cluster)  # the session's operator again
        for namespace in NAMESPACES.values():
            cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
