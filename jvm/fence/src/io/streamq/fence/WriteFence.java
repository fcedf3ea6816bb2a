package io.streamq.fence;

import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.producer.Partitioner;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.utils.Utils;

/**
 * The write fence of a driver that runs its query only while it holds the query's Lease
 * (app/lease.py). Spark's Kafka sink hands every record to the producer's partitioner before it
 * is appended to a batch, in the task's own thread; this partitioner refuses the record once the
 * driver's lease deadline has passed on the machine's monotonic clock.
 *
 * Why here and not in the lease thread alone: a driver whose node was frozen (a paused VM, a
 * stopped container) wakes up with every thread runnable at once. The lease thread would notice
 * the lost Lease and stop the query, but the writing tasks may run first. The deadline is a
 * moment on CLOCK_MONOTONIC (Python's time.monotonic and Java's System.nanoTime read the same
 * clock on Linux), so a task that wakes up past it is refused before its record leaves the JVM.
 *
 * Unarmed (no deadline set: executors in their own pods, drivers without a Lease) it refuses nothing. Records
 * are placed as the producer's built-in partitioner places keyed records (murmur2 of the key);
 * records without a key go round robin over the available partitions.
 */
public final class WriteFence implements Partitioner {
    /**
     * The deadline lives in a system property, not a static field: the JVM holds one set of
     * system properties, while this class may be loaded twice (by the loader the driver's Python
     * reaches it through, and by the executor's loader that Kafka instantiates partitioners
     * with), each copy with statics of its own.
     */
    static final String DEADLINE_PROPERTY = "streamq.fence.deadlineNanos";
    private final AtomicInteger next = new AtomicInteger();
    private String seen;  // the property's value last parsed (compared by reference: parsed once per renewal)
    private long deadline = Long.MAX_VALUE;

    /** Writes may go on until this moment of System.nanoTime(); called at each renewal of the Lease. */
    public static void extendTo(long monotonicNanos) {
        System.setProperty(DEADLINE_PROPERTY, Long.toString(monotonicNanos));
    }

    /** The Lease is lost: no write from now on. */
    public static void shut() {
        extendTo(System.nanoTime());
    }

    /** Nanoseconds left before writes are refused (negative: refused); Long.MAX_VALUE when unarmed. */
    public static long remainingNanos() {
        String value = System.getProperty(DEADLINE_PROPERTY);
        return value == null ? Long.MAX_VALUE : Long.parseLong(value) - System.nanoTime();
    }

    private long deadline() {
        String value = System.getProperty(DEADLINE_PROPERTY);
        if (value != seen) {
            deadline = value == null ? Long.MAX_VALUE : Long.parseLong(value);
            seen = value;
        }
        return deadline;
    }

    @Override
    public int partition(String topic, Object key, byte[] keyBytes, Object value, byte[] valueBytes, Cluster cluster) {
        long deadlineNanos = deadline();
        if (deadlineNanos != Long.MAX_VALUE) {
            long late = System.nanoTime() - deadlineNanos;
            if (late >= 0) {
                throw new FencedWrite("streamq write fence: this driver's lease deadline passed "
                        + (late / 1_000_000) + " ms ago; another driver may hold the query now, so this record "
                        + "is not written");
            }
        }
        List<PartitionInfo> partitions = cluster.partitionsForTopic(topic);
        int count = partitions.size();
        if (keyBytes != null) {
            return Utils.toPositive(Utils.murmur2(keyBytes)) % count;
        }
        List<PartitionInfo> available = cluster.availablePartitionsForTopic(topic);
        int turn = Utils.toPositive(next.getAndIncrement());
        return available.isEmpty() ? turn % count : available.get(turn % available.size()).partition();
    }

    @Override
    public void configure(Map<String, ?> configs) {
    }

    @Override
    public void close() {
    }

    /** A KafkaException: the producer throws it from send() to the writing task, which fails. */
    public static final class FencedWrite extends KafkaException {
        private static final long serialVersionUID = 1L;

        FencedWrite(String message) {
            super(message);
        }
    }
}
