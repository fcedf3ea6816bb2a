"""The write fence's pure part: which spec places its records through it."""

from __future__ import annotations

import pytest

from app.driver.write_fence import PARTITIONER_CLASS, PARTITIONER_OPTION, fenced
from app.pipeline.plan import kafka_sink_options
from contract.load import validate_spec
from testbed.specs import query_spec, with_change

pytestmark = pytest.mark.unit


def test_a_fenced_kafka_sink_places_its_records_through_the_fence_and_keeps_its_options():
    spec = validate_spec(with_change(query_spec(), "sink", {"kafka": {
        "bootstrapServers": "kafka:9092", "topic": "out", "options": {"kafka.compression.type": "lz4"}}}))  # fmt: skip
    options = kafka_sink_options(fenced(spec))
    assert options[PARTITIONER_OPTION] == PARTITIONER_CLASS
    assert options["kafka.compression.type"] == "lz4"
    assert PARTITIONER_OPTION not in kafka_sink_options(spec)  # the spec itself is not changed


def test_other_sinks_are_left_alone():
    spec = validate_spec(with_change(query_spec(), "sink", {"console": {}}))
    assert fenced(spec) is spec
