package io.streamq.checkpoint;

import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.StandardOpenOption;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * Spark's FileSystem-based checkpoint file manager for a local checkpoint, whose temporary files are
 * created by the JVM itself instead of through Hadoop's LocalFileSystem.
 *
 * Why: without Hadoop's native library, LocalFileSystem sets a new file's permission by starting a
 * {@code chmod} process ({@code RawLocalFileSystem.setPermission} -> {@code Shell}), and a continuous
 * query's driver writes an offset and a commit file every epoch ({@code HDFSMetadataLog.add}): about
 * 4.7 process starts a second at 1 s epochs (docs/latency-attribution.md, section 3). This manager
 * starts none, so an A/B can say whether they feed the tail at the epoch boundary.
 *
 * What is the same as Spark's: the write goes to a temporary file, then {@code renameTempFile} (the
 * parent's) renames it into place, atomically on a POSIX filesystem; a cancelled write deletes it.
 * What differs: no {@code .crc} beside the temporary file (Hadoop reads a file without one unchecked),
 * and the file gets the process's umask, not Hadoop's default permission.
 */
public final class LocalCheckpointFileManager extends FileSystemBasedCheckpointFileManager {

    public LocalCheckpointFileManager(Path path, Configuration hadoopConf) {
        super(path, hadoopConf);
        if (!isLocal()) {
            throw new IllegalArgumentException("LocalCheckpointFileManager is for a local checkpoint, not " + path);
        }
    }

    @Override
    public FSDataOutputStream createTempFile(Path path) {
        java.nio.file.Path file = java.nio.file.Path.of(path.toUri().getPath());
        try {
            // as FileSystem.create does: the parents are made (a metadata log's directory may be new)
            Files.createDirectories(file.getParent());
            OutputStream out = Files.newOutputStream(file, StandardOpenOption.CREATE,
                    StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE);
            return new FSDataOutputStream(out, null);
        } catch (IOException e) {
            throw new UncheckedIOException("could not create the checkpoint's temporary file " + file, e);
        }
    }
}
