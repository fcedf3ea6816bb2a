"""The operator's RBAC grants what its code uses, nothing more (the chart's equals
manifests/base: tests/integration/test_chart.py)."""

from pathlib import Path

import pytest
import yaml

from controller.access import OPERATOR_ACCESS

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def _granted(name: str) -> set[tuple[str, str, str]]:
    docs = [d for d in yaml.safe_load_all((ROOT / "manifests/base/operator-rbac.yaml").read_text()) if d]
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
