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
 * Spark's FileSystem-based checkpoint file manager, whose temporary files on a local filesystem are
 * created by the JVM itself instead of through Hadoop's LocalFileSystem. The job uses it for every
 * local checkpoint (app/pipeline/session.py, local_checkpoint_conf).
 *
 * Why: without Hadoop's native library, LocalFileSystem sets a new file's permission by starting a
 * {@code chmod} process ({@code RawLocalFileSystem.setPermission} -> {@code Shell}), and a continuous
 * query's driver writes an offset and a commit file every epoch ({@code HDFSMetadataLog.add}): about
 * 4.7 process starts a second at 1 s epochs. Those forks cost about 3 ms of the engine's p99 at 10k/s
 * (docs/latency-attribution.md, "The epoch boundary by thread", an A/B of 3 pairs).
 *
 * What is the same as Spark's: the write goes to a temporary file, then {@code renameTempFile} (the
 * parent's) renames it into place, atomically on a POSIX filesystem; a cancelled write deletes it.
 * What differs: no {@code .crc} beside the temporary file (Hadoop reads a file without one unchecked,
 * and its rename drops a stale one at the destination), and the file gets the process's umask, which is
 * what Hadoop's default permission gives too (0666 less the umask).
 *
 * Spark creates checkpoint managers from the session's Hadoop conf for other paths too (a file sink's
 * metadata log in its output folder): on a filesystem that is not local this is Spark's manager, unchanged.
 */
public final class LocalCheckpointFileManager extends FileSystemBasedCheckpointFileManager {

    public LocalCheckpointFileManager(Path path, Configuration hadoopConf) {
        super(path, hadoopConf);
    }

    @Override
    public FSDataOutputStream createTempFile(Path path) {
        if (!isLocal()) {
            return super.createTempFile(path);
        }
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
