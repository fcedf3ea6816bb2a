import pytest

from app.pipeline.failures import classify, one_line
from contract import ExitCode

pytestmark = pytest.mark.unit

REFUSED = [
    "[STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED] Real-time mode does not support RateStreamTable",
    "org.apache.spark.sql.AnalysisException: Continuous processing does not support Aggregate operations.",
    "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `amount` cannot be resolved.",
    "[PARSE_SYNTAX_ERROR] Syntax error at or near 'FROM'.",
]
RETRYABLE = [
    "org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired before the position could be determined",
    "Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times: java.lang.OutOfMemoryError",
    "Kafka sink 127.0.0.1:9092 unreachable for 31s (limit 30s)",
    # an executor pod killed under a continuous query (seen in tests/e2e/test_faults_data.py)
    "org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 0.0 failed 1 times, most recent "
    "failure: org.apache.spark.sql.execution.streaming.continuous.ContinuousTaskRetryException: Continuous execution "
    "does not support task retry",
]


@pytest.mark.parametrize("message", REFUSED)
def test_refusals_are_not_retried(message):
    assert classify(message) is ExitCode.QUERY_REFUSED
    assert not classify(message).retryable


@pytest.mark.parametrize("message", RETRYABLE)
def test_runtime_failures_are_retried(message):
    assert classify(message) is ExitCode.QUERY_FAILED
    assert classify(message).retryable


def test_one_line_drops_jvm_noise_and_py4j_wrapping():
    message = (
        "An error occurred while calling o123.start.\n"
        ": org.apache.spark.sql.AnalysisException: Continuous processing does not support Aggregate operations.\n"
        "\tat org.apache.spark.sql.catalyst.Foo(Foo.scala:1)\n"
    )
    assert one_line(message) == "AnalysisException: Continuous processing does not support Aggregate operations."


def test_one_line_unwraps_the_streaming_query_exception():
    message = "[STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED] Real-time mode is not supported.\n=== Streaming Query ===\nIdentifier: x"
    assert one_line(message) == "[STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED] Real-time mode is not supported."


def test_one_line_is_bounded():
    assert len(one_line("x" * 5000)) == 1024


class _SparkError(Exception):
    """What PySpark raises for a JVM SparkThrowable: the condition comes from getCondition()."""

    def __init__(self, condition: str, message: str):
        super().__init__(message)
        self._condition = condition

    def getCondition(self) -> str:
        return self._condition


def test_the_error_condition_decides_not_the_wording():
    assert classify(_SparkError("UNRESOLVED_COLUMN.WITH_SUGGESTION", "A column cannot be found.")) is ExitCode.QUERY_REFUSED
    assert (
        classify(_SparkError("STREAM_FAILED", "Query terminated with exception: [STREAMING_REAL_TIME_MODE.X] ..."))
        is ExitCode.QUERY_REFUSED
    )  # the wrapper's message quotes the cause's condition
    assert classify(_SparkError("TASK_WRITE_FAILED", "Task failed while writing rows.")) is ExitCode.QUERY_FAILED
