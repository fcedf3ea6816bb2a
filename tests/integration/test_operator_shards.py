"""Two operator shards, each serving its own namespace (the chart's operator.shards renders them:
tests/integration/test_chart.py): each reconciles only its namespace, and one going away leaves the
other's queries, and its own, as they were."""

from __future__ import annotations

import pytest

from testbed.operator import Cluster, Operator, unique
from testbed.specs import RATE_TO_CONSOLE, query_spec
from testbed.wait import wait_for

pytestmark = pytest.mark.integration


def test_two_shards_each_reconcile_only_their_namespace_and_one_going_away_touches_no_query(
    kube_apiserver, streamq_installed, api_client, tmp_path
):
    shards = {}
    for shard in ("a", "b"):
        namespace = unique(f"shard-{shard}")
        kube_apiserver.kubectl("create", "namespace", namespace)
        cluster = Cluster(kube_apiserver, api_client, namespace)
        shards[shard] = (cluster, Operator(streamq_installed, namespace, tmp_path / f"shard-{shard}.log"))
    (a, op_a), (b, op_b) = shards["a"], shards["b"]
    later: Operator | None = None
    try:
        for cluster, operator in shards.values():
            operator.start()
            cluster.apply("q", query_spec(RATE_TO_CONSOLE))
        uids = {}
        for shard, (cluster, _) in shards.items():
            pod = cluster.wait_driver("q", 1)
            cluster.pod_runs(pod.metadata.name)
            cluster.wait_phase("q", "Running")
            uids[shard] = pod.metadata.uid
        # each shard's operator read and wrote only its own namespace
        for mine, other in (("a", "b"), ("b", "a")):
            log = shards[mine][1].log_path.read_text(errors="replace")
            assert f"/namespaces/{shards[mine][0].namespace}/" in log
            assert f"/namespaces/{shards[other][0].namespace}/" not in log

        op_a.stop()  # shard a's pod is deleted
        # shard b works on: its driver fails, and b restarts it
        b.pod_dies("q-driver-1", 1, "boom")
        b.wait_driver("q", 2)
        # shard a's query was left alone meanwhile: the same driver, no restart, still Running
        assert [(p.metadata.name, p.metadata.uid) for p in a.driver_pods("q")] == [("q-driver-1", uids["a"])]
        assert a.status("q")["phase"] == "Running" and a.status("q").get("restarts", 0) == 0

        # shard a's new pod takes its query over as it is: no new driver, no restart
        later = Operator(streamq_installed, a.namespace, tmp_path / "shard-a-again.log").start()
        wait_for(lambda: f"/namespaces/{a.namespace}/streamingqueries/q " in later.log_path.read_text(errors="replace"),
                 60, "shard a's new operator reads its query")  # fmt: skip
        a.wait_status("q", lambda s: s.get("phase") == "Running", what="Running under shard a's new operator")
        assert [(p.metadata.name, p.metadata.uid) for p in a.driver_pods("q")] == [("q-driver-1", uids["a"])]
        assert [p.metadata.name for p in b.driver_pods("q")] == ["q-driver-2"]  # b's, untouched by a's return
    finally:
        for operator in (op_a, op_b, later):
            if operator is not None:
                operator.stop()
