"""A checkpoint scheme the image has no filesystem for is a refusal, said once (not exit 70).

The messages are PySpark 4.3.0's own (Py4JJavaError text of DataStreamWriter.start(), trimmed to
the lines that matter), captured with a rate -> noop query and no hadoop-aws/gcs jars on the classpath.
"""

import pytest

from app.pipeline.failures import classify, one_line, unsupported_filesystem
from contract import ExitCode

pytestmark = pytest.mark.unit

# FileContext-based manager (Spark's default for URIs): core-default.xml names org.apache.hadoop.fs.s3a.S3A
S3A_WITHOUT_HADOOP_AWS = """An error occurred while calling o33.start.
: org.apache.spark.SparkException: [CANNOT_LOAD_CHECKPOINT_FILE_MANAGER.UNCATEGORIZED] Error loading streaming checkpoint file manager for path=s3a://bucket/cp.  SQLSTATE: 58030
\tat org.apache.spark.sql.execution.streaming.StreamingErrors$.cannotLoadCheckpointFileManager(StreamingErrors.scala:74)
\tat org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager$.create(CheckpointFileManager.scala:235)
\tat py4j.ClientServerConnection.run(ClientServerConnection.java:108)
\tat java.base/java.lang.Thread.run(Thread.java:840)
Caused by: java.lang.RuntimeException: java.lang.ClassNotFoundException: Class org.apache.hadoop.fs.s3a.S3A not found
\tat org.apache.hadoop.conf.Configuration.getClass(Configuration.java:2724)
"""
GS_WITHOUT_CONNECTOR = """An error occurred while calling o42.start.
: org.apache.spark.SparkException: [CANNOT_LOAD_CHECKPOINT_FILE_MANAGER.UNCATEGORIZED] Error loading streaming checkpoint file manager for path=gs://bucket/cp.  SQLSTATE: 58030
\tat org.apache.spark.sql.execution.streaming.StreamingErrors$.cannotLoadCheckpointFileManager(StreamingErrors.scala:74)
Caused by: java.lang.RuntimeException: java.lang.ClassNotFoundException: Class org.apache.hadoop.fs.gs.Gs not found
\tat org.apache.hadoop.conf.Configuration.getClass(Configuration.java:2724)
"""
# A scheme Hadoop knows nothing of, with the FileContext-based manager
UNKNOWN_SCHEME = """An error occurred while calling o34.start.
: org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "foo"
\tat org.apache.hadoop.fs.FileSystem.getFileSystemClass(FileSystem.java:3586)
\tat org.apache.hadoop.fs.FileSystem.createFileSystem(FileSystem.java:3617)
\tat py4j.Gateway.invoke(Gateway.java:282)
"""
# The FileSystem-based manager (what streamq sets for local paths) on a URI
UNKNOWN_SCHEME_FS_MANAGER = """An error occurred while calling o48.start.
: org.apache.spark.SparkException: [CANNOT_LOAD_CHECKPOINT_FILE_MANAGER.ERROR_LOADING_CLASS] Error loading streaming checkpoint file manager for path=foo://bucket/cp. Error instantiating streaming checkpoint file manager for path=foo://bucket/cp with className=org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager. msg=org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "foo". SQLSTATE: 58030
\tat org.apache.spark.sql.execution.streaming.StreamingErrors$.cannotLoadCheckpointFileManagerClass(StreamingErrors.scala:65)
Caused by: org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "foo"
\tat org.apache.hadoop.fs.FileSystem.getFileSystemClass(FileSystem.java:3586)
"""
GS_FS_MANAGER = """An error occurred while calling o39.start.
: org.apache.spark.SparkException: [CANNOT_LOAD_CHECKPOINT_FILE_MANAGER.ERROR_LOADING_CLASS] Error loading streaming checkpoint file manager for path=gs://bucket/cp. Error instantiating streaming checkpoint file manager for path=gs://bucket/cp with className=org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager. msg=java.lang.RuntimeException: java.lang.ClassNotFoundException: Class org.apache.hadoop.fs.gs.GoogleHadoopFileSystem not found. SQLSTATE: 58030
Caused by: java.lang.RuntimeException: java.lang.ClassNotFoundException: Class org.apache.hadoop.fs.gs.GoogleHadoopFileSystem not found
"""

