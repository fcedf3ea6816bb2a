"""Specs a tenant must not get through: each refused with the rule it broke.

Shared by the unit tests (validate_spec with the default policy, the model's limits)
and the integration test that applies them to a real API server with the operator running.
"""

from __future__ import annotations

from tests.support.specs import changed, query_spec

BASE = query_spec()
PVC = {"persistentVolumeClaim": {"claimName": "checkpoints"}}


def conf(**keys: str) -> dict:
    """A spec whose runtime.sparkConf holds ``keys`` (dots written as __)."""
    return changed(BASE, {"runtime.sparkConf": {k.replace("__", "."): v for k, v in keys.items()}})


# --- refused by the policy (the operator: Invalid, an event, no pod) -------------------------

# name: (spec, namespace, path, the rule the message names)
REFUSED_BY_POLICY = {
    "borrowed service account": (
        changed(BASE, {"runtime.serviceAccountName": "team-b-admin"}), "team-a",
        "spec.runtime.serviceAccountName", "policy.allowedServiceAccounts",
    ),
    "the operator's account in its namespace": (
        changed(BASE, {"runtime.serviceAccountName": "streamq-operator"}), "streamq-system",
        "spec.runtime.serviceAccountName", "policy.operatorServiceAccount",
    ),
    "the operator's account, namespace unknown": (
        changed(BASE, {"runtime.serviceAccountName": "streamq-operator"}), None,
        "spec.runtime.serviceAccountName", "policy.operatorServiceAccount",
    ),
    "hostPath of the node's root": (
        changed(BASE, {"checkpoint.volume": {"hostPath": "/"}}), "team-a",
        "spec.checkpoint.volume.hostPath", "policy.allowedVolumes",
    ),
    "hostPath of the kubelet's credentials": (
        changed(BASE, {"checkpoint.volume": {"hostPath": "/var/lib/kubelet/pki"}}), "team-a",
        "spec.checkpoint.volume.hostPath", "policy.allowedVolumes",
    ),
    "disallowed image": (
        changed(BASE, {"runtime.image": "evil.io/miner:1"}), "team-a", "spec.runtime.image", "policy.allowedImages",
    ),
    "the job image with another tag": (
        changed(BASE, {"runtime.image": "streamq:0.1.0-debug"}), "team-a", "spec.runtime.image", "policy.allowedImages",
    ),
    "spark.master override": (
        conf(spark__master="k8s://https://10.0.0.1:6443"), "team-a",
        "spec.runtime.sparkConf.spark.master", "policy.operatorSparkConf",
    ),
    "another namespace for executors": (
        conf(spark__kubernetes__namespace="kube-system"), "team-a",
        "spec.runtime.sparkConf.spark.kubernetes.namespace", "policy.operatorSparkConf",
    ),
    "executor pod template": (
        conf(spark__kubernetes__executor__podTemplateFile="/tmp/privileged.yaml"), "team-a",
        "spec.runtime.sparkConf.spark.kubernetes.executor.podTemplateFile", "policy.operatorSparkConf",
    ),
    "hostPath on executors through sparkConf": (
        conf(**{"spark__kubernetes__executor__volumes__hostPath__root__options__path": "/"}), "team-a",
        "spec.runtime.sparkConf.spark.kubernetes.executor.volumes.hostPath.root.options.path",
        "policy.operatorSparkConf",
    ),
    "executor image through sparkConf": (
        conf(spark__kubernetes__container__image="evil.io/miner:1"), "team-a",
        "spec.runtime.sparkConf.spark.kubernetes.container.image", "policy.operatorSparkConf",
    ),
    "10,000 executors through sparkConf": (
        conf(spark__executor__instances="10000"), "team-a",
        "spec.runtime.sparkConf.spark.executor.instances", "policy.operatorSparkConf",
    ),
    "dynamic allocation": (
        conf(spark__dynamicAllocation__maxExecutors="10000"), "team-a",
        "spec.runtime.sparkConf.spark.dynamicAllocation.maxExecutors", "policy.operatorSparkConf",
    ),
    "checkpoint location through sparkConf": (
        conf(spark__sql__streaming__checkpointLocation="/etc/streamq"), "team-a",
        "spec.runtime.sparkConf.spark.sql.streaming.checkpointLocation", "policy.operatorSparkConf",
    ),
    "driver extraJavaOptions": (
        conf(spark__driver__extraJavaOptions="-javaagent:/tmp/agent.jar"), "team-a",
        "spec.runtime.sparkConf.spark.driver.extraJavaOptions", "policy.refusedSparkConf",
    ),
    "executor extraClassPath": (
        conf(spark__executor__extraClassPath="/tmp/evil"), "team-a",
        "spec.runtime.sparkConf.spark.executor.extraClassPath", "policy.refusedSparkConf",
    ),
    "remote jars": (
        conf(spark__jars="https://evil.example/x.jar"), "team-a",
        "spec.runtime.sparkConf.spark.jars", "policy.refusedSparkConf",
    ),
    "jars from a Maven repository": (
        conf(spark__jars__packages="com.evil:x:1.0"), "team-a",
        "spec.runtime.sparkConf.spark.jars.packages", "policy.refusedSparkConf",
    ),
    "SQL extensions through the spark.sql.* allowance": (
        conf(spark__sql__extensions="com.evil.Extension"), "team-a",
        "spec.runtime.sparkConf.spark.sql.extensions", "policy.refusedSparkConf",
    ),
    "authentication off": (
        conf(spark__authenticate="false"), "team-a",
        "spec.runtime.sparkConf.spark.authenticate", "policy.refusedSparkConf",
    ),
    "Spark UI on a port": (
        conf(spark__ui__port="4040"), "team-a", "spec.runtime.sparkConf.spark.ui.port", "policy.refusedSparkConf",
    ),
    "executor environment": (
        conf(spark__executorEnv__LD_PRELOAD="/tmp/x.so"), "team-a",
        "spec.runtime.sparkConf.spark.executorEnv.LD_PRELOAD", "policy.refusedSparkConf",
    ),
    "a secret in sparkConf": (
        conf(spark__hadoop__fs__s3a__secret__key="AKIA..."), "team-a",
        "spec.runtime.sparkConf.spark.hadoop.fs.s3a.secret.key", "policy.secretSparkConf",
    ),
    "a JAAS config in sparkConf": (
        conf(**{"spark__kafka__sasl__jaas__config": "PlainLoginModule required password=x;"}), "team-a",
        "spec.runtime.sparkConf.spark.kafka.sasl.jaas.config", "policy.secretSparkConf",
    ),
    "an unknown Spark setting": (
        conf(spark__plugins__x="1"), "team-a", "spec.runtime.sparkConf.spark.plugins.x", "policy.allowedSparkConf",
    ),
    "more executors than the policy allows": (
        changed(BASE, {"runtime.executors": {"instances": 11}}), "team-a",
        "spec.runtime.executors.instances", "policy.maxExecutors",
    ),
    "more cores than the policy allows": (
        changed(BASE, {"runtime.executors": {"instances": 10, "cores": 8}}), "team-a", "spec.runtime", "policy.maxCores",
    ),
    "more memory than the policy allows": (
        changed(BASE, {"runtime.executors": {"instances": 8, "memory": "16Gi"}}), "team-a", "spec.runtime", "policy.maxMemory",
    ),
    "checkpoint under the query document": (
        changed(BASE, {"checkpoint.location": "/etc/streamq/cp"}), "team-a",
        "spec.checkpoint.location", "policy.protectedPaths",
    ),
    "checkpoint volume over the account token": (
        changed(BASE, {"checkpoint": {"location": "/var/run/secrets/kubernetes.io/x", "volume": PVC}}), "team-a",
        "spec.checkpoint.location", "policy.protectedPaths",
    ),
    "checkpoint volume over the job's code": (
        changed(BASE, {"checkpoint": {"location": "/opt/cp", "volume": PVC}}), "team-a",
        "spec.checkpoint.location", "policy.protectedPaths",
    ),
    "checkpoint in /proc as a file URI": (
        changed(BASE, {"checkpoint.location": "file:///proc/self/cp"}), "team-a",
        "spec.checkpoint.location", "policy.protectedPaths",
    ),
    "checkpoint path with ..": (
        changed(BASE, {"checkpoint.location": "/checkpoints/../etc/streamq/cp"}), "team-a",
        "spec.checkpoint.location", "policy.protectedPaths",
    ),
    "checkpoint volume over the driver's /tmp": (
        changed(BASE, {"checkpoint": {"location": "/tmp/cp", "volume": PVC}}), "team-a",
        "spec.checkpoint.location", "policy.protectedPaths",
    ),
}


