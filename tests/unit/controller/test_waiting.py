"""A driver that cannot start says why: read from the pod as the scheduler and the kubelet
write it (observe), and decided into status, conditions and one event (decide)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller import names
from controller.decide import creation_failed
from controller.observe import DriverPhase, driver_from_pod, driver_from_spark_application, why_waiting
from controller.phases import ConditionType, Phase, Reason
from tests.unit.controller.world import World, base_spec

pytestmark = pytest.mark.unit

# What Kubernetes writes, verbatim in shape: the scheduler's PodScheduled condition and the
# kubelet's waiting state of the driver container.
PVC_MISSING = ('0/1 nodes are available: persistentvolumeclaim "streamq-checkpoints" not found. '
               'preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.')  # fmt: skip
NO_CPU = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found."
PULL_FAILED = ('failed to pull and unpack image "docker.io/library/streamq:nope": failed to resolve reference: '
               'dial tcp 127.0.0.1:1: connect: connection refused')  # fmt: skip


def unscheduled(message: str, reason: str = "Unschedulable") -> dict:
    return {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}]}  # fmt: skip


def waiting(reason: str, message: str | None = None) -> dict:
    state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    return {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": names.DRIVER_CONTAINER, "state": state}]}  # fmt: skip


def pod(status: dict, name: str = "q-driver-1") -> dict:
    return {"metadata": {"name": name, "labels": {names.LABEL_ATTEMPT: "1"}}, "status": status}


# --- observe ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (unscheduled(PVC_MISSING), ("Unschedulable", f"Unschedulable: {PVC_MISSING}")),
        (unscheduled(NO_CPU), ("Unschedulable", f"Unschedulable: {NO_CPU}")),
        (unscheduled("", reason=""), ("Unschedulable", "Unschedulable")),
        (waiting("ErrImagePull", PULL_FAILED), ("ErrImagePull", f"ErrImagePull: {PULL_FAILED}")),
        (waiting("ImagePullBackOff", 'Back-off pulling image "streamq:nope"'),
         ("ImagePullBackOff", 'ImagePullBackOff: Back-off pulling image "streamq:nope"')),
        (waiting("InvalidImageName", 'couldn\'t parse image name "Streamq:NOPE"'),
         ("InvalidImageName", 'InvalidImageName: couldn\'t parse image name "Streamq:NOPE"')),
        (waiting("CreateContainerConfigError", 'secret "kafka-creds" not found'),
         ("CreateContainerConfigError", 'CreateContainerConfigError: secret "kafka-creds" not found')),
        (waiting("ContainerCreating"), None),  # on its way
        (waiting("PodInitializing"), None),
        ({"phase": "Pending"}, None),  # just created: nobody has looked at it yet
        ({"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}, None),
    ],
)  # fmt: skip
def test_why_a_pod_waits_comes_from_the_scheduler_or_the_kubelet(status, expected):
    assert why_waiting(pod(status)) == expected
    d = driver_from_pod(pod(status))
    assert d.phase.value == status["phase"] and (d.waiting_reason, d.waiting) == (expected or (None, None))


def test_a_waiting_message_is_one_bounded_line():
    reason, text = why_waiting(pod(unscheduled("0/500 nodes are available:\n" + "1 node(s) had taint. " * 500)))
    assert reason == "Unschedulable" and "\n" not in text and len(text) == 1024 and text.endswith("...")


def test_a_spark_applications_driver_pod_says_why_it_waits():
    app = {"metadata": {"name": "q-driver-1", "labels": {names.LABEL_ATTEMPT: "1"}},
           "status": {"applicationState": {"state": "SUBMITTED"}}}  # fmt: skip
    d = driver_from_spark_application(app, pod(waiting("ErrImagePull", PULL_FAILED), name="q-driver-1-driver"))
    assert d.phase is DriverPhase.PENDING and d.waiting_reason == "ErrImagePull" and PULL_FAILED in d.waiting


# --- decide -------------------------------------------------------------------------------


def kube_says(w: World, status: dict) -> None:
    """The world's driver pod now has this status (as the watch would deliver it)."""
    seen = driver_from_pod(pod(status, name=w.driver.name))
    w.drivers[0] = replace(w.driver, phase=seen.phase, waiting=seen.waiting, waiting_reason=seen.waiting_reason)


def conds(status) -> dict[str, tuple[str, str]]:
    return {c.type.value: (c.status, c.reason) for c in status.conditions}


