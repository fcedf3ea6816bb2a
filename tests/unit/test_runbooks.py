"""The runbooks' commands find what the chart installs: its namespace and its labels (issue #38)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller import names

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()
README = (ROOT / "README.md").read_text()
CHART_TEMPLATES = "\n".join(p.read_text() for p in (ROOT / "charts" / "streamq" / "templates").glob("*"))


def test_the_operators_namespace_in_the_runbooks_is_the_one_the_readme_installs_into():
    installed = re.search(r"helm install streamq charts/streamq --namespace (\S+)", README).group(1)
    assert installed == "streamq"
    assert "-n streamq-system deploy" not in OPERATIONS and "-n streamq-system -l" not in OPERATIONS
    assert f"kubectl logs -n {installed} deploy/streamq-operator" in OPERATIONS


@pytest.mark.parametrize("selector", sorted(set(re.findall(r"-l ([\w./-]+=[\w.-]+)", OPERATIONS))))
def test_every_label_selector_in_the_runbooks_names_a_label_streamq_sets(selector):
    key, value = selector.split("=")
    ours = {names.LABEL_QUERY: "NAME", names.LABEL_COMPONENT: None}
    if key in ours:
        assert ours[key] in (None, value), selector
        return
    assert f"{key}: {value}" in CHART_TEMPLATES, f"{selector}: no chart template sets it"


def test_no_runbook_selects_drivers_by_a_label_they_do_not_carry():
    assert "app.kubernetes.io/component: driver" not in OPERATIONS
    assert "app.kubernetes.io/component=driver" not in OPERATIONS