# --- refused by the static limits (the CRD: the API server refuses them first) ---------------


def _long(n: int) -> str:
    return "x" * n


# name: (spec, path, what pydantic says, the CRD node's path and limit)
REFUSED_BY_LIMITS = {
    "huge SQL": (
        changed(BASE, {"transforms": [{"sql": f"SELECT * FROM input WHERE key = '{_long(70_000)}'"}]}),
        "spec.transforms[0].sql", "at most 65536 characters", ("transforms", "[]", "sql"), ("maxLength", 65_536),
    ),
    "huge where": (
        changed(BASE, {"transforms": [{"where": f"key = '{_long(10_000)}'"}]}),
        "spec.transforms[0].where", "at most 8192 characters", ("transforms", "[]", "where"), ("maxLength", 8_192),
    ),
    "huge select item": (
        changed(BASE, {"transforms": [{"select": [f"'{_long(10_000)}' AS x"]}]}),
        "spec.transforms[0].select[0]", "at most 8192 characters", ("transforms", "[]", "select", "[]"), ("maxLength", 8_192),
    ),
    "300 select items": (
        changed(BASE, {"transforms": [{"select": [f"c{i}" for i in range(300)]}]}),
        "spec.transforms[0].select", "at most 256 items", ("transforms", "[]", "select"), ("maxItems", 256),
    ),
    "100 transforms": (
        changed(BASE, {"transforms": [{"where": "true"}] * 100}),
        "spec.transforms", "at most 64 items", ("transforms",), ("maxItems", 64),
    ),
    "100 Kafka options": (
        changed(BASE, {"source.kafka.options": {f"kafka.x{i}": "1" for i in range(100)}}),
        "spec.source.kafka.options", "at most 64 items", ("source", "kafka", "options"), ("maxProperties", 64),
    ),
    "200 Spark settings": (
        changed(BASE, {"runtime.sparkConf": {f"spark.sql.x{i}": "1" for i in range(200)}}),
        "spec.runtime.sparkConf", "at most 128 items", ("runtime", "sparkConf"), ("maxProperties", 128),
    ),
    "10,000 executors": (
        changed(BASE, {"runtime.executors": {"instances": 10_000}}),
        "spec.runtime.executors.instances", "less than or equal to 1000", ("runtime", "executors", "instances"), ("maximum", 1_000),
    ),
    "128 cores per executor": (
        changed(BASE, {"runtime.executors": {"instances": 1, "cores": 128}}),
        "spec.runtime.executors.cores", "less than or equal to 64", ("runtime", "executors", "cores"), ("maximum", 64),
    ),
    "128 driver cores": (
        changed(BASE, {"runtime.driver": {"cores": 128}}),
        "spec.runtime.driver.cores", "less than or equal to 64", ("runtime", "driver", "cores"), ("maximum", 64),
    ),
    "a huge Spark setting value": (
        changed(BASE, {"runtime.sparkConf": {"spark.sql.x": _long(5_000)}}),
        "spec.runtime.sparkConf.spark.sql.x", "at most 4096 characters", ("runtime", "sparkConf", "{}"), ("maxLength", 4_096),
    ),
}
