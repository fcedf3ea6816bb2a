"""The pass's second decision: what acting came to (Inputs.acted) is an input, read first.

A pass acts on its decision once. When the API refused something, reconcile decides
again with the typed outcome; these tables feed each outcome to that decision, then
run the pass after it, and check that the second decision never creates (acting on
it would be acting twice)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.decide import (
    CREATE_RETRY_S,
    ActOutcome,
    CreateDriver,
    CreateRefused,
    Decision,
    DeleteDriver,
    Refusal,
    ResizeDriver,
    ResizeRefused,
    Verb,
    decide,
)
from controller.observe import DriverPhase
from controller.phases import ConditionType, Phase, Reason
from controller.status import QueryStatus
from tests.unit.controller.test_decide_standby import with_a_warm_standby
from tests.unit.controller.world import World, base_spec

pytestmark = pytest.mark.unit

SHARED = {"checkpoint.volume": {"persistentVolumeClaim": {"claimName": "ck"}}}  # a second driver pod reaches it
NEW_THRESHOLD = {"transforms": [{"where": "value > 7"}]}
WHY = {
    Refusal.QUOTA: 'pods "{driver}" is forbidden: exceeded quota: small, requested: cpu=1',
    Refusal.NAME_CONFLICT: "Pod {driver} already exists and is not this query's (controlled by nothing)",
    Refusal.OTHER: 'admission webhook "deny.example.com" denied the request',
}


def creates(decision: Decision) -> list[str]:
    return [a.run.driver_name for a in decision.actions if isinstance(a, CreateDriver)]


def deletes(decision: Decision) -> list[str]:
    return [a.name for a in decision.actions if isinstance(a, DeleteDriver)]


def first_driver() -> tuple[World, Decision]:
    """A new query: its first decision creates q-driver-1."""
    w = World(base_spec(**{"runtime.sparkUI": True}))
    d = w.reconcile(apply=False)
    assert creates(d) == ["q-driver-1"] and d.verb is Verb.CREATE
    return w, d


def warm_upgrade() -> tuple[World, Decision]:
    """A running query whose spec changed: its decision creates q-driver-2 beside q-driver-1."""
    w = World(base_spec(**SHARED))
    w.reconcile()
    w.change("q-driver-1", phase=DriverPhase.RUNNING, started_at=w.now, ready=True)
    w.driver_reports(batchId=3)
    w.reconcile()
    w.edit(**NEW_THRESHOLD)
    d = w.reconcile(apply=False)
    assert creates(d) == ["q-driver-2"] and d.verb is Verb.UPGRADE
    return w, d


def promoted() -> tuple[World, Decision]:
    """A standby that waited with 50m of CPU takes over: the decision resizes it to its request."""
    w = with_a_warm_standby()
    w.change("q-driver-1", cpu_request="1")
    w.change("q-driver-2", cpu_request="50m")
    w.change("q-driver-1", phase=DriverPhase.FAILED, exit_code=137, finished_at=w.now, reason="Error")
    d = w.reconcile(apply=False)
    assert d.verb is Verb.PROMOTE and ResizeDriver("q-driver-2", "1", "50m") in d.actions
    return w, d


def acted(w: World, outcome: ActOutcome) -> Decision:
    """The pass's second decision; its status is what the pass writes."""
    second = decide(replace(w.inputs(), acted=outcome))
    w.status = QueryStatus.parse(second.status.dump())
    return second


def refused(driver: str, reason: Refusal) -> ActOutcome:
    return ActOutcome(refused=CreateRefused(driver, reason, WHY[reason].format(driver=driver)))


# (what was being created, why it was refused) -> the second decision's verb, phase and Degraded reason
# (None: not degraded), its Warning events, and what the next pass does: creates or deletes which drivers.
@pytest.mark.parametrize(
    ("creating", "reason", "verb", "phase", "degraded", "warnings", "next_creates", "next_deletes"),
    [
        (
            "first",
            Refusal.QUOTA,
            Verb.CREATE_FAILED,
            Phase.PENDING,
            Reason.DRIVER_CREATE_FAILED,
            [Reason.DRIVER_CREATE_FAILED],
            ["q-driver-1"],
            [],
        ),
        (
            "first",
            Refusal.OTHER,
            Verb.CREATE_FAILED,
            Phase.PENDING,
            Reason.DRIVER_CREATE_FAILED,
            [Reason.DRIVER_CREATE_FAILED],
            ["q-driver-1"],
            [],
        ),
        (
            "first",
            Refusal.NAME_CONFLICT,
            Verb.CREATE_FAILED,
            Phase.PENDING,
            Reason.NAME_CONFLICT,
            [Reason.NAME_CONFLICT],
            ["q-driver-1"],
            [],
        ),
        # no room under the quota: said, then at once a plain restart (the old driver goes first)
        ("upgrade", Refusal.QUOTA, Verb.NO_ROOM, Phase.UPGRADING, None, [], [], ["q-driver-1"]),
        # any other refusal fails the upgrade: the old driver runs on, nothing more is tried
        ("upgrade", Refusal.OTHER, Verb.UPGRADE_FAILED, Phase.RUNNING, Reason.UPGRADE_FAILED, [Reason.UPGRADE_FAILED], [], []),
        # a name another object holds: said, the old driver runs on, the upgrade is tried again
        (
            "upgrade",
            Refusal.NAME_CONFLICT,
            Verb.CREATE_FAILED,
            Phase.RUNNING,
            Reason.NAME_CONFLICT,
            [Reason.NAME_CONFLICT],
            ["q-driver-2"],
            [],
        ),
    ],
)
def test_a_refused_creation_feeds_the_next_decision(
    creating, reason, verb, phase, degraded, warnings, next_creates, next_deletes
):
    w, carried_out = first_driver() if creating == "first" else warm_upgrade()
    driver = creates(carried_out)[0]
    second = acted(w, refused(driver, reason))
    assert second.verb is verb and second.status.phase is phase
    assert second.actions == ()  # acting is not looped
    condition = second.status.condition(ConditionType.DEGRADED)
    assert (condition.reason if condition.status == "True" else None) == degraded
    assert [e.reason for e in second.events if e.type == "Warning"] == warnings
    assert all(WHY[reason].format(driver=driver) in e.message for e in second.events if e.type == "Warning")
    w.advance(second.requeue_after or CREATE_RETRY_S)  # a failed upgrade waits for no time: a later pass
    after = w.reconcile()
    assert (creates(after), deletes(after)) == (next_creates, next_deletes)


