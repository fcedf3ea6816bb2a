"""The chart's driver account creates, patches and deletes pods: a query may run as it only when its
driver starts executors on this platform (policy.allowedServiceAccounts), whatever else the policy lists."""

from __future__ import annotations

import pytest

from contract.load import validate_spec
from contract.policy import OperatorFacts, Policy
from contract.problems import SpecError
from testbed.specs import changed, query_spec

pytestmark = pytest.mark.unit

PATH = "spec.runtime.serviceAccountName"
RULE = "policy.allowedServiceAccounts"
EXECUTORS = {"runtime.executors": {"instances": 2, "cores": 1, "memory": "1Gi"}}
PVC = {"checkpoint.volume": {"persistentVolumeClaim": {"claimName": "streamq-cp"}}}


DEFAULT_FACTS = OperatorFacts()


def problems(spec: dict, policy: Policy, facts: OperatorFacts = DEFAULT_FACTS) -> list[str]:
    try:
        validate_spec(spec, policy=policy, facts=facts, namespace="team-a")
    except SpecError as exc:
        return [str(p) for p in exc.problems]
    return []


def spec_of(account: str, **changes) -> dict:
    return changed(query_spec(), {"runtime.serviceAccountName": account, **changes})


@pytest.mark.parametrize(("spec", "policy", "refused"), [
    (spec_of("streamq-driver"), Policy(), True),
    (spec_of("streamq-driver", **{"runtime.executors": {"instances": 0}}), Policy(), True),
    (spec_of("streamq-driver", **{"runtime.standby": True}, **PVC), Policy(), True),
    (spec_of("streamq-driver", **{"runtime.backend": "sparkApplication"}), Policy(), True),
    (spec_of("streamq-driver"), Policy(allowed_service_accounts=["*"]), True),  # '*' opens no pod rights
    (spec_of("streamq-driver"), Policy(allowed_service_accounts=["streamq-driver"]), True),
    (spec_of("streamq-driver", **EXECUTORS), Policy(max_executors=0), True),
    (spec_of("streamq-driver", **EXECUTORS), Policy(), False),
    (spec_of("streamq-driver", **EXECUTORS), Policy(max_executors=2), False),
    (spec_of("team-a-reader"), Policy(allowed_service_accounts=["*"]), False),  # another account: by the list
])  # fmt: skip
def test_the_driver_account_only_for_a_query_that_runs_executors(spec, policy, refused):
    found = [p for p in problems(spec, policy) if p.startswith(f"{PATH}: {RULE}: ")]
    assert bool(found) == refused, found
    if refused:
        assert "streamq-driver is the driver account" in found[0] and "runtime.executors.instances > 0" in found[0]


def test_the_driver_account_is_the_installations():
    facts = OperatorFacts(driver_service_account="platform-spark")
    assert [p for p in problems(spec_of("platform-spark"), Policy(), facts) if p.startswith(f"{PATH}: {RULE}: ")]
    assert problems(spec_of("platform-spark", **EXECUTORS), Policy(), facts) == []
    # the chart's default name is no longer the driver account there: an account like any other
    assert "not allowed" in problems(spec_of("streamq-driver"), Policy(), facts)[0]
