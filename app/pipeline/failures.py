"""Turn how a query ended into an exit code and a one-line reason.

The controller retries only what retrying can fix, so the line between "Spark
refuses this query" and "the query died" matters: a refused query restarted
from its checkpoint fails the same way forever.
"""

from __future__ import annotations

import re

from contract import ExitCode

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
_RETRYABLE = re.compile(
    r"TimeoutException|DisconnectException|NetworkException|Connection refused|broker|"
    r"ContinuousTaskRetryException|does not support task retry",
    re.I,
)

# A checkpoint location whose scheme no filesystem on the classpath serves: Spark wraps it in
# CANNOT_LOAD_CHECKPOINT_FILE_MANAGER (or Hadoop's UnsupportedFileSystemException comes through
# bare). The image is what it is: every restart fails the same way, so it is a refusal. Only these
# causes: the same condition with another cause (say, a store unreachable) stays retryable.
_NO_FILESYSTEM = re.compile(
    r'No FileSystem for scheme:? "?(?P<scheme>[A-Za-z][\w+.-]*)"?'
    r'|No AbstractFileSystem configured for scheme:? "?(?P<scheme2>[A-Za-z][\w+.-]*)"?'
    r"|ClassNotFoundException: Class (?P<cls>org\.apache\.hadoop\.fs\.[\w.$]+) not found"
    # the filesystem's class is there but not what it links (an image with some of the S3A jars)
    r"|NoClassDefFoundError: (?P<linked>[\w/$.]+)"
)
_CHECKPOINT_PATH = re.compile(r"checkpoint file manager for path=(?P<path>[^\s]+?)\.?(\s|$)")
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][\w+.-]*)://")
# The schemes the image serves (local paths, and s3a:// through hadoop-aws: hack/install-jars.sh).
SERVED_SCHEMES = ("file", "s3a")


def unsupported_filesystem(error: BaseException | str) -> str | None:
    """A clear reason when no filesystem in the image serves the checkpoint location's scheme."""
    message = str(error)
    if "CANNOT_LOAD_CHECKPOINT_FILE_MANAGER" not in message and "UnsupportedFileSystemException" not in message:
        return None
    found = _NO_FILESYSTEM.search(message)
    if found is None or (found.group("linked") and "CANNOT_LOAD_CHECKPOINT_FILE_MANAGER" not in message):
        return None
    located = _CHECKPOINT_PATH.search(message)
    path = located.group("path") if located else None
    scheme = found.group("scheme") or found.group("scheme2")
    if scheme is None and path is not None and (m := _SCHEME.match(path)):
        scheme = m.group("scheme")
    what = f"{scheme}://" if scheme else "its scheme"
    where = f"checkpoint location {path}" if path else "the checkpoint location"
    missing = f" ({found.group('cls')} is not on the classpath)" if found.group("cls") else ""
    head = f"no filesystem in this image serves {what}{missing}, so {where} cannot be used"
    if found.group("linked"):
        linked = found.group("linked").replace("/", ".")
        head = (
            f"the filesystem for {what} in this image is incomplete ({linked} is not on the classpath), so {where} cannot be used"
        )
    if scheme in SERVED_SCHEMES:  # an image built without them
        return f"{head}: the image lacks hadoop-aws and the AWS SDK jars (hack/install-jars.sh, hack/build-image.sh)"
    return f"{head}: use a local path (a checkpoint volume) or s3a://bucket/path, or an image with that filesystem's jars"


TERMINATION_MESSAGE_LIMIT = 1024  # Kubernetes keeps up to 4096 bytes; one readable line is the point


def conditions(error: BaseException | str) -> list[str]:
    """Spark's error conditions of an exception: its own, then those its message quotes
    (a StreamingQueryException quotes the condition of the failure inside it)."""
    found: list[str] = []
    get = getattr(error, "getCondition", None)
    if callable(get):
        try:
            own = get()
        except Exception:  # noqa: BLE001 - a captured JVM exception whose JVM is gone (py4j's error, pyspark's assertion, a socket's)
            own = None
        if own:
            found.append(str(own))
    found += [c for c in _CONDITION.findall(str(error)) if c not in found]
    return found


def classify(error: BaseException | str) -> ExitCode:
    message = str(error)
    if unsupported_filesystem(message):
        return ExitCode.QUERY_REFUSED
    if _RETRYABLE.search(message):
        return ExitCode.QUERY_FAILED
    if any(c.startswith(REFUSED_CONDITIONS) for c in conditions(error)) or _REFUSED_TEXT.search(message):
        return ExitCode.QUERY_REFUSED
    return ExitCode.QUERY_FAILED


_PY4J_PREAMBLE = re.compile(r"^(py4j\.protocol\.Py4JJavaError: )?An error occurred while calling [\w.$]+\.?\s*$")
_JAVA_PACKAGE = re.compile(r"^(?:[a-z_][\w]*\.)+(?=[A-Z]\w*(?:Exception|Error)\b)")


def one_line(message: str, limit: int = TERMINATION_MESSAGE_LIMIT) -> str:
    """The first line that says something, without JVM stack frames or Py4J wrapping (or, for a
    checkpoint scheme the image has no filesystem for, what to do about it)."""
    special = unsupported_filesystem(message)
    if special:
        return special if len(special) <= limit else special[: limit - 3] + "..."
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
