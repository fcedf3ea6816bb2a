import pytest

from app.pipeline.plan import kafka_sink_options, kafka_source_options
from contract.load import validate_spec
from testbed.specs import query_spec, with_change

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("mode", ["continuous", "realTime"])
def test_low_latency_modes_send_each_record_without_waiting_for_a_batch(mode):
    spec = query_spec(mode=mode)
    if mode == "realTime":
        spec["outputMode"] = "update"
    options = kafka_sink_options(validate_spec(spec))
    assert options == {"kafka.bootstrap.servers": "kafka:9092", "topic": "flagged", "kafka.linger.ms": "0"}


@pytest.mark.parametrize("mode", ["microBatch", "availableNow"])
def test_batch_modes_keep_the_producers_own_batching(mode):
    assert "kafka.linger.ms" not in kafka_sink_options(validate_spec(query_spec(mode=mode)))


def test_the_specs_own_producer_options_win():
    spec = with_change(query_spec(), "sink.kafka.options", {"kafka.linger.ms": "20", "kafka.acks": "all"})
    options = kafka_sink_options(validate_spec(spec))
    assert options["kafka.linger.ms"] == "20" and options["kafka.acks"] == "all"


def test_continuous_mode_bounds_how_long_the_broker_may_hold_a_fetch():
    assert kafka_source_options(validate_spec(query_spec(mode="continuous")))["kafka.fetch.max.wait.ms"] == "10"


@pytest.mark.parametrize("mode", ["realTime", "microBatch", "availableNow"])
def test_other_modes_keep_the_consumers_fetch_wait(mode):
    spec = query_spec(mode=mode)
    if mode == "realTime":
        spec["outputMode"] = "update"
    assert "kafka.fetch.max.wait.ms" not in kafka_source_options(validate_spec(spec))


def test_the_specs_own_consumer_options_win():
    spec = with_change(query_spec(mode="continuous"), "source.kafka.options", {"kafka.fetch.max.wait.ms": "100"})
    assert kafka_source_options(validate_spec(spec))["kafka.fetch.max.wait.ms"] == "100"


def test_a_driver_pods_consumer_groups_fall_under_its_namespace_prefix(monkeypatch):
    monkeypatch.setenv("STREAMQ_QUERY", "payments")
    monkeypatch.setenv("POD_NAMESPACE", "team-a")
    spec = validate_spec(query_spec())
    assert kafka_source_options(spec)["kafka.group.id"] == "streamq.team-a.payments.source"
    own = validate_spec(with_change(query_spec(), "source.kafka.options", {"groupIdPrefix": "streamq.team-a.mine"}))
    assert "kafka.group.id" not in kafka_source_options(own)  # the spec named its groups itself
    monkeypatch.delenv("STREAMQ_QUERY")
    assert "kafka.group.id" not in kafka_source_options(spec)  # a local run: Spark's own default
