package io.streamq.reader;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.streaming.ContinuousPartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.ContinuousStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's side: which partitions there are, where each starts, what the epochs' offsets
 * merge to. It follows Spark's KafkaContinuousStream method for method:
 * <ul>
 *   <li>initialOffset: earliest, latest or the JSON offsets (-2/-1 resolved) of every partition;</li>
 *   <li>planInputPartitions: partitions added since the start offset start at their earliest
 *   offset, partitions gone are data loss (reportDataLoss: fail with failOnDataLoss, else a
 *   warning), and the planned set is remembered;</li>
 *   <li>needsReconfiguration: true when the partitions now differ from the planned set (Spark then
 *   restarts the tasks and plans again from the last epoch's offsets);</li>
 *   <li>commit does nothing: the offsets live in the checkpoint, never in Kafka.</li>
 * </ul>
 * Unlike Spark's, which lists the latest offsets in needsReconfiguration on every trigger, the
 * partitions and their latest offsets are listed by a timer thread (every
 * streamq.metadataIntervalMs, 1 s) through one Admin client: needsReconfiguration and the lag
 * metrics read what it found, and no executor's consumer ever sends a ListOffsets.
 */
final class KafkaContinuousSource implements ContinuousStream, ReportsSourceMetrics {
    private static final Logger LOG = LoggerFactory.getLogger(KafkaContinuousSource.class);
    private static final int RETRIES = 3;  // fetchOffset.numRetries' default
    private static final long RETRY_INTERVAL_MS = 1000;  // fetchOffset.retryIntervalMs' default

    private final ReaderOptions options;
    private final HashMap<String, String> executorParams;
    private final Admin admin;
    private final ListOffsetsOptions listOptions;
    private final Pattern pattern;
    private final ScheduledExecutorService metadata;
    private volatile Set<TopicPartition> knownPartitions;  // what planInputPartitions planned
    private volatile Map<TopicPartition, Long> latest;  // the timer's last look, null before it

    KafkaContinuousSource(ReaderOptions options, String metadataPath) {
        this.options = options;
        String groupId = options.groupId(metadataPath);
        this.executorParams = options.executorParams(groupId);
        this.admin = Admin.create(options.adminParams());
        boolean committed = "read_committed".equalsIgnoreCase(options.kafka.getOrDefault("isolation.level", ""));
        this.listOptions = new ListOffsetsOptions(committed ? IsolationLevel.READ_COMMITTED : IsolationLevel.READ_UNCOMMITTED);
        this.pattern = options.pattern == null ? null : Pattern.compile(options.pattern);
        this.metadata = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "streamq-kafka-metadata");
            t.setDaemon(true);
            return t;
        });
        metadata.scheduleWithFixedDelay(this::refresh, options.metadataIntervalMs, options.metadataIntervalMs, TimeUnit.MILLISECONDS);
        LOG.info("streamq-kafka source on {}: group {}, failOnDataLoss={}", options.strategy, groupId, options.failOnDataLoss);
    }

    // ------------------------------------------------------------------ the stream

    @Override
    public Offset initialOffset() {
        Map<TopicPartition, Long> offsets = retrying("initial offsets", () -> {
            Set<TopicPartition> parts = partitions();
            if (options.kind == ReaderOptions.Kind.SUBSCRIBE) {  // Spark's SubscribeStrategy fails on a missing topic too
                Set<String> missing = new TreeSet<>(options.topics);
                parts.forEach(tp -> missing.remove(tp.topic()));
                if (!missing.isEmpty()) {
                    throw new IllegalStateException("Subscribed topics do not exist: " + missing);
                }
            }
            ReaderOptions.StartingOffsets s = options.starting;
            return switch (s.mode()) {
                case "earliest" -> listOffsets(parts, OffsetSpec.earliest());
                case "latest" -> listOffsets(parts, OffsetSpec.latest());
                default -> specific(parts, s.specific());
            };
        });
        LOG.info("Initial offsets: {}", JsonOffsets.write(offsets));
        return new KafkaOffsets(offsets);
    }

    /** KafkaOffsetReaderAdmin.fetchSpecificOffsets: every partition named, -2/-1 resolved. */
    private Map<TopicPartition, Long> specific(Set<TopicPartition> parts, Map<TopicPartition, Long> given) {
        if (!parts.equals(given.keySet())) {
            throw new IllegalArgumentException("If startingOffsets contains specific offsets, you must specify all "
                + "TopicPartitions.\nUse -1 for latest, -2 for earliest.\nSpecified: " + new TreeSet<>(names(given.keySet()))
                + " Assigned: " + new TreeSet<>(names(parts)));
        }
        Set<TopicPartition> earliest = new HashSet<>();
        Set<TopicPartition> newest = new HashSet<>();
        given.forEach((tp, o) -> {
            if (o == -2L) {
                earliest.add(tp);
            } else if (o == -1L) {
                newest.add(tp);
            }
        });
        Map<TopicPartition, Long> out = new HashMap<>(given);
        out.putAll(listOffsets(earliest, OffsetSpec.earliest()));
        out.putAll(listOffsets(newest, OffsetSpec.latest()));
        return out;
    }

    @Override
    public Offset deserializeOffset(String json) {
        return new KafkaOffsets(JsonOffsets.parse(json));
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start) {
        Map<TopicPartition, Long> old = (start instanceof KafkaOffsets k ? k : (KafkaOffsets) deserializeOffset(start.json()))
            .partitionToOffsets;
        Set<TopicPartition> current = retrying("partitions", this::partitions);
        for (int look = 1; look < RETRIES && !current.containsAll(old.keySet()); look++) {
            // A broker that has just restarted can answer "unknown topic" for a moment: look again
            // before calling partitions gone (data loss fails the query with failOnDataLoss).
            pause(RETRY_INTERVAL_MS);
            current = retrying("partitions", this::partitions);
        }
        Set<TopicPartition> added = new HashSet<>(current);
        added.removeAll(old.keySet());
        Map<TopicPartition, Long> startOffsets = new HashMap<>(retrying("earliest offsets of new partitions",
            () -> listOffsets(added, OffsetSpec.earliest())));
        if (!added.isEmpty()) {
            LOG.info("Partitions added: {}; they start at {}", names(added), JsonOffsets.write(startOffsets));
        }
        Set<TopicPartition> deleted = new HashSet<>(old.keySet());
        deleted.removeAll(current);
        if (!deleted.isEmpty()) {
            reportDataLoss(new TreeSet<>(names(deleted)) + " are gone. Some data may have been missed.");
        }
        old.forEach((tp, o) -> {
            if (!deleted.contains(tp)) {
                startOffsets.put(tp, o);
            }
        });
        knownPartitions = Set.copyOf(startOffsets.keySet());
        List<TopicPartition> ordered = new ArrayList<>(startOffsets.keySet());
        ordered.sort(JsonOffsets.ORDER);
        InputPartition[] out = new InputPartition[ordered.size()];
        for (int i = 0; i < out.length; i++) {
            TopicPartition tp = ordered.get(i);
            out[i] = new KafkaPartitionReader.Partition(tp, startOffsets.get(tp), executorParams,
                options.pollTimeoutMs, options.failOnDataLoss, options.includeHeaders);
        }
        return out;
    }

    @Override
    public ContinuousPartitionReaderFactory createContinuousReaderFactory() {
        return new KafkaPartitionReader.Factory();
    }

    @Override
    public Offset mergeOffsets(PartitionOffset[] offsets) {
        Map<TopicPartition, Long> merged = new HashMap<>();
        for (PartitionOffset o : offsets) {
            KafkaOffsets.PartitionPosition p = (KafkaOffsets.PartitionPosition) o;
            merged.put(p.topicPartition(), p.nextOffset());
        }
        return new KafkaOffsets(merged);
    }

    @Override
    public boolean needsReconfiguration() {
        Map<TopicPartition, Long> seen = latest;
        Set<TopicPartition> known = knownPartitions;
        return seen != null && known != null && !seen.keySet().equals(known);
    }

    @Override
    public void commit(Offset end) {
        // Nothing to do: as Spark's source, the offsets live in the checkpoint only.
    }

    @Override
    public void stop() {
        metadata.shutdownNow();
        admin.close(Duration.ofSeconds(5));
    }

    /** The lag, as Spark's KafkaMicroBatchStream.metrics reports it (min/max/avgOffsetsBehindLatest). */
    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumed) {
        Map<TopicPartition, Long> ends = latest;
        if (ends == null || latestConsumed.isEmpty()) {
            return Map.of();
        }
        Offset consumedOffset = latestConsumed.get();
        Map<TopicPartition, Long> consumed = (consumedOffset instanceof KafkaOffsets k ? k
            : (KafkaOffsets) deserializeOffset(consumedOffset.json())).partitionToOffsets;
        long min = Long.MAX_VALUE;
        long max = Long.MIN_VALUE;
        long sum = 0;
        int n = 0;
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            Long at = consumed.get(e.getKey());
            if (at == null) {
                continue;
            }
            long behind = Math.max(0L, e.getValue() - at);
            min = Math.min(min, behind);
            max = Math.max(max, behind);
            sum += behind;
            n++;
        }
        if (n == 0) {
            return Map.of();
        }
        return Map.of("minOffsetsBehindLatest", Long.toString(min), "maxOffsetsBehindLatest", Long.toString(max),
            "avgOffsetsBehindLatest", Double.toString((double) sum / n));
    }

    @Override
    public String toString() {
        return "StreamqKafkaSource[" + options.strategy + "]";
    }

    // ------------------------------------------------------------------ metadata

    private void refresh() {
        try {
            latest = Map.copyOf(listOffsets(partitions(), OffsetSpec.latest()));
        } catch (RuntimeException e) {
            LOG.debug("Listing partitions and latest offsets failed; keeping the last look", e);
        }
    }

    /** The partitions the strategy reads now; a topic that does not exist has none. */
    private Set<TopicPartition> partitions() {
        return switch (options.kind) {
            case SUBSCRIBE -> describe(options.topics);
            case SUBSCRIBE_PATTERN -> {
                Set<String> names = await(admin.listTopics().names());
                yield describe(names.stream().filter(t -> pattern.matcher(t).matches()).toList());
            }
            case ASSIGN -> {
                Set<TopicPartition> existing = describe(options.assigned.stream().map(TopicPartition::topic).distinct().toList());
                Set<TopicPartition> out = new HashSet<>(options.assigned);
                out.retainAll(existing);
                yield out;
            }
        };
    }

    private Set<TopicPartition> describe(Collection<String> topics) {
        Set<TopicPartition> out = new HashSet<>();
        if (topics.isEmpty()) {
            return out;
        }
        for (Map.Entry<String, KafkaFuture<TopicDescription>> e : admin.describeTopics(topics).topicNameValues().entrySet()) {
            TopicDescription d;
            try {
                d = e.getValue().get();
            } catch (ExecutionException ex) {
                if (ex.getCause() instanceof UnknownTopicOrPartitionException) {
                    continue;  // deleted, or not created yet
                }
                throw new IllegalStateException("Describing topic " + e.getKey() + " failed", ex.getCause());
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(ex);
            }
            for (TopicPartitionInfo p : d.partitions()) {
                out.add(new TopicPartition(d.name(), p.partition()));
            }
        }
        return out;
    }

    private Map<TopicPartition, Long> listOffsets(Set<TopicPartition> parts, OffsetSpec spec) {
        Map<TopicPartition, Long> out = new HashMap<>();
        if (parts.isEmpty()) {
            return out;
        }
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        parts.forEach(tp -> request.put(tp, spec));
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> got = await(admin.listOffsets(request, listOptions).all());
        got.forEach((tp, info) -> out.put(tp, info.offset()));
        return out;
    }

    private static <T> T await(KafkaFuture<T> future) {
        try {
            return future.get();
        } catch (ExecutionException e) {
            throw new IllegalStateException(e.getCause().getMessage(), e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** KafkaOffsetReaderAdmin.withRetries: a few tries a second apart before the query fails. */
    private static <T> T retrying(String what, Supplier<T> body) {
        RuntimeException last = null;
        for (int attempt = 1; attempt <= RETRIES; attempt++) {
            try {
                return body.get();
            } catch (IllegalArgumentException e) {
                throw e;  // the options are wrong: retrying cannot help
            } catch (RuntimeException e) {
                last = e;
                LOG.warn("Listing {} failed (attempt {} of {})", what, attempt, RETRIES, e);
                if (!pause(RETRY_INTERVAL_MS)) {
                    break;
                }
            }
        }
        throw last;
    }

    /** False when interrupted (the flag is kept for the caller). */
    private static boolean pause(long ms) {
        try {
            Thread.sleep(ms);
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private void reportDataLoss(String message) {
        if (options.failOnDataLoss) {
            throw new IllegalStateException(message + " If you don't want your streaming query to fail on such cases, "
                + "set the source option \"failOnDataLoss\" to \"false\".");
        }
        LOG.warn("{} Continuing: the source option failOnDataLoss is false.", message);
    }

    private static List<String> names(Collection<TopicPartition> parts) {
        return parts.stream().map(TopicPartition::toString).toList();
    }
}
