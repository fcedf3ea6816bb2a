package io.streamq.reader;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.ContinuousStream;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.readStream.format("streamq-kafka")}: a Kafka source for continuous mode only
 * (issue #43). The options are those of Spark's Kafka source that continuous mode reads
 * (subscribe | subscribePattern | assign, startingOffsets, failOnDataLoss, includeHeaders,
 * kafkaConsumer.pollTimeoutMs, groupIdPrefix, kafka.*); the rows have the same schema; the
 * offsets it writes to the checkpoint have the same JSON shape as Spark's KafkaSourceOffset.
 *
 * The table declares CONTINUOUS_READ only: a micro-batch or real-time query on it fails at start
 * in Spark's own check (the operator refuses it before: contract/rules.py).
 */
public final class StreamqKafkaProvider implements TableProvider, DataSourceRegister {
    public static final String SHORT_NAME = "streamq-kafka";

    @Override
    public String shortName() {
        return SHORT_NAME;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return KafkaRows.schema(ReaderOptions.parse(options).includeHeaders);  // refuses bad options at load()
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new KafkaTable(schema);
    }

    static final class KafkaTable implements Table, SupportsRead {
        private final StructType schema;

        KafkaTable(StructType schema) {
            this.schema = schema;
        }

        @Override
        public String name() {
            return "StreamqKafkaTable";
        }

        @Override
        @SuppressWarnings("deprecation")
        public StructType schema() {
            return schema;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return EnumSet.of(TableCapability.CONTINUOUS_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            ReaderOptions parsed = ReaderOptions.parse(options);
            StructType rows = KafkaRows.schema(parsed.includeHeaders);
            return () -> new KafkaScan(rows, parsed);
        }
    }

    static final class KafkaScan implements Scan {
        private final StructType schema;
        private final ReaderOptions options;

        KafkaScan(StructType schema, ReaderOptions options) {
            this.schema = schema;
            this.options = options;
        }

        @Override
        public StructType readSchema() {
            return schema;
        }

        @Override
        public String description() {
            return "StreamqKafka[" + options.strategy + "]";
        }

        @Override
        public ContinuousStream toContinuousStream(String checkpointLocation) {
            return new KafkaContinuousSource(options, checkpointLocation);
        }
    }
}
