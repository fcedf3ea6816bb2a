"""Warm upgrades (controller.decide.upgrade): a spec change starts the new spec's driver beside the
running one; once it is Ready (warm) the old one is stopped and the new one takes over through the
Lease. A new driver that cannot come up leaves the old one running; no room means a plain restart."""

from __future__ import annotations

from datetime import timedelta

import pytest

from contract.load import validate_spec
from controller.decide import CreateDriver, CreateRefused, DeleteDriver, Refusal, ReleaseLease, upgrade
from controller.observe import DriverPhase, driver_from_pod
from controller.phases import ConditionType, Phase, Reason
from tests.unit.controller.world import World, base_spec

pytestmark = pytest.mark.unit

NEW_THRESHOLD = {"transforms": [{"where": "value > 7"}]}
QUOTA_MESSAGE = 'pods "q-driver-2" is forbidden: exceeded quota: small, requested: cpu=1'


def creates(decision) -> list:
    return [a.run for a in decision.actions if isinstance(a, CreateDriver)]


def deletes(decision) -> list[str]:
    return [a.name for a in decision.actions if isinstance(a, DeleteDriver)]


def reasons(decision) -> list[str]:
    return [e.reason for e in decision.events]


def condition(decision, kind: ConditionType):
    return decision.status.condition(kind)


SHARED = {"checkpoint.volume": {"persistentVolumeClaim": {"claimName": "ck"}}}  # a second driver pod reaches it


def running(**spec) -> World:
    w = World(base_spec(**{**SHARED, **spec}))
    w.reconcile()
    w.change("q-driver-1", phase=DriverPhase.RUNNING, started_at=w.now, ready=True)
    w.driver_reports(batchId=3)
    d = w.reconcile()
    assert d.status.phase is Phase.RUNNING
    assert w.named("q-driver-1").fenced == validate_spec(w.spec).warm_upgrades  # it holds the Lease: warm upgrades
    return w


def upgrading(**spec) -> World:
    w = running(**spec)
    w.edit(**NEW_THRESHOLD)
    d = w.reconcile()
    (run,) = creates(d)
    assert (run.driver_name, run.attempt, run.standby) == ("q-driver-2", 2, True)
    assert run.spec.transforms[0].where == "value > 7"
    assert deletes(d) == [] and d.verb == "upgrade"
    assert d.status.phase is Phase.UPGRADING and d.status.driver == "q-driver-1" and d.status.attempt == 1
    assert d.status.upgrade.state == "Warming" and d.status.upgrade.driver == "q-driver-2"
    assert d.status.standby is None  # not a standby query: status.standby stays for spec.runtime.standby
    assert reasons(d) == [Reason.UPGRADE_STARTED]
    return w


def test_a_spec_change_is_a_warm_upgrade_the_new_driver_takes_over_once_warm():
    w = upgrading()
    # its JVM starts, it warms up: not Ready yet; the old driver runs on
    w.change("q-driver-2", phase=DriverPhase.RUNNING, started_at=w.now)
    w.advance(20)
    d = w.reconcile()
    assert d.actions == () and d.status.phase is Phase.UPGRADING and "warming up" in d.status.message
    assert d.requeue_after is not None and d.requeue_after <= upgrade.LOOK_AGAIN_S
    # warm (its readiness probe found app.driver.ready's file): the old driver is stopped, the new one is current
    w.change("q-driver-2", ready=True)
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and creates(d) == [] and d.verb == "handover"
    st = d.status
    assert (st.driver, st.attempt, st.upgrade.state, st.restarts) == ("q-driver-2", 2, "HandingOver", 0)
    assert st.phase is Phase.UPGRADING and reasons(d) == [Reason.UPGRADE_HANDOVER]
    # the old one stops and releases the Lease; until the new one reports progress, still Upgrading
    d = w.reconcile()
    assert d.actions == () and d.status.phase is Phase.UPGRADING
    assert condition(d, ConditionType.READY).status == "False"  # GitOps: Healthy only once the new one serves
    w.driver_reports(batchId=4)
    d = w.reconcile()
    assert d.status.phase is Phase.RUNNING and d.status.upgrade is None and d.status.driver == "q-driver-2"
    assert Reason.UPGRADE_COMPLETED in reasons(d) and d.status.restarts == 0
    assert condition(d, ConditionType.READY).status == "True"
    assert condition(d, ConditionType.DEGRADED).status == "False"
    assert w.settle()[-1].actions == ()


