"""Every sample a user may copy is a valid StreamingQuery."""

from pathlib import Path

import pytest

from app.contract.load import load_file

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = sorted(
    p for p in [*ROOT.glob("examples/*.yaml"), *ROOT.glob("manifests/samples/*.yaml")]
    if "kind: StreamingQuery" in p.read_text()
)


def test_samples_exist():
    names = {p.stem for p in SAMPLES}
    assert {"rate-to-console", "fraud-filter", "micro-batch", "real-time"} <= names


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sample_is_valid(path):
    doc = load_file(path)
    assert doc.name and doc.spec.mode in {"continuous", "realTime", "microBatch", "availableNow"}
