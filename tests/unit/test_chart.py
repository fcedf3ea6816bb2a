"""What can be checked of the Helm chart (charts/streamq) without the helm binary;
`helm lint` and `helm template` are in tests/integration/test_chart.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

CHART = Path(__file__).resolve().parents[2] / "charts" / "streamq"


def test_crds_folder_holds_the_generated_crd():
    crd = CHART / "crds" / "streamingqueries.streamq.io.yaml"
    assert crd.is_file(), f"{crd} is missing: `python -m controller.crd` writes it"
    doc = yaml.safe_load(crd.read_text())
    assert doc["kind"] == "CustomResourceDefinition" and doc["spec"]["group"] == "streamq.io"
