package io.streamq.reader;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The rows of Spark's Kafka source (KafkaRecordToRowConverter): key, value, topic, partition,
 * offset, timestamp, timestampType, and headers with includeHeaders. Rows are UnsafeRows:
 * Spark's continuous reader thread (ContinuousQueuedDataReader.DataReaderThread) casts what
 * get() returns to UnsafeRow and copies it before queueing, so one row buffer is reused.
 */
final class KafkaRows {
    private static final StructType HEADER = new StructType()
        .add("key", DataTypes.StringType, true)
        .add("value", DataTypes.BinaryType, true);
    private static final StructType BASE = new StructType()
        .add("key", DataTypes.BinaryType, true)
        .add("value", DataTypes.BinaryType, true)
        .add("topic", DataTypes.StringType, true)
        .add("partition", DataTypes.IntegerType, true)
        .add("offset", DataTypes.LongType, true)
        .add("timestamp", DataTypes.TimestampType, true)
        .add("timestampType", DataTypes.IntegerType, true);
    private static final StructType WITH_HEADERS = BASE.add("headers", new ArrayType(HEADER, true), true);

    static StructType schema(boolean includeHeaders) {
        return includeHeaders ? WITH_HEADERS : BASE;
    }

    private final boolean includeHeaders;
    private final UTF8String topic;
    private final UnsafeRowWriter writer;  // without headers: written field by field
    private final UnsafeProjection projection;  // with headers: the nested array through a projection

    KafkaRows(String topic, boolean includeHeaders) {
        this.includeHeaders = includeHeaders;
        this.topic = UTF8String.fromString(topic);
        this.writer = includeHeaders ? null : new UnsafeRowWriter(BASE.size(), 256);
        this.projection = includeHeaders ? UnsafeProjection.create(WITH_HEADERS) : null;
    }

    UnsafeRow toRow(ConsumerRecord<byte[], byte[]> r) {
        // Spark: DateTimeUtils.fromJavaTimestamp(new Timestamp(ms)), the same micros for any date after 1582.
        long micros = Math.multiplyExact(r.timestamp(), 1000L);
        if (!includeHeaders) {
            UnsafeRowWriter w = writer;
            w.reset();
            w.zeroOutNullBytes();
            w.writeNullable(0, r.key(), r.key() == null);
            w.writeNullable(1, r.value(), r.value() == null);
            w.write(2, topic);
            w.write(3, r.partition());
            w.write(4, r.offset());
            w.write(5, micros);
            w.write(6, r.timestampType().id);
            return w.getRow();
        }
        Header[] headers = r.headers().toArray();
        Object[] hs = new Object[headers.length];
        for (int i = 0; i < headers.length; i++) {
            hs[i] = new GenericInternalRow(new Object[] {UTF8String.fromString(headers[i].key()), headers[i].value()});
        }
        GenericInternalRow row = new GenericInternalRow(new Object[] {
            r.key(), r.value(), topic, r.partition(), r.offset(), micros, r.timestampType().id, new GenericArrayData(hs)});
        return projection.apply(row);
    }
}