def test_a_new_driver_that_ends_aborts_the_upgrade_and_the_old_one_runs_on():
    w = upgrading()
    w.change("q-driver-2", phase=DriverPhase.FAILED, exit_code=65, message="QUERY_REFUSED: no such column",
             finished_at=w.now, reason="Error")  # fmt: skip
    d = w.reconcile()
    assert deletes(d) == ["q-driver-2"] and creates(d) == []
    assert d.status.phase is Phase.RUNNING and d.status.driver == "q-driver-1"
    assert d.status.upgrade.state == "Failed" and "exit code 65" in d.status.upgrade.message
    degraded, stalled = condition(d, ConditionType.DEGRADED), condition(d, ConditionType.STALLED)
    assert (degraded.status, degraded.reason) == ("True", Reason.UPGRADE_FAILED)
    assert stalled.status == "True" and "q-driver-1 keeps running" in stalled.message
    assert reasons(d)[0] == Reason.UPGRADE_FAILED
    # not tried again for the same spec: it would fail the same way
    d = w.reconcile()
    assert d.actions == () and d.events == () and d.status.phase is Phase.RUNNING
    # a new spec: a new try
    w.edit(transforms=[{"where": "value > 8"}])
    (run,) = creates(w.reconcile())
    assert run.attempt == 3 and w.status.upgrade.state == "Warming"


def test_a_new_driver_that_cannot_start_aborts_the_upgrade():
    w = upgrading()
    w.change("q-driver-2", waiting="ErrImagePull: not found", waiting_reason="ErrImagePull")
    d = w.reconcile()
    assert deletes(d) == ["q-driver-2"] and d.status.driver == "q-driver-1" and d.status.phase is Phase.RUNNING
    assert "cannot start: ErrImagePull" in d.status.upgrade.message


def test_a_new_driver_not_ready_within_the_bound_aborts_the_upgrade():
    w = upgrading(upgrade={"readyWithin": "90s"})
    w.change("q-driver-2", phase=DriverPhase.RUNNING, started_at=w.now)
    w.advance(60)
    d = w.reconcile()
    assert d.actions == () and d.requeue_after <= 30
    w.advance(31)
    d = w.reconcile()
    assert deletes(d) == ["q-driver-2"] and "not Ready (warm) within upgrade.readyWithin (90s)" in d.status.upgrade.message


def test_no_room_for_a_second_driver_falls_back_to_a_plain_restart():
    w = upgrading()
    w.change("q-driver-2", waiting="Unschedulable: 0/1 nodes are available: 1 Insufficient cpu.", waiting_reason="Unschedulable")
    d = w.reconcile()
    assert sorted(deletes(d)) == ["q-driver-1", "q-driver-2"]
    assert reasons(d) == [Reason.NO_ROOM_FOR_UPGRADE, Reason.SPEC_CHANGED]
    assert d.status.phase is Phase.RESTARTING and "no room for a warm upgrade" in d.status.message
    assert d.status.upgrade is None
    (run,) = creates(w.reconcile())
    assert run.standby is False and run.spec.transforms[0].where == "value > 7"


def test_a_quota_refusing_the_new_driver_falls_back_to_a_plain_restart():
    w = running()
    w.edit(**NEW_THRESHOLD)
    d = w.reconcile(apply=False)
    refused = upgrade.create_refused(w.inputs(), d, CreateRefused("q-driver-2", Refusal.QUOTA, QUOTA_MESSAGE))
    assert refused.verb == "no-room" and refused.status.upgrade.no_room and refused.requeue_after == 0
    w.status = refused.status  # the pod was never made
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and reasons(d) == [Reason.NO_ROOM_FOR_UPGRADE, Reason.SPEC_CHANGED]
    assert "exceeded quota" in d.status.message


def test_another_refusal_of_the_new_driver_aborts_the_upgrade():
    w = running()
    w.edit(**NEW_THRESHOLD)
    d = w.reconcile(apply=False)
    refused = upgrade.create_refused(
        w.inputs(), d, CreateRefused("q-driver-2", Refusal.OTHER, "admission webhook denied the request")
    )
    assert refused.status.upgrade.state == "Failed" and refused.status.phase is Phase.RUNNING
    assert condition(refused, ConditionType.DEGRADED).reason == Reason.UPGRADE_FAILED
    w.status = refused.status
    assert w.reconcile().actions == ()  # the old driver runs on
    assert (
        upgrade.create_refused(w.inputs(), w.history[0], CreateRefused("q-driver-1", Refusal.OTHER, "x")) is None
    )  # not an upgrade's


def test_strategy_restart_is_a_plain_restart():
    w = running(upgrade={"strategy": "restart"})
    w.edit(**NEW_THRESHOLD)
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and creates(d) == [] and d.status.phase is Phase.RESTARTING
    assert "not a warm upgrade" not in d.status.message  # asked for: nothing to explain


