"""Every sample a user may copy is a valid StreamingQuery."""

from pathlib import Path

import pytest

from contract.load import load_file

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = sorted(
    p for p in [*ROOT.glob("examples/*.yaml"), *ROOT.glob("manifests/samples/*.yaml")] if "kind: StreamingQuery" in p.read_text()
)


def test_samples_exist():
    names = {p.stem for p in SAMPLES}
    assert {"rate-to-console", "fraud-filter", "micro-batch", "real-time"} <= names


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sample_is_valid(path):
    doc = load_file(path)
    assert doc.name and doc.spec.mode in {"continuous", "realTime", "microBatch", "availableNow"}


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_sample_that_says_exactly_once_writes_exactly_once(path):
    """Issue 38: micro-batch.yaml said "exactly-once" and wrote at least once. A sample's comment is what a
    user copies the sample for: only a Kafka sink with delivery exactlyOnce may claim it."""
    comments = " ".join(line for line in path.read_text().splitlines() if line.lstrip().startswith("#")).lower()
    claims = "exactly-once" in comments or "exactly once" in comments
    kafka = load_file(path).spec.sink.kafka
    assert claims == (kafka is not None and kafka.exactly_once), f"{path.name}: the comment and delivery disagree"