# hadoop-aws without one of the AWS SDK modules it links (here s3-transfer-manager), against SeaweedFS
S3A_WITHOUT_TRANSFER_MANAGER = """An error occurred while calling o48.start.
: org.apache.spark.SparkException: [CANNOT_LOAD_CHECKPOINT_FILE_MANAGER.UNCATEGORIZED] Error loading streaming checkpoint file manager for path=s3a://smoke/q/ck.  SQLSTATE: 58030
\tat org.apache.spark.sql.execution.streaming.StreamingErrors$.cannotLoadCheckpointFileManager(StreamingErrors.scala:74)
Caused by: java.lang.RuntimeException: java.lang.NoClassDefFoundError: software/amazon/awssdk/transfer/s3/model/ObjectTransfer
\t... 21 more
Caused by: java.lang.NoClassDefFoundError: software/amazon/awssdk/transfer/s3/model/ObjectTransfer
\t... 97 more
Caused by: java.lang.ClassNotFoundException: software.amazon.awssdk.transfer.s3.model.ObjectTransfer
\t... 111 more
"""


def test_a_filesystem_missing_classes_it_links_is_a_refusal_too():
    assert classify(S3A_WITHOUT_TRANSFER_MANAGER) is ExitCode.QUERY_REFUSED
    reason = one_line(S3A_WITHOUT_TRANSFER_MANAGER)
    assert reason.startswith("the filesystem for s3a:// in this image is incomplete "
                             "(software.amazon.awssdk.transfer.s3.model.ObjectTransfer is not on the classpath)"), reason  # fmt: skip
    assert "hadoop-aws" in reason
    # a NoClassDefFoundError elsewhere (user code, a connector) is not about the checkpoint
    assert unsupported_filesystem("java.lang.NoClassDefFoundError: org/foo/Bar") is None


@pytest.mark.parametrize(("message", "scheme"), [
    (S3A_WITHOUT_HADOOP_AWS, "s3a"), (GS_WITHOUT_CONNECTOR, "gs"), (UNKNOWN_SCHEME, "foo"),
    (UNKNOWN_SCHEME_FS_MANAGER, "foo"), (GS_FS_MANAGER, "gs"),
])  # fmt: skip
def test_no_filesystem_for_the_scheme_is_a_refusal_with_a_clear_reason(message, scheme):
    assert classify(message) is ExitCode.QUERY_REFUSED
    assert not classify(message).retryable  # said once: the operator does not restart it in a loop
    reason = one_line(message)
    assert reason.startswith(f"no filesystem in this image serves {scheme}://"), reason
    assert "\n" not in reason and "at org.apache" not in reason and "SQLSTATE" not in reason


def test_the_reason_names_the_location_and_the_missing_class():
    reason = unsupported_filesystem(S3A_WITHOUT_HADOOP_AWS)
    assert "checkpoint location s3a://bucket/cp" in reason
    assert "org.apache.hadoop.fs.s3a.S3A is not on the classpath" in reason
    assert "hadoop-aws" in reason  # s3a:// is served by a right image: say which jars are missing
    assert "s3a://bucket/path" in unsupported_filesystem(GS_FS_MANAGER)  # other schemes: what to use instead


def test_the_same_condition_with_another_cause_stays_retryable():
    """CANNOT_LOAD_CHECKPOINT_FILE_MANAGER wraps whatever creating the manager threw: only a missing
    filesystem is permanent."""
    message = S3A_WITHOUT_HADOOP_AWS.replace(
        "Caused by: java.lang.RuntimeException: java.lang.ClassNotFoundException: Class org.apache.hadoop.fs.s3a.S3A not found",
        "Caused by: java.net.ConnectException: Connection refused",
    )
    assert unsupported_filesystem(message) is None
    assert classify(message) is ExitCode.QUERY_FAILED
    assert unsupported_filesystem("java.lang.ClassNotFoundException: Class org.apache.hadoop.fs.s3a.S3A not found") is None
