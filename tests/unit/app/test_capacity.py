"""What one query can hold at once (contract.capacity): every driver that can run at once counts
with its executors, and the default policy's caps compare that."""

from __future__ import annotations

from decimal import Decimal

import pytest

from contract.capacity import concurrent_drivers, cores_at_once, executors_at_once, memory_at_once, second_driver
from contract.load import validate_spec
from contract.policy import Policy, check_policy
from testbed.specs import changed, query_spec

pytestmark = pytest.mark.unit

PVC = {"persistentVolumeClaim": {"claimName": "streamq-checkpoints"}}
LOCAL = query_spec()  # the driver's own /checkpoints/fraud: no second driver could read it
SHARED = changed(LOCAL, {"checkpoint.volume": PVC})
GI = 2**30

DRIVERS = {
    "one driver, its own checkpoint": (LOCAL, 1, None),
    "a shared checkpoint: warm upgrades (the default)": (SHARED, 2, "warm upgrades"),
    "warm upgrades asked for by name": (changed(SHARED, {"upgrade": {"strategy": "warm"}}), 2, "warm upgrades"),
    "blue/green": (changed(SHARED, {"upgrade": {"strategy": "blueGreen"}}), 2, "upgrade.strategy blueGreen"),
    "upgrade.strategy restart": (changed(SHARED, {"upgrade": {"strategy": "restart"}}), 1, None),
    "executors: upgrades are restarts": (changed(SHARED, {"runtime.executors": {"instances": 2}}), 1, None),
    "a standby": (changed(SHARED, {"runtime.standby": True}), 2, "runtime.standby"),
    "a standby with executors": (
        changed(SHARED, {"runtime.standby": True, "runtime.executors": {"instances": 2}}),
        2,
        "runtime.standby",
    ),
    "a standby with strategy restart": (
        changed(SHARED, {"runtime.standby": True, "upgrade": {"strategy": "restart"}}),
        2,
        "runtime.standby",
    ),
    "standby false": (changed(SHARED, {"runtime.standby": False, "upgrade": {"strategy": "restart"}}), 1, None),
    "SparkApplication backend": (changed(SHARED, {"runtime.backend": "sparkApplication"}), 1, None),
}


@pytest.mark.parametrize("case", sorted(DRIVERS))
def test_drivers_that_can_run_at_once(case):
    spec, drivers, why = DRIVERS[case]
    parsed = validate_spec(spec)
    assert (concurrent_drivers(parsed), second_driver(parsed)) == (drivers, why)


TOTALS = {
    # case: (spec, executors, cores, memory in bytes)
    "defaults, one driver": (LOCAL, 0, 1, 1 * GI),
    "defaults, warm upgrades": (SHARED, 0, 2, 2 * GI),
    "executors, one driver": (
        changed(LOCAL, {"runtime.executors": {"instances": 4, "cores": 2, "memory": "4Gi"}}),
        4,
        1 + 4 * 2,
        1 * GI + 4 * 4 * GI * Decimal("1.1"),
    ),
    "a standby with executors: both sets": (
        changed(SHARED, {"runtime.standby": True, "runtime.executors": {"instances": 4, "cores": 2, "memory": "4Gi"}}),
        8,
        2 * (1 + 4 * 2),
        2 * (1 * GI + 4 * 4 * GI * Decimal("1.1")),
    ),
    "coreRequest over cores counts, twice": (
        changed(SHARED, {"runtime.driver": {"cores": 1, "coreRequest": "2500m"}}),
        0,
        5,
        2 * GI,
    ),
    "a small executor: Spark's 384Mi overhead, twice": (
        changed(SHARED, {"runtime.standby": True, "runtime.executors": {"instances": 1, "memory": "512Mi"}}),
        2,
        2 * 2,
        2 * (GI + (512 + 384) * 2**20),
    ),
}


@pytest.mark.parametrize("case", sorted(TOTALS))
def test_what_counts_at_once(case):
    spec, executors, cores, memory = TOTALS[case]
    parsed = validate_spec(spec)
    assert executors_at_once(parsed).total == executors
    assert cores_at_once(parsed).total == cores
    assert memory_at_once(parsed).total == memory


CAPS = {
    # case: (spec, the rule it breaks with the default policy, or None)
    "a standby at exactly half of every cap passes": (
        changed(
            SHARED,
            {
                "runtime.standby": True,
                "runtime.driver": {"cores": 1, "memory": "4Gi"},
                "runtime.executors": {"instances": 5, "cores": 3, "memory": "4Gi"},
            },
        ),  # 16 cores, 5 + 5 executors
        None,
    ),
    "one more executor core past half": (
        changed(
            SHARED, {"runtime.standby": True, "runtime.driver": {"cores": 2}, "runtime.executors": {"instances": 5, "cores": 3}}
        ),  # 2 x 17
        "policy.maxCores",
    ),
    "a 16-core warm-upgrade driver passes, 17 does not": (changed(SHARED, {"runtime.driver": {"cores": 16}}), None),
    "a 17-core warm-upgrade driver": (changed(SHARED, {"runtime.driver": {"cores": 17}}), "policy.maxCores"),
    "the same 17 cores with upgrade.strategy restart pass": (
        changed(SHARED, {"runtime.driver": {"cores": 17}, "upgrade": {"strategy": "restart"}}),
        None,
    ),
    "a 32Gi blue/green driver passes": (
        changed(SHARED, {"upgrade": {"strategy": "blueGreen"}, "runtime.driver": {"memory": "32Gi"}}),
        None,
    ),
    "a 33Gi blue/green driver": (
        changed(SHARED, {"upgrade": {"strategy": "blueGreen"}, "runtime.driver": {"memory": "33Gi"}}),
        "policy.maxMemory",
    ),
    "a standby with 6 executors": (
        changed(SHARED, {"runtime.standby": True, "runtime.executors": {"instances": 6}}),
        "policy.maxExecutors",
    ),
    "10 executors without a second driver pass": (changed(LOCAL, {"runtime.executors": {"instances": 10}}), None),
}


@pytest.mark.parametrize("case", sorted(CAPS))
def test_the_default_caps_count_every_driver(case):
    spec, rule = CAPS[case]
    broken = {p.message.split(":")[0] for p in check_policy(validate_spec(spec), Policy(), namespace="team-a")}
    caps = broken & {"policy.maxExecutors", "policy.maxCores", "policy.maxMemory"}
    assert caps == ({rule} if rule else set()), broken


def test_the_message_says_how_many_drivers_and_why():
    spec = changed(SHARED, {"runtime.standby": True, "runtime.driver": {"cores": 2},
                            "runtime.executors": {"instances": 10, "cores": 3}})  # fmt: skip
    messages = [str(p) for p in check_policy(validate_spec(spec), Policy(), namespace="team-a")]
    assert (
        "spec.runtime: policy.maxCores: 2 drivers at once (runtime.standby): 2 x (2 driver + 10 x 3 executor) = 64 cores"
        " (per pod cores or coreRequest, the larger), at most 32 allowed" in messages
    )
    assert (
        "spec.runtime.executors.instances: policy.maxExecutors: 2 drivers at once (runtime.standby): "
        "2 x (10 executors) = 20 executors, at most 10 allowed" in messages
    )