def test_a_refused_first_driver_is_tried_again_after_the_retry_delay():
    w, _ = first_driver()
    second = acted(w, refused("q-driver-1", Refusal.QUOTA))
    assert second.requeue_after == CREATE_RETRY_S and second.status.attempt == 0
    assert second.status.message == "cannot create the driver: " + WHY[Refusal.QUOTA].format(driver="q-driver-1")


def test_a_quota_refusing_a_warm_upgrade_is_said_then_the_query_restarts_plainly():
    w, _ = warm_upgrade()
    second = acted(w, refused("q-driver-2", Refusal.QUOTA))
    assert second.status.upgrade.no_room and second.requeue_after == 0
    after = w.reconcile()
    assert [e.reason for e in after.events] == [Reason.NO_ROOM_FOR_UPGRADE, Reason.SPEC_CHANGED]
    assert "exceeded quota" in after.status.message and after.status.phase is Phase.RESTARTING


def test_a_spark_ui_name_another_object_holds_leaves_the_query_running_without_its_ui():
    w, carried_out = first_driver()
    taken = "Service q-ui already exists and is not this query's (controlled by nothing)"
    second = acted(w, ActOutcome(ui_taken=(taken,)))
    assert second.verb is carried_out.verb and second.status.phase is Phase.STARTING
    assert second.status.spark_ui is None and carried_out.status.spark_ui is not None
    assert (second.events[-1].type, second.events[-1].reason) == ("Warning", Reason.NAME_CONFLICT)
    assert taken in second.events[-1].message
    assert second.actions == ()  # the driver was created already: not again


def test_a_refused_resize_is_said_once_and_the_driver_runs_on():
    w, carried_out = promoted()
    (action,) = [a for a in carried_out.actions if isinstance(a, ResizeDriver)]
    second = acted(w, ActOutcome(resize_refused=(ResizeRefused(action, "the server could not find the resource"),)))
    assert second.verb is Verb.PROMOTE and second.status.driver == "q-driver-2"
    assert second.status.resize_refused == "q-driver-2: the server could not find the resource"
    assert second.events[-1].reason == Reason.RESIZE_REFUSED and second.actions == ()
    w.drivers = [x for x in w.drivers if x.name != "q-driver-1"]  # the promote deleted it
    assert not [a for a in w.reconcile().actions if isinstance(a, ResizeDriver)]  # not asked again


def test_a_resize_taken_is_said_in_an_event():
    w, carried_out = promoted()
    (action,) = [a for a in carried_out.actions if isinstance(a, ResizeDriver)]
    second = acted(w, ActOutcome(resized=(action,)))
    assert second.events[:-1] == carried_out.events and second.status == carried_out.status
    assert (second.events[-1].type, second.events[-1].reason) == ("Normal", Reason.RESIZED)
    assert "grows in place to 1" in second.events[-1].message


OUTCOMES = {
    "quota": lambda driver, action: refused(driver, Refusal.QUOTA),
    "name conflict": lambda driver, action: refused(driver, Refusal.NAME_CONFLICT),
    "other": lambda driver, action: refused(driver, Refusal.OTHER),
    "ui taken": lambda driver, action: ActOutcome(ui_taken=("Service q-ui already exists",)),
    "resize refused": lambda driver, action: ActOutcome(resize_refused=(ResizeRefused(action, "405"),)),
}


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("setup", [first_driver, warm_upgrade, promoted])
def test_the_decision_after_acting_creates_nothing(setup, outcome):
    w, carried_out = setup()
    driver = (creates(carried_out) or ["q-driver-3"])[0]
    action = next((a for a in carried_out.actions if isinstance(a, ResizeDriver)), ResizeDriver("q-driver-1", "1", "50m"))
    second = decide(replace(w.inputs(), acted=OUTCOMES[outcome](driver, action)))
    assert not [a for a in second.actions if isinstance(a, CreateDriver)]
    assert second.actions == ()


def test_without_an_outcome_decide_is_the_first_decision():
    w, carried_out = first_driver()
    assert decide(w.inputs()) == carried_out
    assert ActOutcome().as_decided and not refused("q-driver-1", Refusal.OTHER).as_decided
