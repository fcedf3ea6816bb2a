"""The checkpoint the gate picks reaches the pod: it keeps the spec's location rules, or the
query is Invalid and no driver is made (contract.derived.derived_location_problems)."""

from __future__ import annotations

import pytest

from contract.compat import fresh_checkpoint_location
from contract.policy import Policy
from contract.spec import MAX_VALUE
from controller.decide import CreateDriver, DeleteDriver
from controller.phases import Phase, Reason
from controller.status import CheckpointStatus
from tests.unit.controller.world import World, base_spec

pytestmark = pytest.mark.unit

# "-reset-1" fits the limit (the spec is accepted); "-reset-10" is one character past it.
LONG = "/checkpoints/" + "q" * (MAX_VALUE - len("/checkpoints/") - len("-reset-1"))


def running(location: str, policy: Policy | None) -> World:
    w = World(base_spec(**{"checkpoint.location": location, "checkpoint.onIncompatibleChange": "newCheckpoint"}))
    w.policy = policy
    w.reconcile()
    w.driver_runs()
    w.reconcile()
    assert w.status.phase is Phase.RUNNING, w.status.message
    return w


def after_resets(w: World, location: str, resets: int) -> None:
    """As if `resets` incompatible changes had run on fresh checkpoints already."""
    w.status = w.status.model_copy(update={"checkpoint": CheckpointStatus(
        location=fresh_checkpoint_location(location, resets), resets=resets)})  # fmt: skip


@pytest.mark.parametrize("policy", [Policy(), None])
def test_a_fresh_checkpoint_past_the_limit_makes_the_query_invalid_and_starts_nothing(policy):
    w = running(LONG, policy)
    after_resets(w, LONG, 9)
    w.edit(**{"source.kafka.topics": ["orders"]})  # incompatible: reset 10
    d = w.reconcile()
    assert not [a for a in d.actions if isinstance(a, CreateDriver)]
    assert [a.name for a in d.actions if isinstance(a, DeleteDriver)] == ["q-driver-1"]
    assert d.status.phase is Phase.INVALID
    assert "spec.checkpoint.location: policy.derivedLocations: checkpoint reset 10 derives" in d.status.message
    assert fresh_checkpoint_location(LONG, 10)[-30:] in d.status.message
    assert [e.reason for e in d.events] == [Reason.POLICY_VIOLATION]


def test_a_fresh_checkpoint_within_the_rules_starts_as_before():
    w = running(LONG, Policy())
    after_resets(w, LONG, 1)
    w.edit(**{"source.kafka.topics": ["orders"]})  # incompatible: reset 2, still within the limit
    w.reconcile()
    d = w.reconcile()
    (create,) = [a for a in d.actions if isinstance(a, CreateDriver)]
    assert create.run.checkpoint_location == fresh_checkpoint_location(LONG, 2)


def test_a_policy_narrowed_after_a_reset_stops_the_driver_on_the_fresh_checkpoint():
    w = running("/checkpoints/q", Policy())
    after_resets(w, "/checkpoints/q", 1)
    w.policy = Policy(checkpoint_roots=["/checkpoints/q"])  # the spec's own location is still inside
    d = w.reconcile()
    assert d.status.phase is Phase.INVALID and "/checkpoints/q-reset-1" in d.status.message
    assert "policy.checkpointRoots" in d.status.message
