"""Turn how a query ended into an exit code and a one-line reason.

The controller retries only what retrying can fix, so the line between "Spark
refuses this query" and "the query died" matters: a refused query restarted
from its checkpoint fails the same way forever.
"""

from __future__ import annotations

import re

from app.contract import ExitCode

# Spark's error conditions (SparkThrowable.getCondition(), or "[CONDITION] ..." in the
# message) that mean the query itself is refused: fix the resource, do not retry.
REFUSED_CONDITIONS = (
    "UNRESOLVED_", "PARSE_SYNTAX_ERROR", "DATATYPE_MISMATCH", "UNSUPPORTED_", "INVALID_", "CANNOT_RESOLVE",
    "STREAMING_REAL_TIME_MODE", "NON_TIME_WINDOW_NOT_SUPPORTED_IN_STREAMING", "STREAMING_OUTPUT_MODE",
    # the checkpoint keeps state of other operators or another schema: a restart fails the same way
    "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA", "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY",
    "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE", "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
    "STATE_STORE_INVALID_CONFIG_AFTER_RESTART",
)  # fmt: skip
_CONDITION = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")
# Refusals Spark still raises without a condition (its continuous-mode checks, older analyser paths).
_REFUSED_TEXT = re.compile(r"AnalysisException|ParseException|does not support|not supported with streaming")
# Runtime trouble that a restart can fix even when the text says "not supported".
# ContinuousTaskRetryException: continuous mode cannot retry a task (an executor died); its text says
# "does not support", yet the query itself is fine: restart it from the checkpoint.
_RETRYABLE = re.compile(r"TimeoutException|DisconnectException|NetworkException|Connection refused|broker|"
                        r"ContinuousTaskRetryException|does not support task retry", re.I)

TERMINATION_MESSAGE_LIMIT = 1024  # Kubernetes keeps up to 4096 bytes; one readable line is the point


def conditions(error: BaseException | str) -> list[str]:
    """Spark's error conditions of an exception: its own, then those its message quotes
    (a StreamingQueryException quotes the condition of the failure inside it)."""
    found: list[str] = []
    get = getattr(error, "getCondition", None)
    if callable(get):
        try:
            own = get()
        except Exception:  # a captured JVM exception whose JVM is gone
            own = None
        if own:
            found.append(str(own))
    found += [c for c in _CONDITION.findall(str(error)) if c not in found]
    return found


def classify(error: BaseException | str) -> ExitCode:
    message = str(error)
    if _RETRYABLE.search(message):
        return ExitCode.QUERY_FAILED
    if any(c.startswith(REFUSED_CONDITIONS) for c in conditions(error)) or _REFUSED_TEXT.search(message):
        return ExitCode.QUERY_REFUSED
    return ExitCode.QUERY_FAILED


_PY4J_PREAMBLE = re.compile(r"^(py4j\.protocol\.Py4JJavaError: )?An error occurred while calling [\w.$]+\.?\s*$")
_JAVA_PACKAGE = re.compile(r"^(?:[a-z_][\w]*\.)+(?=[A-Z]\w*(?:Exception|Error)\b)")


def one_line(message: str, limit: int = TERMINATION_MESSAGE_LIMIT) -> str:
    """The first line that says something, without JVM stack frames or Py4J wrapping."""
    for raw in str(message).splitlines():
        line = raw.strip().lstrip(":").strip()
        if not line or _PY4J_PREAMBLE.match(line) or re.fullmatch(r"[-=]+", line):
            continue
        if line.startswith(("at ", "...", "JVM stacktrace", "Current ")):
            continue
        line = re.sub(r"^(org\.apache\.spark\.sql\.streaming\.)?StreamingQueryException:\s*", "", line)
        line = _JAVA_PACKAGE.sub("", line)
        return line if len(line) <= limit else line[: limit - 3] + "..."
    return "unknown failure"
