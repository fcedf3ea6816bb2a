import pytest

from contract.load import SpecError, load_document, validate_spec
from contract.spec import duration_ms, spark_interval
from testbed.specs import query_spec, resource, with_change

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("mode", ["continuous", "realTime", "microBatch", "availableNow"])
def test_valid_spec_in_every_mode(mode):
    spec = validate_spec(query_spec(mode=mode))
    assert spec.mode == mode
    assert spec.source.kind == "kafka" and spec.sink.kind == "kafka"


def test_defaults_a_user_relies_on():
    spec = validate_spec(query_spec())
    assert spec.effective_output_mode.value == "append"
    assert spec.runtime.backend.value == "pod"
    assert spec.restart_policy.type.value == "Always" and spec.restart_policy.max_restarts == 10
    assert spec.checkpoint.on_incompatible_change.value == "refuse"
    assert validate_spec(query_spec(mode="realTime")).effective_output_mode.value == "update"


def test_resource_and_bare_spec_load_the_same():
    bare = load_document(query_spec(), default_name="x")
    full = load_document(resource(query_spec(), name="fraud"))
    assert bare.spec == full.spec
    assert (bare.name, full.name) == ("x", "fraud")


def test_snake_case_is_accepted_in_python_but_dumped_as_camel():
    from contract.load import dump_spec

    spec = validate_spec(query_spec())
    dumped = dump_spec(spec)
    assert '"bootstrapServers"' in dumped and "bootstrap_servers" not in dumped
    assert validate_spec(__import__("json").loads(dumped)) == spec


def test_every_problem_is_reported_at_once():
    broken = with_change(query_spec(), "checkpoint", None)
    broken = with_change(broken, "trigger", {"continuous": {"checkpointInterval": "soon"}})
    with pytest.raises(SpecError) as err:
        validate_spec(broken)
    paths = {p.path for p in err.value.problems}
    assert paths == {"spec.checkpoint", "spec.trigger.continuous.checkpointInterval"}


@pytest.mark.parametrize(("text", "ms"), [("500ms", 500), ("1s", 1000), ("5m", 300_000), ("2h", 7_200_000), ("0s", 0)])
def test_durations(text, ms):
    assert duration_ms(text) == ms
    assert spark_interval(text) == f"{ms} milliseconds"


def test_task_slots_count_executors_when_there_are_some():
    spec = validate_spec(with_change(query_spec(), "runtime", {"parallelism": 2, "executors": {"instances": 3, "cores": 2}}))
    assert spec.runtime.task_slots("continuous", 8) == 6 and not spec.runtime.auto_sized
    assert validate_spec(query_spec()).runtime.task_slots("continuous", 2) == 4


@pytest.mark.parametrize(("mode", "partitions", "slots"), [
    ("continuous", 1, 4), ("continuous", 2, 4), ("continuous", 3, 5), ("continuous", 10, 12),
    ("realTime", 6, 8), ("microBatch", 10, 4), ("availableNow", 10, 4),
])  # fmt: skip
def test_unset_parallelism_is_sized_from_the_partitions(mode, partitions, slots):
    spec = validate_spec(with_change(query_spec(mode=mode), "runtime", {}))
    assert spec.runtime.parallelism is None and spec.runtime.auto_sized
    assert spec.runtime.task_slots(mode, partitions) == slots


@pytest.mark.parametrize(("trigger", "health", "stall_after_ms"), [
    ({"continuous": {"checkpointInterval": "1s"}}, {}, 60_000),  # the 60s floor
    ({"continuous": {"checkpointInterval": "10s"}}, {}, 100_000),  # 10 intervals
    ({"continuous": {"checkpointInterval": "1s"}}, {"stallAfterIntervals": 5, "minStallTime": "2s"}, 5_000),
    ({"realTime": {"batchDuration": "5m"}}, {}, 3_000_000),
    ({"microBatch": {"interval": "0s"}}, {"minStallTime": "30s"}, 30_000),
    ({"availableNow": {}}, {}, 60_000),
])  # fmt: skip
def test_stall_window_is_intervals_times_the_commit_interval_with_a_floor(trigger, health, stall_after_ms):
    spec = validate_spec(with_change(with_change(query_spec(), "trigger", trigger), "health", health))
    assert spec.stall_after_ms == stall_after_ms
    assert spec.health.on_stall == "restart"


def test_health_fields_are_checked():
    with pytest.raises(SpecError, match="stallAfterIntervals"):
        validate_spec(with_change(query_spec(), "health", {"stallAfterIntervals": 0}))
    with pytest.raises(SpecError, match="onStall"):
        validate_spec(with_change(query_spec(), "health", {"onStall": "panic"}))
