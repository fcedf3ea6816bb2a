package io.streamq.reader;

import java.io.BufferedOutputStream;
import java.io.DataOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.time.Instant;

/**
 * Per-record timings of the reader, for latency attribution only (docs/latency-attribution.md):
 * off unless the job's environment names a file in {@code STREAMQ_READER_TRACE}, and then one
 * record of six big-endian longs per row handed to Spark: partition, offset, the record's
 * timestamp (ms: the broker's append time on a LogAppendTime topic), when the poll that brought
 * it returned and when the reader handed it to Spark's reader thread (both µs since the epoch,
 * the wall clock the sink's record timestamps use), and the number of records that poll brought.
 *
 * Why in the reader: it splits the engine's leg (source append to sink send) at the one place
 * this project owns, between what the fetch costs and what Spark's hand-off, task thread and
 * writer cost after it. Rows are buffered and written at most once a second, not per record.
 */
final class ReaderTrace {
    static final String ENV = "STREAMQ_READER_TRACE";
    private static final DataOutputStream OUT = open(System.getenv(ENV));
    private static long flushedAt;

    private ReaderTrace() {
    }

    static boolean on() {
        return OUT != null;
    }

    static long nowMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    static void handed(int partition, long offset, long timestampMs, long polledMicros, int polled) {
        long handed = nowMicros();
        synchronized (ReaderTrace.class) {
            try {
                OUT.writeLong(partition);
                OUT.writeLong(offset);
                OUT.writeLong(timestampMs);
                OUT.writeLong(polledMicros);
                OUT.writeLong(handed);
                OUT.writeLong(polled);
                if (handed - flushedAt > 1_000_000L) {
                    OUT.flush();
                    flushedAt = handed;
                }
            } catch (IOException e) {
                // a trace that cannot be written costs the query nothing: the analysis sees the rows that were
            }
        }
    }

    private static DataOutputStream open(String path) {
        if (path == null || path.isEmpty()) {
            return null;
        }
        try {
            return new DataOutputStream(new BufferedOutputStream(new FileOutputStream(path, true), 1 << 16));
        } catch (IOException e) {
            return null;
        }
    }
}
