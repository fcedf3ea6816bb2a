package io.streamq.reader;

import java.util.Collections;
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;

/** The stream's offset: the next offset to read of every partition (Spark's KafkaSourceOffset). */
final class KafkaOffsets extends Offset {
    final Map<TopicPartition, Long> partitionToOffsets;
    private final String json;

    KafkaOffsets(Map<TopicPartition, Long> partitionToOffsets) {
        this.partitionToOffsets = Collections.unmodifiableMap(new HashMap<>(partitionToOffsets));
        this.json = JsonOffsets.write(partitionToOffsets);
    }

    @Override
    public String json() {
        return json;
    }

    /** One partition's position, as a reader reports it at an epoch (KafkaSourcePartitionOffset). */
    record PartitionPosition(TopicPartition topicPartition, long nextOffset) implements PartitionOffset {
    }
}