def test_a_missing_pvc_is_said_at_once_and_the_query_starts_by_itself_when_it_appears():
    w = World()
    w.reconcile()
    kube_says(w, unscheduled(PVC_MISSING))
    d = w.reconcile()
    st = d.status
    assert st.phase is Phase.STARTING and 'persistentvolumeclaim "streamq-checkpoints" not found' in st.message
    assert st.message.startswith("driver q-driver-1 cannot start")
    assert conds(st) == {
        "Ready": ("False", "Unschedulable"),  # the REASON column of `kubectl get sq`
        "Progressing": ("True", "Unschedulable"),
        "Reconciling": ("True", "Unschedulable"),  # kstatus: InProgress, it may still start
        "Stalled": ("False", "AsExpected"),
        "Degraded": ("True", "Unschedulable"),
    }
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "Unschedulable")] and PVC_MISSING in d.events[0].message
    assert d.actions == () and not d.restarted

    w.advance(3600)  # an hour later: still waiting, no event again, nothing counted or replaced
    again = w.reconcile()
    assert again.events == () and again.actions == () and again.status.dump() == st.dump()

    kube_says(w, waiting("ContainerCreating"))  # the PVC was created: the scheduler placed the pod
    d = w.reconcile()
    assert d.status.phase is Phase.STARTING and d.status.message == "driver q-driver-1 is starting"
    assert conds(d.status)["Degraded"] == ("False", "AsExpected") and d.actions == ()
    w.driver_runs()
    d = w.reconcile()
    assert d.status.phase is Phase.RUNNING and (d.status.attempt, d.status.restarts) == (1, 0)
    assert conds(d.status)["Ready"] == ("True", Reason.DRIVER_RUNNING)


def test_an_image_that_cannot_be_pulled_is_one_cause_through_its_back_offs():
    w = World()
    w.reconcile()
    kube_says(w, waiting("ErrImagePull", PULL_FAILED))
    d = w.reconcile()
    assert conds(d.status)["Ready"] == ("False", Reason.IMAGE_PULL_FAILED)
    assert f"ErrImagePull: {PULL_FAILED}" in d.status.message
    assert [e.reason for e in d.events] == [Reason.IMAGE_PULL_FAILED]
    for status in (waiting("ImagePullBackOff", 'Back-off pulling image "streamq:nope"'), waiting("ErrImagePull", PULL_FAILED)):
        kube_says(w, status)
        again = w.reconcile()
        assert again.events == ()  # the kubelet alternates the two: one cause, one event
        assert PULL_FAILED in again.status.message  # the back-off's message says less: the failure's is kept
        assert again.status.phase is Phase.STARTING and again.status.restarts == 0 and again.actions == ()


def test_a_new_cause_gets_its_own_event():
    w = World()
    w.reconcile()
    kube_says(w, unscheduled(NO_CPU))
    assert [e.reason for e in w.reconcile().events] == [Reason.UNSCHEDULABLE]
    kube_says(w, waiting("CreateContainerConfigError", 'secret "kafka-creds" not found'))
    d = w.reconcile()
    assert [e.reason for e in d.events] == ["CreateContainerConfigError"]
    assert conds(d.status)["Degraded"] == ("True", "CreateContainerConfigError")
    assert 'secret "kafka-creds" not found' in d.status.message


def test_a_spark_application_that_cannot_start_says_why_too():
    w = World(base_spec(**{"runtime.backend": "sparkApplication"}))
    w.reconcile()
    assert w.driver.kind == "SparkApplication"
    w.drivers[0] = replace(w.driver, waiting="ErrImagePull: x", waiting_reason="ErrImagePull")
    d = w.reconcile()
    assert d.status.phase is Phase.STARTING and conds(d.status)["Degraded"] == ("True", Reason.IMAGE_PULL_FAILED)


def test_a_refused_create_is_retried_and_not_stalled():
    w = World()
    inputs = w.inputs()
    d = creation_failed(
        w.reconcile(apply=False), inputs, 'pods "q-driver-1" is forbidden: exceeded quota: q, requested: cpu=1', 15
    )
    c = conds(d.status)
    assert c["Ready"] == ("False", Reason.DRIVER_CREATE_FAILED) and c["Degraded"][0] == "True"
    assert c["Reconciling"][0] == "True" and c["Stalled"][0] == "False"
    assert d.status.condition(ConditionType.DEGRADED).message.endswith("requested: cpu=1")
