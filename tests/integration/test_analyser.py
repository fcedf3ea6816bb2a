"""The exact validation layer: Spark's own analyser, no broker needed."""

import pytest

from app.pipeline.analyser import analyse
from contract.load import QueryDocument
from contract.spec import QuerySpec
from testbed.specs import query_spec

pytestmark = pytest.mark.integration

UNREACHABLE = "127.0.0.1:1"  # nothing listens there: analysis must not need a broker


def _doc(**overrides) -> QueryDocument:
    bare = {"source.kafka.startingOffsets": None, "runtime": None,
            "transforms": [{"select": ["CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"]}]}  # fmt: skip
    spec = query_spec(bare, bootstrap=UNREACHABLE, sink_topic="out", location="/nonexistent/never-written", **overrides)
    # model_validate skips the static rules on purpose: this is the layer behind them.
    return QueryDocument("analysed", None, QuerySpec.model_validate(spec))


def test_accepted_query_has_no_problems(spark):
    assert analyse(spark, _doc()) == []


def test_aggregation_in_continuous_mode_is_refused_by_spark(spark):
    problems = analyse(
        spark,
        _doc(
            transforms=[{"sql": "SELECT CAST(key AS STRING) AS key, CAST(count(*) AS STRING) AS value FROM input GROUP BY key"}],
            outputMode="update",
        ),
    )
    assert len(problems) == 1
    assert "Continuous processing does not support Aggregate operations" in problems[0].message


def test_unknown_column_is_refused(spark):
    problems = analyse(spark, _doc(transforms=[{"where": "amount > 1000"}]))
    assert problems and "amount" in problems[0].message and "UNRESOLVED_COLUMN" in problems[0].message


def test_real_time_mode_with_a_rate_source_dies_on_its_own_thread_and_is_caught(spark):
    doc = _doc(
        source={"rate": {"rowsPerSecond": 1}},
        transforms=[{"select": ["CAST(value AS STRING) AS value"]}],
        trigger={"realTime": {"batchDuration": "5s"}},
        outputMode="update",
    )
    problems = analyse(spark, doc)
    assert problems and "STREAMING_REAL_TIME_MODE" in problems[0].message


def test_validation_never_writes_the_real_checkpoint(spark, tmp_path):
    location = tmp_path / "checkpoint"
    doc = _doc(checkpoint={"location": str(location)})
    analyse(spark, doc)
    assert not location.exists()


def test_the_sql_allow_list_is_generated_from_this_sparks_registry(spark):
    """contract/spark_functions.py is Spark's registry for the pinned release: after an
    upgrade, `hack/gen-spark-functions.py` writes it again and the new functions get a review."""
    import importlib.util
    from pathlib import Path

    from contract.spark_functions import SPARK_FUNCTIONS, SPARK_VERSION

    script = Path(__file__).resolve().parents[2] / "hack" / "gen-spark-functions.py"
    loaded = importlib.util.spec_from_file_location("gen_spark_functions", script)
    generator = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(generator)
    assert SPARK_VERSION == spark.version
    assert set(generator.registry_names(spark)) == SPARK_FUNCTIONS, "run hack/gen-spark-functions.py"


def test_what_the_allow_list_refuses_really_runs_code_or_reads_files(spark):
    """The refused functions are not a guess: Spark runs them. reflect calls a Java method,
    and the TRANSFORM the rules refuse runs a shell in the driver."""
    assert spark.sql("SELECT reflect('java.lang.System', 'getProperty', 'java.version') AS v").first().v
    assert spark.sql("SELECT TRANSFORM('x') USING 'cat' AS (v)").first().v == "x"
