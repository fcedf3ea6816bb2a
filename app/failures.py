"""Turn how a query ended into an exit code and a one-line reason.

The controller retries only what retrying can fix, so the line between "Spark
refuses this query" and "the query died" matters: a refused query restarted
from its checkpoint fails the same way forever.
"""

from __future__ import annotations

import re

from app.contract import ExitCode

# Spark's analyser and planner refusing the query: fix the resource.
_REFUSED = re.compile(
    r"AnalysisException|ParseException|\[STREAMING_REAL_TIME_MODE|\[UNRESOLVED_|\[PARSE_SYNTAX_ERROR"
    r"|\[DATATYPE_MISMATCH|\[UNSUPPORTED_|\[INVALID_|\[CANNOT_RESOLVE"
    r"|Continuous processing does not support|does not support|not supported with streaming"
    r"|Data source \w+ does not support"
    # the checkpoint keeps state of other operators or another schema: a restart fails the same way
    r"|\[STREAMING_STATEFUL_OPERATOR_(NOT_MATCH_IN_STATE_METADATA|MISSING_STATE_DIRECTORY)"
    r"|\[STATE_STORE_(KEY|VALUE)_SCHEMA_NOT_COMPATIBLE|\[STATE_STORE_INVALID_CONFIG_AFTER_RESTART",
)
# Runtime trouble that a restart can fix even when the text says "not supported".
_RETRYABLE = re.compile(r"TimeoutException|DisconnectException|NetworkException|Connection refused|broker", re.I)

TERMINATION_MESSAGE_LIMIT = 1024  # Kubernetes keeps up to 4096 bytes; one readable line is the point


def classify(message: str) -> ExitCode:
    if _RETRYABLE.search(message):
        return ExitCode.QUERY_FAILED
    if _REFUSED.search(message):
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
