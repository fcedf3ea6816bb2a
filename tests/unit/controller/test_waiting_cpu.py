"""A driver waiting on the Lease requests little CPU and grows in place once it runs the query (issue #36)."""

from __future__ import annotations

import pytest

from contract.capacity import cores_at_once
from contract.load import validate_spec
from controller import render
from controller.config import Settings
from controller.decide import DeleteDriver, ResizeDriver, drivers
from controller.observe import DriverPhase, driver_from_pod
from controller.phases import Reason
from controller.run import Run
from tests.unit.controller.test_decide_standby import STANDBY, with_a_warm_standby
from tests.unit.controller.world import World, base_spec

pytestmark = pytest.mark.unit


def _run(standby: bool, **changes) -> Run:
    spec = validate_spec(base_spec(**STANDBY, **changes))
    return Run(query="payments", namespace="team-a", attempt=2, spec=spec,
                      checkpoint_location=spec.checkpoint.location, standby=standby)  # fmt: skip


def _cpu(pod: dict) -> str:
    return pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]


@pytest.mark.parametrize("changes, active, waiting", [
    ({}, "1", "50m"),
    ({"runtime.driver.coreRequest": "250m"}, "250m", "50m"),
    ({"runtime.driver.coreRequest": "20m"}, "20m", "20m"),  # never more than it runs with
    ({"runtime.driver.waitingCoreRequest": "100m", "runtime.driver.cores": 2}, "2", "100m"),
])  # fmt: skip
def test_a_waiting_driver_requests_its_waiting_cpu_and_may_grow_in_place(changes, active, waiting):
    settings = Settings()
    running, standby = render.driver_pod(_run(False, **changes), settings), render.driver_pod(_run(True, **changes), settings)
    assert (_cpu(running), _cpu(standby)) == (active, waiting)
    for pod in (running, standby):  # Burstable either way (no CPU limit), so the resize keeps its QoS class
        container = pod["spec"]["containers"][0]
        assert "cpu" not in container["resources"]["limits"]
        assert container["resizePolicy"] == [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]


def test_the_caps_count_what_a_waiting_driver_grows_to():
    spec = validate_spec(base_spec(**STANDBY, **{"runtime.driver.coreRequest": "250m"}))
    assert cores_at_once(spec).total == 2  # two drivers of one core each (cores), whatever they request while waiting


def test_observe_reads_the_drivers_cpu_request_and_a_pending_resize():
    pod = render.driver_pod(_run(True), Settings())
    pod["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "PodResizePending", "status": "True", "reason": "Deferred", "message": "Node didn't have enough capacity"}
        ],
    }
    driver = driver_from_pod(pod)
    assert driver.cpu_request == "50m"
    assert driver.resize == "Deferred: Node didn't have enough capacity"


def _promoted() -> tuple[World, object]:
    w = with_a_warm_standby()
    w.change("q-driver-1", cpu_request="1")
    w.change("q-driver-2", cpu_request="50m")
    w.change("q-driver-1", phase=DriverPhase.FAILED, exit_code=137, finished_at=w.now, reason="Error")
    d = w.reconcile()
    assert d.verb == "promote"
    return w, d


def test_a_promoted_standby_is_resized_to_the_spec_request_as_it_takes_over():
    w, d = _promoted()
    assert d.status.driver == "q-driver-2"
    assert [a for a in d.actions if isinstance(a, ResizeDriver)] == [ResizeDriver("q-driver-2", "1", "50m")]
    d = w.reconcile()  # not resized yet (the API server has not answered, say): asked again
    assert [a for a in d.actions if isinstance(a, ResizeDriver)] == [ResizeDriver("q-driver-2", "1", "50m")]
    w.change("q-driver-2", cpu_request="1", resize="Deferred: Node didn't have enough capacity")  # asked, not granted yet
    d = w.reconcile()
    assert not [a for a in d.actions if isinstance(a, ResizeDriver)]
    assert "its CPU resize to 1 waits (Deferred: Node didn't have enough capacity)" in d.status.message
    w.change("q-driver-2", resize=None)
    assert "resize" not in w.reconcile().status.message


def test_a_refused_resize_is_said_once_and_not_asked_again():
    w, d = _promoted()
    (action,) = [a for a in d.actions if isinstance(a, ResizeDriver)]
    refused = drivers.resize_refused(d, action, "the server could not find the requested resource")
    assert refused.status.resize_refused == "q-driver-2: the server could not find the requested resource"
    assert [e.reason for e in refused.events][-1] == Reason.RESIZE_REFUSED
    assert "stays on its waiting CPU request 50m, not 1" in refused.events[-1].message
    w.status = refused.status
    d = w.reconcile()
    assert not [a for a in d.actions if isinstance(a, ResizeDriver)]
    assert "on its waiting CPU request 50m, not resized" in d.status.message


def test_a_driver_that_never_waited_is_not_resized():
    w = World(base_spec())
    w.reconcile()
    w.change("q-driver-1", phase=DriverPhase.RUNNING, started_at=w.now, cpu_request="1")
    assert not [a for a in w.reconcile().actions if isinstance(a, ResizeDriver)]
    w.change("q-driver-1", cpu_request="1000m")  # the same quantity, spelled otherwise
    assert not [a for a in w.reconcile().actions if isinstance(a, ResizeDriver)]


def _warm_new_driver():
    from tests.unit.controller.test_decide_upgrade import upgrading

    w = upgrading()
    w.change("q-driver-1", cpu_request="1")
    w.change("q-driver-2", phase=DriverPhase.RUNNING, started_at=w.now, cpu_request="50m", cpu_allocated="50m")
    assert not [a for a in w.reconcile().actions if isinstance(a, ResizeDriver)]  # warming: it stays small
    w.change("q-driver-2", ready=True)
    d = w.reconcile()  # warm: it grows first, the old driver runs on
    assert d.verb == "grow" and [a for a in d.actions if isinstance(a, ResizeDriver)] == [ResizeDriver("q-driver-2", "1", "50m")]
    assert not [a for a in d.actions if not isinstance(a, ResizeDriver)] and "growing to its CPU request" in d.status.message
    w.change("q-driver-2", cpu_request="1")  # the API server took it; the kubelet actuates it
    d = w.reconcile()
    assert d.verb == "grow" and d.actions == ()
    return w


def test_a_warm_upgrades_new_driver_grows_before_it_takes_over():
    w = _warm_new_driver()
    w.change("q-driver-2", cpu_allocated="1000m")
    d = w.reconcile()
    assert d.verb == "handover" and d.status.driver == "q-driver-2"
    assert not [a for a in d.actions if isinstance(a, ResizeDriver)]


def test_a_node_without_room_for_both_defers_the_resize_and_the_handover_goes_ahead():
    w = _warm_new_driver()
    w.change("q-driver-2", resize="Deferred: Node didn't have enough resource: cpu")
    d = w.reconcile()
    assert d.verb == "handover"  # the old driver's exit frees the room; the kubelet retries
    assert [a.name for a in d.actions if isinstance(a, DeleteDriver)] == ["q-driver-1"]
