package io.streamq.reader;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Idle consumers of the executor JVM, one partition each, kept for the next task of the same
 * (settings, partition): a continuous query's tasks restart at every reconfiguration, and a
 * standby driver's warm-up query (app/driver/warmup.py) leaves its connected consumers to the
 * real query, as Spark's InternalKafkaConsumerPool does for its own reader (keyed by group id and
 * partition; streamq gives each query one group id, app/pipeline/plan.py). Idle ones are closed
 * after {@link #IDLE_TIMEOUT} (spark.kafka.consumer.cache.timeout's default, 5 min).
 */
final class ConsumerPool {
    private static final Logger LOG = LoggerFactory.getLogger(ConsumerPool.class);
    static final Duration IDLE_TIMEOUT = Duration.ofMinutes(5);

    record Key(Map<String, String> params, TopicPartition partition) {
    }

    private record Idle(KafkaConsumer<byte[], byte[]> consumer, long since) {
    }

    private static final Map<Key, Deque<Idle>> IDLE = new HashMap<>();
    private static ScheduledExecutorService evictor;

    private ConsumerPool() {
    }

    /** A consumer assigned to the key's partition alone (position: unset; the caller seeks). */
    static KafkaConsumer<byte[], byte[]> borrow(Key key, boolean fresh) {
        synchronized (IDLE) {
            Deque<Idle> idle = IDLE.get(key);
            if (fresh && idle != null) {  // a task's retry: its predecessor's consumer may be the trouble
                IDLE.remove(key);
                idle.forEach(i -> closeQuietly(i.consumer));
            } else if (idle != null && !idle.isEmpty()) {
                KafkaConsumer<byte[], byte[]> c = idle.pollFirst().consumer;
                if (idle.isEmpty()) {
                    IDLE.remove(key);
                }
                return c;
            }
        }
        Map<String, Object> config = new HashMap<>(key.params);
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(config);
        c.assign(List.of(key.partition));
        return c;
    }

    /** Back to the pool, healthy: the next borrower seeks it. */
    static void giveBack(Key key, KafkaConsumer<byte[], byte[]> consumer) {
        synchronized (IDLE) {
            IDLE.computeIfAbsent(key, k -> new ArrayDeque<>()).addFirst(new Idle(consumer, System.nanoTime()));
            if (evictor == null) {
                evictor = Executors.newSingleThreadScheduledExecutor(r -> {
                    Thread t = new Thread(r, "streamq-kafka-consumer-evictor");
                    t.setDaemon(true);
                    return t;
                });
                evictor.scheduleWithFixedDelay(ConsumerPool::evict, 60, 60, TimeUnit.SECONDS);
            }
        }
    }

    static void closeQuietly(KafkaConsumer<byte[], byte[]> consumer) {
        try {
            consumer.close(Duration.ofSeconds(5));
        } catch (RuntimeException e) {
            LOG.warn("Closing a Kafka consumer failed", e);
        }
    }

    private static void evict() {
        long now = System.nanoTime();
        synchronized (IDLE) {
            for (Iterator<Deque<Idle>> it = IDLE.values().iterator(); it.hasNext(); ) {
                Deque<Idle> idle = it.next();
                idle.removeIf(i -> {
                    boolean old = now - i.since > IDLE_TIMEOUT.toNanos();
                    if (old) {
                        closeQuietly(i.consumer);
                    }
                    return old;
                });
                if (idle.isEmpty()) {
                    it.remove();
                }
            }
        }
    }
}
