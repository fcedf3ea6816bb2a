"""The exactly-once sink's decisions: names, markers, refusals (contract.exactly_once)."""

import re

import pytest

from contract import exactly_once as eos
from contract.load import validate_spec
from contract.policy import Policy, check_policy
from contract.problems import SpecError
from testbed.specs import query_spec

pytestmark = pytest.mark.unit

EXACTLY_ONCE = {"sink.kafka.delivery": "exactlyOnce"}


def problems(spec: dict) -> list[str]:
    try:
        validate_spec(spec)
    except SpecError as exc:
        return [str(p) for p in exc.problems]
    return []


def test_names_are_per_namespace_and_query_and_never_shared():
    assert eos.transactional_id("team-a", "fraud", 0) == "streamq.team-a.fraud.0"
    assert eos.control_topic("team-a", "fraud") == "streamq.team-a.fraud.eos-markers"
    assert eos.reader_group("team-a", "fraud") == "streamq.team-a.fraud.eos-reader"
    assert eos.transactional_id("team-a", "fraud", 1).startswith(eos.namespace_prefix("team-a"))
    # with a dash between them, namespace team + query a-payments and namespace team-a + query payments
    # spelled the same names, and the prefix streamq-team- covered team-a's: a dot cannot be in either
    assert eos.transactional_id("team", "a-payments", 0) != eos.transactional_id("team-a", "payments", 0)
    assert not eos.control_topic("team-a", "payments").startswith(eos.namespace_prefix("team"))
    names = {eos.transactional_id(ns, q, w) for ns, q in [("a", "x"), ("a", "y"), ("b", "x")] for w in (0, 1)}
    assert len(names) == 6
    assert eos.is_control_topic(eos.control_topic("a", "x")) and not eos.is_control_topic("payments")


@pytest.mark.parametrize("topic", [
    "streamq.team-b.payments.eos-markers",
    "streamq_team-b_payments_eos-markers",  # Kafka refuses one beside the other ('.' and '_' collide in metrics)
    "streamq.team-b_payments.eos-markers",
    "streamq-team-b-payments-eos-markers",  # the names before namespace and query were kept apart
])  # fmt: skip
def test_a_topic_that_is_or_collides_with_a_control_topic_is_one(topic):
    assert eos.is_control_topic(topic)


@pytest.mark.parametrize(("namespace", "query"), [
    ("team.a", "q"), ("team", "a.q"), ("Team", "q"), ("team", "q_1"), ("", "q"), ("team", ""), ("n" * 64, "q"),
    ("team", "q\n"), ("team\n", "q"),
])  # fmt: skip
def test_a_name_that_is_no_label_names_nothing(namespace, query):
    with pytest.raises(ValueError, match="DNS-1123 label"):
        eos.transactional_id(namespace, query, 0)


def test_the_longest_names_are_legal_topics_and_never_shortened():
    ns, query = "n" * 63, "q" * 63
    for name in (eos.control_topic(ns, query), eos.reader_group(ns, query), eos.transactional_id(ns, query, 999)):
        assert len(name) <= eos.LONGEST_NAME <= eos.MAX_TOPIC
        assert ns in name and query in name
        assert re.fullmatch(r"[a-zA-Z0-9._-]+", name)


def test_a_marker_round_trips_and_anything_else_is_no_marker():
    marker = eos.Marker("ckpt-id", 7, 1, 2)
    assert eos.Marker.decode(marker.encode()) == marker
    for raw in (None, b"", b"not json", b"[]", b'{"v":2,"checkpoint":"c","batch":1,"writer":0,"writers":1}'):
        assert eos.Marker.decode(raw) is None


@pytest.mark.parametrize(("last", "written"), [
    (None, False),
    (eos.Marker("ck", 6, 1, 2), False),  # the previous batch: this one was not committed
    (eos.Marker("ck", 7, 1, 2), True),
    (eos.Marker("ck", 8, 1, 2), True),
    (eos.Marker("other-checkpoint", 9, 1, 2), False),  # a new checkpoint counts batches from 0 again
    (eos.Marker("ck", 7, 0, 2), False),
])  # fmt: skip
def test_a_writers_part_is_skipped_only_when_its_marker_is_committed(last, written):
    assert eos.already_written(last, "ck", 7, 1) is written


M = eos.Marker


@pytest.mark.parametrize(("lasts", "writers"), [
    ([], 1),  # a new control topic
    ([None, None], 1),
    ([M("ck", 6, 0, 2), M("ck", 6, 1, 2)], 1),  # batch 6 was committed whole: 7 starts under the new count
    ([M("ck", 7, 0, 2), M("ck", 6, 1, 2)], 2),  # writer 0 of 2 committed 7, writer 1 did not: finish under 2
    ([M("ck", 6, 0, 2), M("ck", 7, 1, 2)], 2),
    ([M("ck", 7, 0, 2), M("ck", 7, 1, 2)], 2),  # written whole, commits/7 not yet: under 2 every writer skips
    ([M("ck", 7, 0, 1), M("ck", 3, 1, 2)], 1),  # the driver (writer 0 of 1) wrote 7; partition 1 is older
    ([M("old", 9, 0, 2), M("old", 9, 1, 2)], 1),  # another checkpoint's markers count batches of their own
    ([M("ck", 7, 0, 4), None, None, M("ck", 5, 3, 4)], 4),  # a count taken down since: the topic kept 4
])  # fmt: skip
def test_a_batch_begun_under_another_writer_count_is_finished_under_it(lasts, writers):
    assert eos.replay_writers(lasts, "ck", 7, 1) == writers


