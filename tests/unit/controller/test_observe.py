"""Reading driver pods and SparkApplications into Driver records."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller import names
from controller.observe import DriverPhase, driver_from_pod, driver_from_spark_application, drivers_from, termination_message

pytestmark = pytest.mark.unit


def pod(name="q-driver-2", phase="Running", state=None, attempt="2", owner_uid="u1", owner_kind="StreamingQuery", **meta):
    return {
        "metadata": {
            "name": name,
            "labels": {names.LABEL_ATTEMPT: attempt},
            "annotations": {names.ANNOTATION_SPEC_HASH: "abc", names.ANNOTATION_RESTART_NONCE: "n1"},
            "ownerReferences": [{"kind": owner_kind, "name": "q", "uid": owner_uid, "controller": True}],
            "creationTimestamp": "2026-01-01T11:59:00Z",
            **meta,
        },
        "status": {"phase": phase, "containerStatuses": [{"name": "driver", "state": state or {}}]},
    }


def test_a_terminated_driver_carries_exit_code_and_message():
    d = driver_from_pod(pod(phase="Failed", state={"terminated": {
        "exitCode": 65, "reason": "Error", "message": "QUERY_REFUSED: no aggregates\n",
        "startedAt": "2026-01-01T12:00:00Z", "finishedAt": "2026-01-01T12:00:09Z"}}))  # fmt: skip
    assert d.kind == "Pod" and d.name == "q-driver-2" and d.attempt == 2 and d.spec_hash == "abc"
    assert d.restart_nonce == "n1"
    assert d.phase is DriverPhase.FAILED and not d.active and d.owner_uid == "u1"
    assert (d.exit_code, d.reason, d.message) == (65, "Error", "QUERY_REFUSED: no aggregates")
    assert d.started_at == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert d.finished_at == datetime(2026, 1, 1, 12, 0, 9, tzinfo=UTC)


def test_a_running_driver_knows_when_it_started():
    d = driver_from_pod(pod(state={"running": {"startedAt": "2026-01-01T12:00:01Z"}}))
    assert d.phase is DriverPhase.RUNNING and d.active and d.started_at.second == 1


def test_an_evicted_pod_has_a_reason_without_container_state():
    raw = pod(phase="Failed")
    raw["status"] = {"phase": "Failed", "reason": "Evicted", "message": "low on memory"}
    d = driver_from_pod(raw)
    assert (d.exit_code, d.reason, d.message) == (None, "Evicted", "low on memory")


def test_a_terminating_pod_is_deleting():
    assert driver_from_pod(pod(deletionTimestamp="2026-01-01T12:00:00Z")).deleting


def test_a_pod_with_no_status_is_pending():
    raw = pod()
    raw["status"] = {}
    assert driver_from_pod(raw).phase is DriverPhase.PENDING


@pytest.mark.parametrize(
    ("state", "phase"),
    [("", DriverPhase.PENDING), ("SUBMITTED", DriverPhase.PENDING), ("RUNNING", DriverPhase.RUNNING),
     ("COMPLETED", DriverPhase.SUCCEEDED), ("FAILED", DriverPhase.FAILED), ("SUBMISSION_FAILED", DriverPhase.FAILED),
     ("SOMETHING_NEW", DriverPhase.UNKNOWN)],
)  # fmt: skip
def test_spark_application_states(state, phase):
    app = {"metadata": {"name": "q-driver-1", "labels": {names.LABEL_ATTEMPT: "1"}},
           "status": {"applicationState": {"state": state, "errorMessage": "submission failed"}}}  # fmt: skip
    d = driver_from_spark_application(app)
    assert d.kind == "SparkApplication" and d.phase is phase and d.attempt == 1
    if phase.ended and phase is DriverPhase.FAILED:
        assert d.message == "submission failed" and d.reason == state


def test_a_spark_applications_driver_pod_gives_the_exit_code():
    app = {"metadata": {"name": "q-driver-1", "labels": {names.LABEL_ATTEMPT: "1"}, "ownerReferences": [
        {"kind": "StreamingQuery", "uid": "u1", "controller": True}]},
        "status": {"applicationState": {"state": "FAILED"}}}  # fmt: skip
    driver_pod = pod(name="q-driver-1-driver", phase="Failed", owner_kind="SparkApplication", owner_uid="app-uid",
                     state={"terminated": {"exitCode": 70, "message": "QUERY_FAILED: x"}})  # fmt: skip
    driver_pod["metadata"]["ownerReferences"][0]["name"] = "q-driver-1"
    (d,) = drivers_from([driver_pod], [app])
    assert d.kind == "SparkApplication" and d.exit_code == 70 and d.message == "QUERY_FAILED: x"
    assert d.owner_uid == "u1"


def test_drivers_are_sorted_by_attempt():
    ds = drivers_from([pod(name="q-driver-3", attempt="3"), pod(name="q-driver-2", attempt="2")], [])
    assert [d.name for d in ds] == ["q-driver-2", "q-driver-3"]


def test_a_waiting_container_says_why():
    d = driver_from_pod(pod(phase="Pending", state={"waiting": {"reason": "ErrImagePull", "message": "not found"}}))
    assert d.waiting == "ErrImagePull: not found" and d.active
    assert driver_from_pod(pod(phase="Pending", state={"waiting": {"reason": "ContainerCreating"}})).waiting is None


def test_the_jobs_own_termination_message_is_kept_whole():
    message = "QUERY_FAILED: " + "x " * 2000
    assert termination_message(message + "\n") == message.strip()


def test_the_message_is_one_line_and_bounded():
    assert termination_message("QUERY_FAILED: broker down\n  at line 2\n") == "QUERY_FAILED: broker down at line 2"
    assert len(termination_message("QUERY_FAILED: " + "y" * 9000)) == 4096


def test_an_empty_termination_message_is_none():
    assert termination_message("  \n") is None and termination_message(None) is None


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [({"streamq.io/executors": "4"}, 4), ({}, None), ({"streamq.io/executors": "four"}, None),
     ({"streamq.io/executors": "99999"}, None), ({"streamq.io/executors": "-1"}, None)],
)  # fmt: skip
def test_the_executors_a_driver_pod_is_to_have_are_read_from_its_annotation(annotations, expected):
    from controller.observe import executors_wanted

    assert executors_wanted({"annotations": annotations}) == expected
