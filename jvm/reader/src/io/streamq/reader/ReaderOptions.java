package io.streamq.reader;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The options of the reader, parsed and checked the way Spark's Kafka source checks its own
 * (KafkaSourceProvider.validateStreamOptions / validateGeneralOptions), so that one spec runs on
 * either reader. Options Spark's source takes in continuous mode but this reader does not
 * implement are refused with the reason, never ignored.
 */
final class ReaderOptions implements Serializable {
    private static final long serialVersionUID = 1L;

    static final String SUBSCRIBE = "subscribe";
    static final String SUBSCRIBE_PATTERN = "subscribepattern";
    static final String ASSIGN = "assign";
    static final String STARTING_OFFSETS = "startingoffsets";
    static final String FAIL_ON_DATA_LOSS = "failondataloss";
    static final String INCLUDE_HEADERS = "includeheaders";
    static final String POLL_TIMEOUT_MS = "kafkaconsumer.polltimeoutms";
    static final String GROUP_ID_PREFIX = "groupidprefix";
    /** How often the driver lists the partitions and their latest offsets (lag, new partitions). */
    static final String METADATA_INTERVAL_MS = "streamq.metadataintervalms";

    /** Options of Spark's source that this reader does not implement (continuous mode ignores the rest). */
    private static final Map<String, String> UNSUPPORTED = Map.of(
        "startingoffsetsbytimestamp", "startingOffsetsByTimestamp",
        "startingtimestamp", "startingTimestamp",
        "startingoffsetsbytimestampstrategy", "startingOffsetsByTimestampStrategy",
        "endingoffsets", "endingOffsets",
        "endingoffsetsbytimestamp", "endingOffsetsByTimestamp",
        "endingtimestamp", "endingTimestamp");
    /** Consumer settings the reader sets itself; Spark's source refuses them likewise. */
    private static final Set<String> MANAGED = Set.of(
        "auto.offset.reset", "key.deserializer", "value.deserializer", "enable.auto.commit", "interceptor.classes");

    enum Kind { SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN }

    final Kind kind;
    final List<String> topics;  // SUBSCRIBE
    final String pattern;  // SUBSCRIBE_PATTERN
    final List<TopicPartition> assigned;  // ASSIGN
    final String strategy;  // as written, for messages
    final StartingOffsets starting;
    final boolean failOnDataLoss;
    final boolean includeHeaders;
    final long pollTimeoutMs;
    final long metadataIntervalMs;
    final String groupIdPrefix;
    final Map<String, String> kafka;  // kafka.* without the prefix (user's, as given)

    private ReaderOptions(Kind kind, List<String> topics, String pattern, List<TopicPartition> assigned,
                          String strategy, StartingOffsets starting, boolean failOnDataLoss, boolean includeHeaders,
                          long pollTimeoutMs, long metadataIntervalMs, String groupIdPrefix, Map<String, String> kafka) {
        this.kind = kind;
        this.topics = topics;
        this.pattern = pattern;
        this.assigned = assigned;
        this.strategy = strategy;
        this.starting = starting;
        this.failOnDataLoss = failOnDataLoss;
        this.includeHeaders = includeHeaders;
        this.pollTimeoutMs = pollTimeoutMs;
        this.metadataIntervalMs = metadataIntervalMs;
        this.groupIdPrefix = groupIdPrefix;
        this.kafka = kafka;
    }

