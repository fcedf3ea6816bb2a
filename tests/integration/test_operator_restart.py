"""The operator dies (SIGKILL) in the middle of its work and starts again: no duplicate
drivers, no failure counted twice, a status that matches the world."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from controller import names
from controller.status import parse_time
from testbed.specs import RATE_TO_CONSOLE, query_spec, resource
from testbed.wait import wait_for

pytestmark = pytest.mark.integration


def test_killed_between_creating_the_driver_and_writing_the_status(cluster, start_operator):
    crashing = start_operator(STREAMQ_FAILPOINT="exit-after-create")
    cluster.apply("q", query_spec(RATE_TO_CONSOLE))
    wait_for(lambda: crashing.exited, 60, "the operator to die at the failpoint")
    assert crashing.proc.returncode == 137
    assert [p.metadata.name for p in cluster.driver_pods("q")] == ["q-driver-1"]
    assert "driver" not in cluster.status("q")  # the write that never happened

    start_operator()
    status = cluster.wait_status("q", lambda s: s.get("driver") == "q-driver-1", what="the driver adopted")
    assert status["attempt"] == 1 and status["phase"] == "Starting"
    assert status["reconciled"]["specHash"]  # what the gate needs of the spec it runs
    cluster.pod_runs("q-driver-1")
    cluster.wait_phase("q", "Running")
    assert [p.metadata.name for p in cluster.driver_pods("q")] == ["q-driver-1"]


def test_killed_while_starting_many_queries(cluster, start_operator):
    # The kill lands mid-start every run: the failpoint exits (137) right after the first driver is
    # created and before its status write, however far the other queries got. A SIGKILL sent once a
    # first driver pod was seen could land after a fast operator had started all six, and pass
    # without the fault. The queries arrive together (one apply) once the operator is live: applied
    # before it starts, it could die at the failpoint before its liveness endpoint answered.
    queries = [f"q{i}" for i in range(6)]
    crashing = start_operator(STREAMQ_FAILPOINT="exit-after-create")
    items = [resource(query_spec(RATE_TO_CONSOLE), q, cluster.namespace) for q in queries]
    cluster.kube.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    wait_for(lambda: crashing.exited, 60, "the operator to die at the failpoint")
    assert crashing.proc.returncode == 137
    started = {q: [p.metadata.name for p in cluster.driver_pods(q)] for q in queries}
    unrecorded = [q for q in queries if started[q] and "driver" not in cluster.status(q)]
    assert unrecorded, f"no driver left out of the status by the kill: {started}"  # the write that never happened

    start_operator()
    for q in queries:
        cluster.wait_status(q, lambda s, q=q: s.get("driver") == names.driver_name(q, 1) and s.get("phase") == "Starting",
                            what="one driver per query")  # fmt: skip
    for q in queries:
        pods = cluster.driver_pods(q)
        assert [p.metadata.name for p in pods] == [names.driver_name(q, 1)], q
        assert cluster.status(q)["attempt"] == 1


def test_killed_during_the_backoff_counts_the_failure_once(cluster, start_operator):
    # A backoff far longer than it takes to see Restarting and kill, and the kill asserted to have
    # landed inside it: with 3 s a slow poll could kill the operator after it had started driver 2,
    # and the test would pass without the fault it is about.
    first = start_operator()
    cluster.apply("q", query_spec(RATE_TO_CONSOLE, restartPolicy={"backoff": {"initial": "20s", "max": "20s"}, "maxRestarts": 3}))
    cluster.wait_driver("q", 1)
    cluster.pod_dies("q-driver-1", 70, "QUERY_FAILED: boom")
    cluster.wait_status("q", lambda s: s.get("restarts") == 1 and s.get("phase") == "Restarting")
    first.kill()
    killed_at = datetime.now(UTC)
    status = cluster.status("q")
    assert status["phase"] == "Restarting" and (parse_time(status.get("nextRestartTime")) or killed_at) > killed_at, status
    assert [p.metadata.name for p in cluster.driver_pods("q")] == ["q-driver-1"], "the kill came after the backoff"

    start_operator()
    cluster.wait_driver("q", 2, timeout=60)
    status = cluster.wait_phase("q", "Starting")
    assert status["restarts"] == 1 and status["attempt"] == 2
    assert [p.metadata.name for p in cluster.driver_pods("q")] == ["q-driver-2"]
