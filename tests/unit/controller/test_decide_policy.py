"""The platform's policy refuses a spec before any driver exists."""

from dataclasses import replace

import pytest

from contract.policy import OperatorFacts, Policy
from controller.decide import CreateDriver, DeleteDriver, decide
from controller.phases import Phase, Reason
from tests.unit.controller.world import World, base_spec

pytestmark = pytest.mark.unit

FACTS = OperatorFacts(job_image="streamq:1.0.0", driver_service_account="streamq-driver",
                      operator_service_account="streamq-operator", operator_namespace="streamq")  # fmt: skip


def _decide(world: World, policy: Policy):
    return decide(replace(world.inputs(), policy=policy, facts=FACTS))


def test_a_spec_outside_the_policy_is_invalid_with_an_event_and_no_driver():
    world = World(base_spec(**{"runtime.image": "evil.io/miner:1"}))
    decision = _decide(world, Policy())
    assert decision.status.phase is Phase.INVALID
    assert "policy.allowedImages" in decision.status.message and "evil.io/miner:1" in decision.status.message
    assert not any(isinstance(a, CreateDriver) for a in decision.actions)
    assert [e.reason for e in decision.events] == [Reason.POLICY_VIOLATION]


def test_the_same_spec_runs_where_the_policy_allows_it():
    world = World(base_spec(**{"runtime.image": "evil.io/miner:1"}))
    decision = _decide(world, Policy(allowed_images=("evil.io/*",)))
    assert decision.status.phase is not Phase.INVALID
    assert any(isinstance(a, CreateDriver) for a in decision.actions)


def test_a_tightened_policy_stops_a_running_query():
    world = World(base_spec(**{"runtime.image": "evil.io/miner:1"}))
    world.add_driver(name="q-driver-1", attempt=1)
    decision = _decide(world, Policy())
    assert decision.status.phase is Phase.INVALID
    assert [a.name for a in decision.actions if isinstance(a, DeleteDriver)] == ["q-driver-1"]


def test_no_policy_means_none_applies():
    world = World(base_spec(**{"runtime.image": "evil.io/miner:1"}))
    assert decide(world.inputs()).status.phase is not Phase.INVALID