    static ReaderOptions parse(CaseInsensitiveStringMap options) {
        Map<String, String> lower = new TreeMap<>();
        Map<String, String> kafka = new TreeMap<>();
        // Original case: Kafka's own settings are passed on as written (KafkaSourceProvider does the same).
        for (Map.Entry<String, String> e : options.asCaseSensitiveMap().entrySet()) {
            String key = e.getKey().toLowerCase(Locale.ROOT);
            lower.put(key, e.getValue());
            if (key.startsWith("kafka.")) {
                kafka.put(e.getKey().substring("kafka.".length()), e.getValue());
            }
        }
        for (Map.Entry<String, String> u : UNSUPPORTED.entrySet()) {
            if (lower.containsKey(u.getKey())) {
                throw new IllegalArgumentException("Option '" + u.getValue() + "' is not supported by the "
                    + StreamqKafkaProvider.SHORT_NAME + " source; use Spark's kafka source for it");
            }
        }
        for (String k : kafka.keySet()) {
            if (MANAGED.contains(k.toLowerCase(Locale.ROOT))) {
                throw new IllegalArgumentException("Kafka option 'kafka." + k + "' is not supported as the "
                    + StreamqKafkaProvider.SHORT_NAME + " source manages it (as Spark's Kafka source does)");
            }
        }
        if (!kafka.containsKey(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG)) {
            throw new IllegalArgumentException("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer");
        }
        List<String> strategies = new ArrayList<>();
        for (String s : List.of(SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN)) {
            if (lower.containsKey(s)) {
                strategies.add(s);
            }
        }
        if (strategies.size() != 1) {
            throw new IllegalArgumentException("One of the following options must be specified for Kafka source: "
                + "subscribe, subscribePattern, assign. See the docs for more details.");
        }
        String which = strategies.get(0);
        String value = lower.get(which).trim();
        Kind kind;
        List<String> topics = List.of();
        String pattern = null;
        List<TopicPartition> assigned = List.of();
        switch (which) {
            case SUBSCRIBE -> {
                kind = Kind.SUBSCRIBE;
                topics = Arrays.stream(value.split(",")).map(String::trim).filter(t -> !t.isEmpty()).toList();
                if (topics.isEmpty()) {
                    throw new IllegalArgumentException("No topics to subscribe to as specified value for option 'subscribe' is '" + value + "'");
                }
            }
            case SUBSCRIBE_PATTERN -> {
                kind = Kind.SUBSCRIBE_PATTERN;
                if (value.isEmpty()) {
                    throw new IllegalArgumentException("Pattern to subscribe is empty as specified value for option 'subscribePattern' is ''");
                }
                Pattern.compile(value);  // refuses a bad pattern now, not on the metadata thread
                pattern = value;
            }
            default -> {
                kind = Kind.ASSIGN;
                if (!value.startsWith("{")) {
                    throw new IllegalArgumentException("No topicpartitions to assign as specified value for option 'assign' is '" + value + "'");
                }
                assigned = JsonOffsets.parsePartitions(value);
                if (assigned.isEmpty()) {
                    throw new IllegalArgumentException("No topicpartitions to assign as specified value for option 'assign' is '" + value + "'");
                }
            }
        }
        StartingOffsets starting = StartingOffsets.parse(lower.getOrDefault(STARTING_OFFSETS, "latest"));
        boolean failOnDataLoss = bool(lower, FAIL_ON_DATA_LOSS, true);
        boolean includeHeaders = bool(lower, INCLUDE_HEADERS, false);
        long pollTimeoutMs = positiveLong(lower, POLL_TIMEOUT_MS, 512L);  // KafkaContinuousStream.pollTimeoutMs
        long metadataIntervalMs = positiveLong(lower, METADATA_INTERVAL_MS, 1000L);
        String prefix = lower.getOrDefault(GROUP_ID_PREFIX, "streamq-kafka-source");
        return new ReaderOptions(kind, topics, pattern, assigned, which + "=" + value, starting, failOnDataLoss,
            includeHeaders, pollTimeoutMs, metadataIntervalMs, prefix, kafka);
    }

    private static boolean bool(Map<String, String> lower, String key, boolean dflt) {
        String v = lower.get(key);
        if (v == null) {
            return dflt;
        }
        String t = v.trim().toLowerCase(Locale.ROOT);
        if (!t.equals("true") && !t.equals("false")) {
            throw new IllegalArgumentException("Option '" + key + "' must be true or false, not '" + v + "'");
        }
        return t.equals("true");
    }

    private static long positiveLong(Map<String, String> lower, String key, long dflt) {
        String v = lower.get(key);
        if (v == null) {
            return dflt;
        }
        try {
            long n = Long.parseLong(v.trim());
            if (n > 0) {
                return n;
            }
        } catch (NumberFormatException ignored) {
            // falls through to the refusal
        }
        throw new IllegalArgumentException("Option '" + key + "' must be a positive number of milliseconds, not '" + v + "'");
    }

    /** The group of this query's consumers: the user's kafka.group.id, else one per stream (as Spark's). */
    String groupId(String metadataPath) {
        String given = kafka.get(ConsumerConfig.GROUP_ID_CONFIG);
        if (given != null) {
            return given;
        }
        return groupIdPrefix + "-" + UUID.randomUUID() + "-" + metadataPath.hashCode();
    }

    /** Settings for the driver's Admin client: the user's, servers and security included. */
    Map<String, Object> adminParams() {
        return new HashMap<>(kafka);
    }

    /**
     * Settings for an executor's consumer, as KafkaSourceProvider.kafkaParamsForExecutors sets them:
     * byte-array deserializers, no auto reset (an offset out of range is reported, not skipped), no
     * commits, a 64 KiB receive buffer unless set. SASL and TLS settings pass through unchanged.
     */
    HashMap<String, String> executorParams(String groupId) {
        HashMap<String, String> params = new HashMap<>(kafka);
        params.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        params.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        params.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        params.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        params.put(ConsumerConfig.GROUP_ID_CONFIG, kafka.containsKey(ConsumerConfig.GROUP_ID_CONFIG) ? groupId : groupId + "-executor");
        params.putIfAbsent(ConsumerConfig.RECEIVE_BUFFER_CONFIG, "65536");
        return params;
    }

    /** startingOffsets: earliest, latest, or {"topic":{"0":42,"1":-2}} (-2 earliest, -1 latest). */
    record StartingOffsets(String mode, Map<TopicPartition, Long> specific) implements Serializable {
        static StartingOffsets parse(String text) {
            String t = text.trim();
            if (t.equalsIgnoreCase("earliest") || t.equalsIgnoreCase("latest")) {
                return new StartingOffsets(t.toLowerCase(Locale.ROOT), Map.of());
            }
            if (t.startsWith("{")) {
                return new StartingOffsets("specific", JsonOffsets.parse(t));
            }
            throw new IllegalArgumentException("Option 'startingOffsets' must be earliest, latest or JSON offsets, not '" + text + "'");
        }
    }
}
