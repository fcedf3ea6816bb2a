"""The operator uninstalled with queries still running (issue #12): `helm uninstall`,
then the queries and their namespace deleted. Nothing may hang: the chart's pre-delete
hook (controller/uninstall.py) stops the operator and removes kopf's finalizer, so the
namespace must be gone within a bound, while the query kept running until it was deleted. The operator is installed again afterwards, as the session's other tests
expect it (a namespace that does hang is unblocked by hand then, and reported).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from testbed.cluster.addons import E2E_NAMESPACE, OPERATOR_NAMESPACE, RELEASE, RESTRICTED_NAMESPACE, install_operator
from testbed.cluster.base import REPO_ROOT
from testbed.cluster.workload import Queries, figure, fraud_spec
from testbed.wait import WaitTimeout, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

GONE_WITHIN_S = 60  # the namespace's own objects need seconds; a finalizer nobody removes, forever


@pytest.mark.slow
def test_uninstall_then_delete_queries_and_namespace(cluster, kafka):
    test = "helm uninstall, then the namespace"
    namespace = f"streamq-uninstall-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("create", "namespace", namespace)
    sq = Queries(cluster, "test_uninstall_then_delete_queries_and_namespace", namespace)
    stuck: list[str] = []
    try:
        # The operator serves the new namespace too (its RBAC and the driver account are bound there).
        cluster.helm("upgrade", RELEASE, str(REPO_ROOT / "charts" / "streamq"), "--namespace", OPERATOR_NAMESPACE,
                     "--reuse-values", "--set", f"operator.watchNamespaces={{{E2E_NAMESPACE},{RESTRICTED_NAMESPACE},{namespace}}}",
                     "--wait", "--timeout", "5m")  # fmt: skip
        names = [sq.name("orphan")]  # one driver at a time fits the node's 2 CPUs
        for name in names:
            source = kafka.create_topic(f"{name}-payments", partitions=2)
            sink = kafka.create_topic(f"{name}-flagged", partitions=1)
            sq.apply(name, fraud_spec(source, sink, None))  # emptyDir: the namespace takes everything with it
        for name in names:
            sq.wait_running(name, timeout=420)
        finalizers = {name: sq.get(name)["metadata"].get("finalizers") for name in names}

        t0 = time.monotonic()
        cluster.helm("uninstall", RELEASE, "--namespace", OPERATOR_NAMESPACE, "--wait", "--timeout", "3m")
        uninstalled_in = time.monotonic() - t0
        wait_for(lambda: not cluster.kubectl_json("-n", OPERATOR_NAMESPACE, "get", "pods")["items"], 120,
                 "the operator's pods gone", interval=1, ignore=(Exception,))  # fmt: skip
        # the hook released the queries and left them running
        after = {name: sq.get(name)["metadata"].get("finalizers") or [] for name in names}
        assert not [n for n, f in after.items() if "streamq.io/finalizer" in f], f"finalizers after the uninstall: {after}"
        drivers = cluster.kubectl_json("-n", namespace, "get", "pods", "-l", "streamq.io/component=driver")["items"]
        assert [p["status"]["phase"] for p in drivers] == ["Running"] * len(names), [p["metadata"]["name"] for p in drivers]

        t1 = time.monotonic()
        deleted = sq.kubectl("delete", "sq", "--all", "--wait=false", timeout=60)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", timeout=60)
        try:
            wait_for(lambda: cluster.kubectl("get", "namespace", namespace, check=False).returncode != 0, GONE_WITHIN_S,
                     f"namespace {namespace} gone", interval=1)  # fmt: skip
            gone_in = time.monotonic() - t1
        except WaitTimeout:
            gone_in = None
            left = cluster.kubectl("-n", namespace, "get", "sq", "-o", "json", check=False).stdout
            stuck = [f"{i['metadata']['name']} (finalizers {i['metadata'].get('finalizers')})"
                     for i in (json.loads(left)["items"] if left.strip() else [])]  # fmt: skip
            conditions = cluster.kubectl("get", "namespace", namespace, "-o", "jsonpath={.status.conditions}", check=False).stdout
            figure(test, f"namespace still Terminating after {GONE_WITHIN_S}s; left: {stuck}; its conditions: {conditions[:600]}")
        figure(test, f"queries {names} Running with finalizers {finalizers}; helm uninstall {uninstalled_in:.0f}s; "
                     f"`kubectl delete sq --all`: {deleted.stdout.strip()!r}; namespace "
                     + (f"gone {gone_in:.0f}s after the deletions" if gone_in is not None
                        else f"NOT gone within {GONE_WITHIN_S}s"))  # fmt: skip
        assert gone_in is not None, (f"namespace {namespace} still there {GONE_WITHIN_S}s after deleting it with the "
                                     f"operator uninstalled: StreamingQueries left {stuck}")  # fmt: skip
    finally:
        # Unblock what hangs (reported above), then the operator back as the session had it.
        for name in sq.names:
            sq.kubectl("patch", "sq", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
        cluster.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false", check=False)
        t2 = time.monotonic()
        install_operator(cluster)
        figure(test, f"operator installed again in {time.monotonic() - t2:.0f}s")