def test_a_replayed_batch_with_markers_of_two_counts_is_refused_not_guessed():
    with pytest.raises(eos.MixedWriterCounts, match=r"batch 7 has committed markers of \[1, 2\] writers"):
        eos.replay_writers([M("ck", 7, 0, 1), M("ck", 7, 1, 2)], "ck", 7, 2)


@pytest.mark.parametrize("mode", ["continuous", "realTime"])
def test_modes_without_a_batch_are_refused_with_the_reason(mode):
    found = problems(query_spec(mode=mode, **EXACTLY_ONCE))
    assert any(p.startswith("spec.sink.kafka.delivery: ") and "no batch to commit atomically" in p for p in found), found


@pytest.mark.parametrize("mode", ["microBatch", "availableNow"])
def test_micro_batch_modes_take_it(mode):
    assert problems(query_spec(mode=mode, **EXACTLY_ONCE)) == []


def test_the_timeout_is_checked_against_the_trigger_interval_and_the_broker():
    spec = query_spec(mode="microBatch", trigger={"microBatch": {"interval": "2m"}}, **EXACTLY_ONCE)
    assert any("longer than the trigger interval" in p for p in problems(spec))
    assert problems(query_spec(spec, **{"sink.kafka.transactions": {"timeout": "5m"}})) == []
    found = problems(query_spec(spec, **{"sink.kafka.transactions": {"timeout": "20m"}}))
    assert any("transaction.max.timeout.ms" in p for p in found), found


def test_readers_wait_at_most_until_the_restart_or_the_timeout():
    spec = validate_spec(query_spec(mode="microBatch", **EXACTLY_ONCE, **{"restartPolicy.backoff.initial": "5s"}))
    assert eos.reader_wait_ms(spec) == 5000
    never = validate_spec(query_spec(mode="microBatch", **EXACTLY_ONCE, **{"restartPolicy.type": "Never"}))
    assert eos.reader_wait_ms(never) == 60_000


def test_nondeterministic_transforms_are_refused_and_map_only_ones_pass():
    spec = query_spec(mode="microBatch", **EXACTLY_ONCE, **{"transforms.1": {"withColumn": {"name": "r", "expr": "rand() * 2"}}})
    assert any("transforms[1].withColumn.expr" in p and "rand" in p for p in problems(spec))
    bare = query_spec(mode="microBatch", **EXACTLY_ONCE, **{"transforms.1": {"where": "current_timestamp > timestamp"}})
    assert any("current_timestamp" in p for p in problems(bare))
    # the same functions are fine at least once: a replay writes again anyway
    assert problems(query_spec(mode="microBatch", **{"transforms.1": {"withColumn": {"name": "r", "expr": "rand()"}}})) == []


def test_speculation_options_and_stray_settings_are_refused():
    spec = query_spec(mode="microBatch", **EXACTLY_ONCE, **{"runtime.sparkConf": {"spark.speculation": "true"},
                      "sink.kafka.options": {"kafka.acks": "1", "kafka.linger.ms": "5", "kafka.buffer.memory": "1"}})  # fmt: skip
    found = problems(spec)
    assert any("speculative" in p for p in found)
    assert any("options.kafka.acks: " in p and "sets acks itself" in p for p in found)
    assert any("options.kafka.buffer.memory: " in p for p in found)
    assert not any("kafka.linger.ms" in p for p in found)
    stray = query_spec(mode="microBatch", **{"sink.kafka.transactions": {"producers": 3}})
    assert any("exactlyOnce only" in p for p in problems(stray))


def test_the_policy_keeps_transactional_ids_and_control_topics_to_their_query():
    for topic in ("streamq.b.q.eos-markers", "streamq_b_q_eos-markers"):
        spec = validate_spec(query_spec(mode="microBatch", **{"sink.kafka.topic": topic}))
        assert any("policy.transactionalNames" in str(p) for p in check_policy(spec, Policy(), namespace="a"))
    wanted = validate_spec(query_spec(mode="microBatch", **EXACTLY_ONCE))
    assert check_policy(wanted, Policy(), namespace="a") == []
    (problem,) = check_policy(wanted, Policy.model_validate({"allowExactlyOnce": False}), namespace="a")
    assert "policy.allowExactlyOnce" in str(problem)


def test_the_driver_writes_by_default_takes_one_producer_and_says_so_otherwise():
    def writer(transactions: dict | None) -> bool:
        fields = {} if transactions is None else {"sink.kafka.transactions": transactions}
        return validate_spec(query_spec(mode="microBatch", **EXACTLY_ONCE, **fields)).sink.kafka.writes_from_driver

    assert writer(None) and writer({"timeout": "30s"}) and writer({"producers": 1}) and writer({"writer": "driver"})
    assert not writer({"producers": 2}) and not writer({"writer": "tasks"}) and not writer({"writer": "tasks", "producers": 1})
    spec = query_spec(mode="microBatch", **EXACTLY_ONCE, **{"sink.kafka.transactions": {"writer": "driver", "producers": 3}})
    assert [p for p in problems(spec) if "transactions.producers" in p and "set producers to 1" in p]
    assert not validate_spec(query_spec(mode="microBatch")).sink.kafka.writes_from_driver  # at least once: Spark's writer
    # tasks (or unset) takes any count
    for transactions in ({"writer": "tasks", "producers": 3}, {"producers": 3}):
        assert problems(query_spec(mode="microBatch", **EXACTLY_ONCE, **{"sink.kafka.transactions": transactions})) == []
