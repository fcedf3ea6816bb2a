"""spec.source.kafka.reader (issue #43): which source reads the topics, Spark's Kafka source or
streamq's continuous-mode one (jvm/reader). One field in the spec model, one rule (with its CEL
twin in the CRD), the format the job loads, and the tenant policy over its options."""

import re
from pathlib import Path

import pytest

from app.pipeline.plan import SOURCE_FORMATS, kafka_source_format, kafka_source_options
from contract.compat import spec_differences
from contract.load import dump_spec, validate_spec
from contract.modes import Mode
from contract.policy import OperatorFacts, Policy
from contract.problems import SpecError
from contract.rules import KNOWN_SOURCE_OPTIONS, RULES, SPARK_READER_ONLY, check_rules
from contract.spec import KafkaReader, QuerySpec
from controller.crd import render_crd
from testbed.specs import query_spec, with_change
from tests.hostile_specs import REFUSED_BY_POLICY

pytestmark = pytest.mark.unit

FACTS = OperatorFacts(operator_namespace="streamq-system")


def reading(reader: str | None, mode: str = "continuous", **options: str) -> dict:
    spec = query_spec(mode=mode)
    if mode == "realTime":
        spec["outputMode"] = "update"
    if reader is not None:
        spec = with_change(spec, "source.kafka.reader", reader)
    if options:
        spec = with_change(spec, "source.kafka.options", options)
    return spec


def problems(spec: dict, policy: Policy | None = None, namespace: str | None = "team-a") -> list[str]:
    try:
        validate_spec(spec, policy=policy, facts=FACTS, namespace=namespace)
    except SpecError as exc:
        return [str(p) for p in exc.problems]
    return []


@pytest.mark.parametrize(("reader", "effective", "format_"), [
    (None, KafkaReader.SPARK, "kafka"),
    ("spark", KafkaReader.SPARK, "kafka"),
    ("streamq", KafkaReader.STREAMQ, "streamq-kafka"),
])  # fmt: skip
def test_the_reader_picks_the_format_the_job_loads(reader, effective, format_):
    spec = validate_spec(reading(reader))
    assert spec.source.kafka.effective_reader is effective
    assert kafka_source_format(spec) == format_


def test_unset_is_spark_and_leaves_the_stored_form_of_older_specs_alone():
    """None, not "spark": the wire form (and so the spec hash every driver carries) of a spec written
    before the field existed stays the same, and an operator upgrade restarts no query."""
    assert "reader" not in dump_spec(validate_spec(reading(None)))
    assert '"reader": "streamq"' in dump_spec(validate_spec(reading("streamq")))


def test_an_unknown_reader_is_refused_with_the_choices():
    found = problems(reading("flink"))
    assert any(p.startswith("spec.source.kafka.reader:") and "spark" in p and "streamq" in p for p in found), found


@pytest.mark.parametrize(("mode", "refused"), [
    ("continuous", False),
    ("microBatch", True),
    ("realTime", True),
    ("availableNow", True),
])  # fmt: skip
def test_reader_streamq_runs_in_continuous_mode_only(mode, refused):
    found = problems(reading("streamq", mode=mode))
    expected = f"spec.source.kafka.reader: reader streamq is streamq's continuous-mode Kafka source: use trigger continuous, or reader spark (Spark's Kafka source) in {mode} mode"
    assert (expected in found) is refused, found
    assert not problems(reading("spark", mode=mode)) and not problems(reading(None, mode=mode))


@pytest.mark.parametrize("mode", [m.value for m in Mode if m is not Mode.CONTINUOUS])
def test_the_crd_refuses_reader_streamq_outside_continuous_mode_too(mode):
    rule = next(r for r in RULES if r.name == "kafka-reader")
    (cel,) = rule.cel
    assert cel.field_path == ".source.kafka.reader"
    assert "has(self.trigger.continuous)" in cel.rule and "'streamq'" in cel.rule
    assert (
        cel.entry()
        in render_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]
    )
    assert check_rules(QuerySpec.model_validate(reading("streamq", mode=mode)), rules=[rule])


