package io.streamq.reader;

import java.io.Serializable;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.streaming.ContinuousPartitionReader;
import org.apache.spark.sql.connector.read.streaming.ContinuousPartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One Kafka partition, read by one task for the life of a continuous-mode run.
 *
 * The hot path is a plain {@code poll}: the consumer is assigned and seeked once, when the task
 * starts, and then the consumer's own fetch position moves on. Spark's reader
 * (KafkaContinuousPartitionReader.next -> KafkaDataConsumer.get -> InternalKafkaConsumer.fetch)
 * seeks before every poll, asks the position after it and lists the earliest and latest offsets
 * (getAvailableOffsetRange: seekToBeginning+position, seekToEnd+position: two ListOffsets
 * requests) on every poll; this reader sends Fetch requests only.
 *
 * What that leaves out, and why it is safe:
 * <ul>
 *   <li>The available range is what Spark uses to tell data loss from a gap of invisible records
 *   (transaction markers, aborted records, compaction). With {@code auto.offset.reset=none}
 *   the broker answers OFFSET_OUT_OF_RANGE to a fetch below the log start offset or beyond the
 *   log end, and the consumer throws {@link OffsetOutOfRangeException}: retention, deleteRecords
 *   and a truncated log all reach this reader that way. A gap inside what a fetch returns from an
 *   in-range position is invisible records, never loss. The range is listed only then, off the
 *   hot path.</li>
 *   <li>The next offset reported at an epoch is the offset after the last record handed to Spark,
 *   as Spark's reader reports it (nextKafkaOffset = record.offset + 1), so invisible records at the
 *   end of a fetch are read again after a restart, and skipped again.</li>
 * </ul>
 */
final class KafkaPartitionReader implements ContinuousPartitionReader<InternalRow> {
    private static final Logger LOG = LoggerFactory.getLogger(KafkaPartitionReader.class);

    /** What a task needs, sent from the driver (KafkaContinuousInputPartition's fields). */
    record Partition(TopicPartition topicPartition, long startOffset, HashMap<String, String> params,
                     long pollTimeoutMs, boolean failOnDataLoss, boolean includeHeaders)
        implements InputPartition, Serializable {
    }

    static final class Factory implements ContinuousPartitionReaderFactory {
        private static final long serialVersionUID = 1L;

        @Override
        public ContinuousPartitionReader<InternalRow> createReader(InputPartition partition) {
            return new KafkaPartitionReader((Partition) partition);
        }
    }

    private final TopicPartition tp;
    private final ConsumerPool.Key key;
    private final Duration pollTimeout;
    private final boolean failOnDataLoss;
    private final KafkaRows rows;
    private KafkaConsumer<byte[], byte[]> consumer;
    private boolean healthy = true;  // false: closed, not pooled, at close()
    private Iterator<ConsumerRecord<byte[], byte[]>> fetched = Collections.emptyIterator();
    private ConsumerRecord<byte[], byte[]> current;
    private long nextOffset;
    private long polls;
    private long records;
    private long polledMicros;  // when the last poll returned (ReaderTrace only)
    private int polledCount;

    KafkaPartitionReader(Partition p) {
        this.tp = p.topicPartition();
        this.key = new ConsumerPool.Key(Map.copyOf(p.params()), tp);
        this.pollTimeout = Duration.ofMillis(p.pollTimeoutMs());
        this.failOnDataLoss = p.failOnDataLoss();
        this.rows = new KafkaRows(tp.topic(), p.includeHeaders());
        this.nextOffset = p.startOffset();
        TaskContext ctx = TaskContext.get();
        // A retried task starts with new consumers, as KafkaDataConsumer.acquire does on attemptNumber >= 1.
        this.consumer = ConsumerPool.borrow(key, ctx != null && ctx.attemptNumber() >= 1);
        this.consumer.seek(tp, nextOffset);  // once: from here on the consumer's own position moves on
    }

