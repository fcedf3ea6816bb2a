"""The payments `make dev` feeds, and how their latency is shown."""

import json
import random

import pytest

from contract.load import validate_spec
from devtools.loop import local_spec
from devtools.payments import FLAG_ABOVE, flagged_line, latency_line, latency_ms, payment, percentile

pytestmark = pytest.mark.unit


def test_payments_are_json_with_a_time_and_some_are_large_enough_to_be_flagged():
    rng = random.Random(7)
    made = [json.loads(payment(n, rng, 1_000)[1]) for n in range(2000)]
    assert {"id", "card", "amount", "ts"} <= set(made[0]) and made[0]["ts"] == 1_000
    flagged = [p for p in made if p["amount"] > FLAG_ABOVE]
    assert 40 < len(flagged) < 200  # about one in twenty


def test_latency_is_the_time_from_payment_to_reading_it_back():
    value = json.dumps({"id": "p1", "card": "card-0001", "amount": 1500.0, "ts": 1_000})
    assert latency_ms(value, 1_042) == 42
    assert latency_ms(b"not json", 1_042) is None
    assert flagged_line(value, 42) == "flagged  p1 card-0001 amount  1,500.00  latency 42 ms"


def test_percentiles_are_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([5, 1, 3, 2, 4], 50) == 3 and percentile(list(range(1, 101)), 99) == 99
    assert latency_line("continuous", [10, 20, 30]) == "latency  continuous: p50 20 ms, p99 30 ms, max 30 ms over 3 flagged"


@pytest.mark.parametrize("mode", ["continuous", "realTime", "microBatch"])
def test_the_example_becomes_a_valid_spec_on_the_local_broker_in_each_mode(mode):
    import yaml

    from devtools.loop import EXAMPLE

    doc = local_spec(yaml.safe_load(EXAMPLE.read_text()), "127.0.0.1:39092", mode, "/tmp/ck")
    spec = validate_spec(doc["spec"])
    assert str(spec.mode) == mode
    assert spec.source.kafka.bootstrap_servers == spec.sink.kafka.bootstrap_servers == "127.0.0.1:39092"
    assert spec.checkpoint.location == "/tmp/ck"