def test_a_driver_without_a_lease_is_restarted_and_status_says_why():
    w = running()
    w.change("q-driver-1", fenced=False)  # started by an operator before warm upgrades
    w.edit(**NEW_THRESHOLD)
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and "holds no Lease" in d.status.message


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"checkpoint.volume": None}, "the checkpoint is the driver pod's own"),
        ({"runtime.executors": {"instances": 2}}, "the query runs executors"),
    ],
)
def test_a_query_a_second_driver_cannot_share_is_restarted_and_status_says_why(spec, why):
    w = running(**spec)
    w.edit(**NEW_THRESHOLD)
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and creates(d) == [] and why in d.status.message


def test_a_restart_nonce_is_a_plain_restart():
    w = running()
    w.edit(restartNonce="now")
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and reasons(d) == [Reason.RESTART_REQUESTED]


def test_the_new_driver_is_kept_when_the_status_write_after_its_creation_was_lost():
    w = upgrading()
    w.status = w.history[-2].status  # as before the upgrade started
    w.change("q-driver-2", phase=DriverPhase.RUNNING, ready=True)
    d = w.reconcile()
    assert creates(d) == [] and deletes(d) == ["q-driver-1"] and d.status.driver == "q-driver-2"


def test_a_second_change_while_warming_replaces_the_new_driver():
    w = upgrading()
    w.edit(transforms=[{"where": "value > 9"}])
    d = w.reconcile()
    assert deletes(d) == ["q-driver-2"]
    (run,) = creates(d)
    assert run.attempt == 3 and run.spec.transforms[0].where == "value > 9" and d.status.driver == "q-driver-1"


def test_the_old_driver_failing_while_the_new_one_is_warm_hands_over_at_once():
    w = upgrading()
    w.change("q-driver-2", phase=DriverPhase.RUNNING, ready=True)
    w.change("q-driver-1", phase=DriverPhase.FAILED, exit_code=70, finished_at=w.now)
    d = w.reconcile()
    assert d.verb == "handover" and deletes(d) == ["q-driver-1"] and d.status.driver == "q-driver-2"
    assert [a.holder for a in d.actions if isinstance(a, ReleaseLease)] == ["q-driver-1"]  # it ended: free its Lease now


def test_suspend_while_upgrading_stops_both():
    w = upgrading()
    w.edit(suspend=True)
    d = w.reconcile()
    assert sorted(deletes(d)) == ["q-driver-1", "q-driver-2"] and d.status.phase is Phase.SUSPENDED


def test_a_standby_query_gets_a_standby_of_the_new_spec_after_the_upgrade():
    standby = {"runtime.standby": True, "checkpoint.volume": {"persistentVolumeClaim": {"claimName": "ck"}}}
    w = running(**standby)
    assert w.status.standby == "q-driver-2"  # made once the first driver reported progress, of the old spec
    w.change("q-driver-2", phase=DriverPhase.RUNNING, ready=True)
    w.edit(**NEW_THRESHOLD)
    d = w.reconcile()
    assert deletes(d) == ["q-driver-2"]  # the old spec's standby
    (new,) = creates(d)
    w.change(new.driver_name, phase=DriverPhase.RUNNING, ready=True)
    assert w.reconcile().status.driver == new.driver_name
    w.driver_reports(batchId=5)  # the new driver serves: done, and it gets a standby of its own spec
    d = w.reconcile()
    assert d.status.phase is Phase.RUNNING and d.status.upgrade is None
    (again,) = creates(d)
    assert again.standby and again.spec.transforms[0].where == "value > 7" and d.status.standby == again.driver_name


def test_the_pods_ready_condition_is_observed():
    pod = {"metadata": {"name": "q-driver-2"}, "status": {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}}  # fmt: skip
    assert driver_from_pod(pod).ready
    pod["status"]["conditions"][1]["status"] = "False"
    assert not driver_from_pod(pod).ready


def test_upgrade_is_not_part_of_what_a_driver_runs():
    """Changing spec.upgrade alone restarts nothing (controller.run: not a run field)."""
    w = running()
    w.edit(upgrade={"strategy": "restart", "readyWithin": "1m"})
    assert w.reconcile().actions == ()


def test_the_bound_runs_from_the_upgrade_start():
    w = upgrading()
    w.advance(timedelta(minutes=5).total_seconds())
    d = w.reconcile()
    assert deletes(d) == ["q-driver-2"] and d.status.upgrade.state == "Failed"


# --- blue/green: a change the checkpoint cannot take -------------------------------------------

INCOMPATIBLE = {"source.kafka.topics": ["orders"]}  # the checkpoint's offsets are of another topic


