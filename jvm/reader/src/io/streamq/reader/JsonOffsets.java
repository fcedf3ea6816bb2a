package io.streamq.reader;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.TopicPartition;

/**
 * Offsets in the JSON of Spark's Kafka source (JsonUtils.partitionOffsets, the form
 * KafkaSourceOffset.json writes to a checkpoint's offsets/N): {"topic":{"0":23,"1":-1}}, the
 * next offset to read per partition. Written with topics and partitions in order (Spark sorts
 * partitions before writing too), so equal offsets give equal text; read in any order.
 */
final class JsonOffsets {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    static final Comparator<TopicPartition> ORDER =
        Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

    private JsonOffsets() {
    }

    static String write(Map<TopicPartition, Long> offsets) {
        Map<String, Map<Integer, Long>> byTopic = new TreeMap<>();
        for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
            byTopic.computeIfAbsent(e.getKey().topic(), t -> new TreeMap<>()).put(e.getKey().partition(), e.getValue());
        }
        ObjectNode root = MAPPER.createObjectNode();
        for (Map.Entry<String, Map<Integer, Long>> t : byTopic.entrySet()) {
            ObjectNode parts = root.putObject(t.getKey());
            for (Map.Entry<Integer, Long> p : t.getValue().entrySet()) {
                parts.put(Integer.toString(p.getKey()), p.getValue().longValue());
            }
        }
        try {
            return MAPPER.writeValueAsString(root);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    /** {"topic":{"0":23}} -> offsets; the refusal names what Spark's JsonUtils would expect. */
    static Map<TopicPartition, Long> parse(String json) {
        JsonNode root = read(json, "{\"topicA\":{\"0\":23,\"1\":-1},\"topicB\":{\"0\":-2}}");
        Map<TopicPartition, Long> out = new HashMap<>();
        for (Map.Entry<String, JsonNode> topic : root.properties()) {
            if (!topic.getValue().isObject()) {
                throw expected(json, "{\"topicA\":{\"0\":23,\"1\":-1},\"topicB\":{\"0\":-2}}");
            }
            for (Map.Entry<String, JsonNode> p : topic.getValue().properties()) {
                if (!p.getValue().canConvertToLong() || !p.getValue().isIntegralNumber()) {
                    throw expected(json, "{\"topicA\":{\"0\":23,\"1\":-1},\"topicB\":{\"0\":-2}}");
                }
                out.put(new TopicPartition(topic.getKey(), partition(p.getKey(), json)), p.getValue().asLong());
            }
        }
        return out;
    }

    /** assign's {"topicA":[0,1],"topicB":[2,4]} -> partitions (JsonUtils.partitions). */
    static List<TopicPartition> parsePartitions(String json) {
        String example = "{\"topicA\":[0,1],\"topicB\":[0,1]}";
        JsonNode root = read(json, example);
        List<TopicPartition> out = new ArrayList<>();
        for (Map.Entry<String, JsonNode> topic : root.properties()) {
            if (!topic.getValue().isArray()) {
                throw expected(json, example);
            }
            for (JsonNode p : topic.getValue()) {
                if (!p.isInt()) {
                    throw expected(json, example);
                }
                out.add(new TopicPartition(topic.getKey(), p.asInt()));
            }
        }
        out.sort(ORDER);
        return List.copyOf(out);
    }

    private static JsonNode read(String json, String example) {
        JsonNode root;
        try {
            root = MAPPER.readTree(json);
        } catch (JsonProcessingException e) {
            throw expected(json, example);
        }
        if (root == null || !root.isObject()) {
            throw expected(json, example);
        }
        return root;
    }

    private static int partition(String key, String json) {
        try {
            return Integer.parseInt(key);
        } catch (NumberFormatException e) {
            throw expected(json, "{\"topicA\":{\"0\":23,\"1\":-1},\"topicB\":{\"0\":-2}}");
        }
    }

    private static IllegalArgumentException expected(String json, String example) {
        return new IllegalArgumentException("Expected e.g. " + example + ", got " + json);
    }
}
