"""Checkpoint compatibility: every refusal names the spec field to change."""

import pytest

from contract.checkpoint import CheckpointState, StatefulOperator
from contract.compat import Holds, checkpoint_differences, choose_fresh_location, refusal, spec_differences
from contract.load import validate_spec
from testbed.specs import query_spec, with_change

pytestmark = pytest.mark.unit

BASE = query_spec(mode="microBatch")


def spec(path=None, value=None):
    return validate_spec(BASE if path is None else with_change(BASE, path, value))


def holds(*kinds, topics=(), ops=()):
    return Holds(tuple(kinds), frozenset(topics), tuple(ops))


def test_holds_of_a_checkpoint():
    state = CheckpointState("/ck", True, last_committed=3, committed_offsets=[{"payments": {"0": 4}}],
                            stateful_operators=(StatefulOperator(0, "dedupe"), StatefulOperator(1, None)))  # fmt: skip
    h = Holds.of(state)
    assert h == holds("kafka", topics=["payments"], ops=["dedupe", "unknown"])
    assert Holds.from_wire(h.to_wire()) == h
    assert h.to_wire().model_dump(by_alias=True) == {"sourceKinds": list(h.source_kinds), "topics": sorted(h.topics),
                                                     "statefulOperators": list(h.stateful_operators)}  # fmt: skip
    assert Holds.from_wire(None) is None


def test_a_checkpoint_of_the_same_source_fits():
    assert checkpoint_differences(holds("kafka", topics=["payments"]), spec()) == []
    assert checkpoint_differences(holds(), spec()) == []  # nothing recorded yet


@pytest.mark.parametrize(("h", "path", "value", "field"), [
    (holds("kafka", topics=["orders"]), None, None, "spec.source.kafka.topics: the checkpoint holds offsets of topics ['orders'], the spec reads ['payments']"),
    (holds("kafka", topics=["payments", "refunds"]), None, None, "spec.source.kafka.topics"),
    (holds("kafka", "kafka", topics=["payments"]), None, None, "spec.source: the checkpoint was written by a query with 2 sources"),
    (holds("other"), None, None, "spec.source: the checkpoint holds offsets of a non-Kafka source, the spec reads a kafka source"),
    (holds("kafka", topics=["payments"]), "source", {"rate": {}}, "spec.source: the checkpoint holds Kafka offsets of topics ['payments'], the spec reads a rate source"),
    (holds("kafka", topics=["payments"]), "source.kafka", {"bootstrapServers": "k:9092", "pattern": "order.*"}, "spec.source.kafka.pattern: none of the checkpoint's topics"),
    (holds("kafka", topics=["payments"], ops=["stateStoreSave"]), None, None, "spec.transforms: the checkpoint holds the state of stateful operator(s) stateStoreSave"),
])  # fmt: skip
def test_what_the_checkpoint_holds_against_the_spec(h, path, value, field):
    found = checkpoint_differences(h, spec(path, value))
    assert found and found[0].startswith(field), found


def test_state_is_fine_when_a_transform_may_keep_it_but_not_in_continuous_mode():
    stateful = holds("kafka", topics=["payments"], ops=["stateStoreSave"])
    assert (
        checkpoint_differences(stateful, spec("transforms", [{"sql": "SELECT key, count(*) AS n FROM input GROUP BY key"}])) == []
    )
    continuous = validate_spec(query_spec(mode="continuous"))
    assert checkpoint_differences(stateful, continuous)[0].startswith("spec.trigger: the checkpoint holds the state")


def test_a_pattern_that_still_matches_fits():
    assert (
        checkpoint_differences(
            holds("kafka", topics=["pay-1"]), spec("source.kafka", {"bootstrapServers": "k:9092", "pattern": "pay-.*"})
        )
        == []
    )


def test_spec_differences_name_the_field():
    assert spec_differences(spec(), spec("source.kafka.topics", ["orders"])) == [
        "spec.source.kafka.topics changed from ['payments'] to ['orders']"
    ]
    assert spec_differences(spec(), spec("source.kafka.startingOffsets", "latest")) == []
    assert spec_differences(spec(), spec("transforms", [])) == []


def test_refusal_says_what_to_do():
    text = refusal("spec.source.kafka.topics changed", "/ck")
    assert text.startswith("spec.source.kafka.topics changed: the checkpoint at /ck cannot be reused")
    assert "spec.checkpoint.location" in text and "onIncompatibleChange: newCheckpoint" in text


def test_a_fresh_location_is_chosen_the_same_way_on_every_restart():
    disk = {"/ck-reset-1": CheckpointState("/ck-reset-1", True, committed_offsets=[{"orders": {"0": 1}}])}
    read = lambda loc: disk.get(loc, CheckpointState(loc, False))  # noqa: E731
    assert choose_fresh_location("/ck", spec(), read)[0] == "/ck-reset-2"  # reset-1 holds another source
    disk["/ck-reset-2"] = CheckpointState("/ck-reset-2", True, committed_offsets=[{"payments": {"0": 3}}])
    location, state = choose_fresh_location("/ck", spec(), read)
    assert location == "/ck-reset-2" and state.exists  # resumed from, not made again
