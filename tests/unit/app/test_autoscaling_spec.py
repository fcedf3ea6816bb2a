"""spec.autoscaling (lag-driven autoscaling, issue #40): its rules, its policy caps, and what a change to it means."""

from __future__ import annotations

import pytest

from contract.load import validate_spec
from contract.policy import Policy
from contract.problems import SpecError
from contract.rules import RECOMMEND_ONLY
from contract.spec import QuerySpec
from controller.run import spec_hash
from testbed.specs import changed, query_spec

pytestmark = pytest.mark.unit

MICRO = changed(query_spec(mode="microBatch"), {"runtime.executors": {"instances": 2, "cores": 1}})
AUTO = changed(MICRO, {"autoscaling": {"minExecutors": 1, "maxExecutors": 6}})


def problems(spec: dict, policy: Policy | None = None) -> list[str]:
    try:
        validate_spec(spec, policy=policy)
    except SpecError as exc:
        return [str(p) for p in exc.problems]
    return []


def test_defaults_recommend_only():
    auto = QuerySpec.model_validate(AUTO).autoscaling
    assert auto is not None and auto.recommend_only and auto.target_utilization == 0.7
    assert (auto.catch_up_duration, auto.stabilization_window, auto.cool_down) == ("5m", "1m", "5m")
    assert problems(AUTO) == []


@pytest.mark.parametrize(
    ("changes", "path", "says"),
    [
        ({"autoscaling.minExecutors": 7}, "spec.autoscaling", "minExecutors is larger than maxExecutors (7 > 6)"),
        ({"runtime.executors.instances": 8}, "spec.runtime.executors.instances", "8 is not within 1..6"),
        ({"runtime.executors.instances": 0}, "spec.runtime.executors.instances", "0 is not within 1..6"),
        ({"autoscaling.catchUpDuration": "0s"}, "spec.autoscaling.catchUpDuration", "longer than 0"),
        ({"autoscaling.stabilizationWindow": "0m"}, "spec.autoscaling.stabilizationWindow", "longer than 0"),
    ],
)
def test_rules(changes, path, says):
    found = problems(changed(AUTO, changes))
    assert any(p.startswith(f"{path}: ") and says in p for p in found), found


@pytest.mark.parametrize(
    "changes",
    [
        {},  # microBatch: resized in place
        {"trigger": {"continuous": {"checkpointInterval": "1s"}}},  # a driver of the new size takes over
        {"trigger": {"realTime": {"batchDuration": "5s"}}, "outputMode": "update"},
    ],
    ids=["microBatch", "continuous", "realTime"],
)
def test_recommend_only_false_is_taken_on_the_pod_backend(changes):
    assert problems(changed(AUTO, {"autoscaling.recommendOnly": False, **changes})) == []


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"trigger": {"availableNow": {}}}, "availableNow"),
        ({"runtime.backend": "sparkApplication"}, "backend pod only"),
    ],
)
def test_recommend_only_false_is_refused_where_nothing_can_act(changes, why):
    found = problems(changed(AUTO, {"autoscaling.recommendOnly": False, **changes}))
    assert any(p.startswith("spec.autoscaling.recommendOnly: ") and why in p for p in found), found
    assert "kubectl scale" in RECOMMEND_ONLY


@pytest.mark.parametrize(
    ("field", "value"), [("targetUtilization", 0), ("targetUtilization", 1.5), ("maxExecutors", 0), ("catchUpDuration", "5 min")]
)
def test_field_bounds(field, value):
    assert problems(changed(AUTO, {f"autoscaling.{field}": value}))


def test_max_executors_within_the_policy_caps():
    """A recommendation never exceeds what the policy would let the query run: maxExecutors is checked as if
    runtime.executors.instances were it (executors, cores, memory)."""
    policy = Policy(max_executors=4, max_cores=100, max_memory="1000Gi")
    found = problems(AUTO, policy)
    assert found == [
        "spec.autoscaling.maxExecutors: policy.maxExecutors: at autoscaling.maxExecutors 6: 6 executors = 6 executors, "
        "at most 4 allowed"
    ]
    assert problems(changed(AUTO, {"autoscaling.maxExecutors": 4}), policy) == []
    cores = problems(changed(AUTO, {"runtime.executors.cores": 4}), Policy(max_executors=10, max_cores=16))
    assert [p.split(": ")[:2] for p in cores] == [["spec.autoscaling.maxExecutors", "policy.maxCores"]]


def test_a_change_of_autoscaling_needs_no_new_driver():
    before = QuerySpec.model_validate(AUTO)
    after = QuerySpec.model_validate(changed(AUTO, {"autoscaling.maxExecutors": 3}))
    plain = QuerySpec.model_validate(MICRO)
    assert spec_hash(before, "/ck") == spec_hash(after, "/ck") == spec_hash(plain, "/ck")


@pytest.mark.parametrize(
    ("executors", "says"),
    [
        ({"coreRequest": "300m", "coreLimit": "300m"}, None),
        ({"cores": 2, "coreLimit": "2"}, None),
        ({"coreLimit": "1500m"}, None),  # above the request: a burst allowed
        ({"coreRequest": "300m", "coreLimit": "250m"}, "250m < 300m"),
        ({"cores": 2, "coreLimit": "1"}, "1 < 2"),  # cores is the request when coreRequest is unset
        ({"coreLimit": "500m"}, "500m < 1"),
    ],
)
def test_an_executor_cpu_limit_is_at_least_its_request(executors, says):
    """What the issue's small executors are (a few hundred millicores each, so one cannot keep up): a limit,
    which Kubernetes refuses below the request; the spec says so before a driver asks for pods that never come."""
    found = problems(changed(MICRO, {"runtime.executors": {"instances": 1, **executors}}))
    if says is None:
        assert found == []
    else:
        assert found == [f"spec.runtime.executors.coreLimit: coreLimit is below the executor's CPU request "
                         f"(coreRequest, or cores when unset): {says}"]  # fmt: skip
