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
    r"|Data source \w+ does not support",
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


def one_line(message: str, limit: int = TERMINATION_MESSAGE_LIMIT) -> str:
    """The first line that says something, without JVM stack frames or noise."""
    lines = [line.strip() for line in str(message).splitlines()]
    meaningful = [
        line for line in lines
        if line and not line.startswith(("at ", "...", "===", "Caused by: java.lang.reflect", "JVM stacktrace"))
        and not line.startswith("Current ") and not re.fullmatch(r"-+", line)
    ]
    text = meaningful[0] if meaningful else "unknown failure"
    # Py4J wraps the JVM message; the user needs only Spark's part.
    text = re.sub(r"^(py4j\.protocol\.Py4JJavaError: )?An error occurred while calling [\w.]+\.\s*:?\s*", "", text)
    text = re.sub(r"^(org\.apache\.spark\.sql\.streaming\.)?StreamingQueryException:\s*", "", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."