    @Override
    public boolean next() {
        while (true) {
            while (fetched.hasNext()) {
                ConsumerRecord<byte[], byte[]> r = fetched.next();
                if (r.offset() < nextOffset) {
                    continue;  // never after a seek to nextOffset; kept as Spark's reader never goes back
                }
                nextOffset = r.offset() + 1;
                current = r;
                records++;
                if (ReaderTrace.on()) {
                    ReaderTrace.handed(tp.partition(), r.offset(), r.timestamp(), polledMicros, polledCount);
                }
                return true;
            }
            if (stopping()) {
                return false;
            }
            List<ConsumerRecord<byte[], byte[]>> got;
            try {
                got = consumer.poll(pollTimeout).records(tp);
                polls++;
            } catch (OffsetOutOfRangeException e) {
                outOfRange(e);
                continue;
            } catch (InterruptException e) {
                if (stopping()) {  // the task is ending: Spark interrupts the reader thread
                    return false;
                }
                healthy = false;
                throw e;
            } catch (RuntimeException e) {
                healthy = false;
                throw e;
            }
            fetched = got.iterator();
            if (ReaderTrace.on()) {
                polledMicros = ReaderTrace.nowMicros();
                polledCount = got.size();
            }
        }
    }

    private static boolean stopping() {
        TaskContext ctx = TaskContext.get();
        return ctx != null && (ctx.isInterrupted() || ctx.isCompleted());
    }

    /**
     * The position is below the log start or past the log end. As Spark's reader: with
     * failOnDataLoss the query fails; without, the reader goes on from the earliest offset when the
     * records it wanted were deleted, and waits when its offset is past the end (a topic re-created
     * or truncated), retrying until the offset exists again (KafkaDataConsumer.getEarliestAvailableOffsetBetween
     * returns UNKNOWN_OFFSET and KafkaContinuousPartitionReader.next asks again).
     */
    private void outOfRange(OffsetOutOfRangeException e) {
        fetched = Collections.emptyIterator();
        Set<TopicPartition> one = Set.of(tp);
        long earliest = consumer.beginningOffsets(one).getOrDefault(tp, -1L);
        long latest = consumer.endOffsets(one).getOrDefault(tp, -1L);
        if (nextOffset >= earliest && nextOffset <= latest) {
            LOG.info("{}: offset {} is in range [{}, {}] again; reading on", tp, nextOffset, earliest, latest);
            consumer.seek(tp, nextOffset);
            return;
        }
        String what = "Cannot fetch offset " + nextOffset + " of " + tp + ": the available offsets are ["
            + earliest + ", " + latest + "). Some data may have been lost because they are not available in Kafka any "
            + "more; either the data was aged out by Kafka or the topic may have been deleted before all the data in "
            + "the topic was processed.";
        if (failOnDataLoss) {
            healthy = false;
            throw new IllegalStateException(what + " If you don't want your streaming query to fail on such cases, "
                + "set the source option \"failOnDataLoss\" to \"false\".", e);
        }
        if (nextOffset < earliest) {
            LOG.warn("{} Reading on from the earliest offset {} (failOnDataLoss=false).", what, earliest);
            nextOffset = earliest;
        } else {
            LOG.warn("{} Waiting for offset {} to exist (failOnDataLoss=false).", what, nextOffset);
            try {
                Thread.sleep(pollTimeout.toMillis());
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
            }
        }
        consumer.seek(tp, nextOffset);
    }

    @Override
    public InternalRow get() {
        return rows.toRow(current);
    }

    @Override
    public PartitionOffset getOffset() {
        return new KafkaOffsets.PartitionPosition(tp, nextOffset);
    }

    @Override
    public void close() {
        LOG.info("{}: read {} records through {} polls; next offset {}", tp, records, polls, nextOffset);
        if (consumer == null) {
            return;
        }
        if (healthy) {
            ConsumerPool.giveBack(key, consumer);  // also when interrupted: the consumer is whole
        } else {
            ConsumerPool.closeQuietly(consumer);
        }
        consumer = null;
    }
}