@pytest.mark.parametrize(("option", "name"), [
    ("startingOffsetsByTimestamp", "startingOffsetsByTimestamp"),
    ("startingTimestamp", "startingTimestamp"),
    ("startingOffsetsByTimestampStrategy", "startingOffsetsByTimestampStrategy"),
])  # fmt: skip
def test_options_of_sparks_source_only_are_refused_with_reader_streamq(option, name):
    spec = reading("streamq", **{option: "1"})
    assert (
        f"spec.source.kafka.options.{option}: {name} is an option of Spark's Kafka source only: use startingOffsets, or reader spark"
        in problems(spec)
    )
    assert not [p for p in problems(reading("spark", **{option: "1"})) if "Spark's Kafka source only" in p]


@pytest.mark.parametrize("options", [
    {"failOnDataLoss": "false"},
    {"includeHeaders": "true"},
    {"kafkaConsumer.pollTimeoutMs": "100"},
    {"kafka.fetch.max.wait.ms": "5", "kafka.max.poll.records": "100"},
])  # fmt: skip
def test_the_options_it_shares_with_sparks_source_pass(options):
    assert problems(reading("streamq", **options)) == []


def test_the_job_hands_both_readers_the_same_options():
    spark = kafka_source_options(validate_spec(reading("spark", failOnDataLoss="false")))
    streamq = kafka_source_options(validate_spec(reading("streamq", failOnDataLoss="false")))
    assert spark == streamq and spark["kafka.fetch.max.wait.ms"] == "10"


def test_changing_the_reader_keeps_the_checkpoint():
    """Both readers write the same offsets JSON: a change of reader is no source change."""
    before, after = validate_spec(reading(None)), validate_spec(reading("streamq"))
    assert spec_differences(before, after) == [] and spec_differences(after, before) == []


KAFKA_OPTION_CASES = sorted(case for case, (_, _, path, _) in REFUSED_BY_POLICY.items()
                            if path.startswith("spec.source.kafka.options."))  # fmt: skip


def test_there_are_kafka_option_cases_to_check():
    assert len(KAFKA_OPTION_CASES) >= 5


@pytest.mark.parametrize("case", KAFKA_OPTION_CASES)
def test_the_tenant_policy_refuses_the_same_kafka_settings_with_either_reader(case):
    """The reader hands kafka.* to its consumers and Admin client as Spark's source does, so the
    policy's allow-list (policy.allowedKafkaOptions, config providers, class names, files) covers it."""
    spec, namespace, path, rule = REFUSED_BY_POLICY[case]
    streamq = with_change(spec, "source.kafka.reader", "streamq")
    found = problems(streamq, policy=Policy(), namespace=namespace)
    assert any(p.startswith(f"{path}: {rule}: ") for p in found), found


READER_SRC = Path(__file__).resolve().parents[3] / "jvm" / "reader"


def test_the_format_is_the_name_the_jar_registers():
    provider = (READER_SRC / "src/io/streamq/reader/StreamqKafkaProvider.java").read_text()
    assert f'SHORT_NAME = "{SOURCE_FORMATS[KafkaReader.STREAMQ]}"' in provider
    services = READER_SRC / "resources/META-INF/services/org.apache.spark.sql.sources.DataSourceRegister"
    assert services.read_text().split() == ["io.streamq.reader.StreamqKafkaProvider"]


def test_the_rules_refuse_the_options_the_reader_refuses():
    """contract.rules refuses before a pod starts what jvm/reader's ReaderOptions would refuse at load():
    the start options of Spark's source only (the ending ones continuous mode refuses already)."""
    java = (READER_SRC / "src/io/streamq/reader/ReaderOptions.java").read_text()
    unsupported = java.split("UNSUPPORTED = Map.of(", 1)[1].split(");", 1)[0]
    refused_by_reader = set(re.findall(r'"([a-z.]+)", "', unsupported))
    assert refused_by_reader - {"endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp"} == set(SPARK_READER_ONLY)
    spec = validate_spec(reading("streamq"))
    assert all(key.lower() in KNOWN_SOURCE_OPTIONS for key in refused_by_reader)  # Spark options: the rules know them
    assert kafka_source_format(spec) == "streamq-kafka"
