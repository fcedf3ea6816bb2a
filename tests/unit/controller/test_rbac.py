"""The operator's RBAC grants what its code uses, nothing more (the chart's equals
manifests/base: tests/integration/test_chart.py)."""

from pathlib import Path

import pytest
import yaml

from controller.access import DRIVER_ACCESS, OPERATOR_ACCESS

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def _granted(name: str, manifest: str = "operator-rbac.yaml") -> set[tuple[str, str, str]]:
    docs = [d for d in yaml.safe_load_all((ROOT / "manifests/base" / manifest).read_text()) if d]
    role = next(d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == name)
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def test_every_granted_verb_is_one_the_code_uses_and_every_use_is_granted():
    granted = _granted("streamq-operator")
    assert granted - set(OPERATOR_ACCESS) == set(), "granted, but no call in the code needs it"
    assert set(OPERATOR_ACCESS) - granted == set(), "used by the code, but not granted"


@pytest.mark.parametrize("access", sorted(OPERATOR_ACCESS))
def test_each_verb_names_a_call_that_is_still_there(access):
    module, call = OPERATOR_ACCESS[access]
    assert call in (ROOT / "controller" / module).read_text(), f"{access}: {call!r} is gone from controller/{module}"


def test_the_driver_account_grants_only_what_sparks_client_mode_uses():
    """Spark's scheduler in the driver pod: executor pods and their ConfigMap; no Services
    (the operator makes the driver's), no claims (executors mount an existing one)."""
    assert _granted("streamq-driver", "driver-rbac.yaml") == set(DRIVER_ACCESS)