def test_warm_refuses_a_change_the_checkpoint_cannot_take():
    w = running()
    w.edit(**INCOMPATIBLE)
    d = w.reconcile()
    assert d.actions == () and condition(d, ConditionType.STALLED).reason == Reason.INCOMPATIBLE_CHANGE


def blue_green_transitioning() -> World:
    w = running(upgrade={"strategy": "blueGreen"})
    w.edit(**INCOMPATIBLE)
    d = w.reconcile()
    (green,) = creates(d)
    assert green.checkpoint_location == "/checkpoints/q-reset-1" and green.handover_from == "/checkpoints/q"
    assert deletes(d) == [] and d.status.phase is Phase.UPGRADING and d.status.upgrade.blue_green
    assert condition(d, ConditionType.STALLED).status == "False"  # not refused: it runs blue/green
    assert d.status.checkpoint.location == "/checkpoints/q"  # blue's, until green takes over
    assert "blue/green" in d.events[0].message and "/checkpoints/q is kept" in d.events[0].message
    from controller import render
    from controller.config import Settings

    doc = render.query_document(green, Settings())
    assert doc["metadata"]["annotations"]["streamq.io/handover-from"] == "/checkpoints/q"
    assert doc["spec"]["checkpoint"]["location"] == "/checkpoints/q-reset-1"
    return w


def test_blue_green_runs_green_on_a_fresh_checkpoint_from_blues_last_commit():
    w = blue_green_transitioning()
    w.change("q-driver-2", phase=DriverPhase.RUNNING, ready=True)
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and d.status.driver == "q-driver-2"
    assert (d.status.checkpoint.location, d.status.checkpoint.resets) == ("/checkpoints/q-reset-1", 1)
    w.driver_reports(batchId=0, checkpoint="/checkpoints/q-reset-1")
    d = w.reconcile()
    assert d.status.phase is Phase.RUNNING and d.status.upgrade is None
    assert w.settle()[-1].actions == ()  # green's spec runs on its checkpoint: nothing more to do


def test_a_green_that_cannot_start_leaves_blue_running_on_its_checkpoint():
    w = blue_green_transitioning()
    w.change("q-driver-2", waiting="ErrImagePull: no such image", waiting_reason="ErrImagePull")
    d = w.reconcile()
    assert deletes(d) == ["q-driver-2"] and d.status.driver == "q-driver-1" and d.status.phase is Phase.RUNNING
    assert d.status.checkpoint.location == "/checkpoints/q"
    assert condition(d, ConditionType.DEGRADED).reason == Reason.UPGRADE_FAILED
    assert w.reconcile().actions == ()


# --- policy.allowStandby: false: no second driver, no Lease; a change is a plain restart ------


def running_without_standby(**spec) -> World:
    from contract.policy import Policy

    w = World(base_spec(**{"checkpoint.volume": {"persistentVolumeClaim": {"claimName": "streamq-ck"}}, **spec}))
    w.policy = Policy(allow_standby=False)
    w.reconcile()
    assert not w.named("q-driver-1").fenced  # started without STREAMQ_LEASE: it holds no Lease
    w.change("q-driver-1", phase=DriverPhase.RUNNING, started_at=w.now, ready=True)
    w.driver_reports(batchId=3)
    assert w.reconcile().status.phase is Phase.RUNNING
    return w


@pytest.mark.parametrize("strategy", [None, "warm"])
def test_without_standby_on_the_platform_a_spec_change_is_a_plain_restart(strategy):
    w = running_without_standby(**({"upgrade": {"strategy": strategy}} if strategy else {}))
    current = w.named("q-driver-1")
    w.edit(**NEW_THRESHOLD)
    assert not upgrade.wanted(validate_spec(w.spec), current, "another-hash", w.policy)
    assert upgrade.wanted(validate_spec(w.spec), current, "another-hash", None)  # the same spec, no policy: warm
    d = w.reconcile()
    assert deletes(d) == ["q-driver-1"] and creates(d) == [] and d.status.phase is Phase.RESTARTING
    assert "policy.allowStandby: false" in d.status.message and d.status.upgrade is None
    (run,) = [r for dec in w.settle() for r in creates(dec)]
    assert not run.standby and run.attempt == 2 and not w.named("q-driver-2").fenced


def test_without_standby_on_the_platform_blue_green_does_not_run_a_green_driver():
    w = running_without_standby(upgrade={"strategy": "blueGreen"})
    w.edit(**INCOMPATIBLE)
    d = w.reconcile()
    assert creates(d) == [] and condition(d, ConditionType.STALLED).reason == Reason.INCOMPATIBLE_CHANGE
