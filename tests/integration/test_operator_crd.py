"""The API server itself refuses invalid StreamingQueries (schema and CEL from the
generated CRD), with the message `kubectl apply` prints. No operator runs here.

Each case is also refused by the spec model (contract.load.validate_spec), so the
CRD never lets through what the job would refuse for the same reason, and never
refuses what the model accepts (the valid cases)."""

from __future__ import annotations

import pytest

from contract.load import validate_spec
from contract.problems import SpecError
from testbed.specs import RATE_TO_CONSOLE, query_spec, resource

pytestmark = pytest.mark.integration

KAFKA = {"bootstrapServers": "kafka:9092", "topics": ["payments"]}


def spec_with(**changes) -> dict:
    """The operator tests' query without a restart policy, changed."""
    return query_spec(RATE_TO_CONSOLE, {"restartPolicy": None}, **changes)


INVALID = [
    ("two sources", spec_with(source={"rate": {}, "kafka": KAFKA}),
     'spec.source: Invalid value: "object": set exactly one of: kafka, rate'),
    ("no source kind", spec_with(source={}),
     'spec.source: Invalid value: "object": set exactly one of: kafka, rate'),
    ("two sinks", spec_with(sink={"console": {}, "memory": {"table": "t"}}),
     "set exactly one of: kafka, console, memory"),
    ("two triggers", spec_with(trigger={"continuous": {}, "microBatch": {}}),
     "set exactly one of: continuous, realTime, microBatch, availableNow"),
    ("transform with two steps", spec_with(transforms=[{"where": "x > 1", "drop": ["col"]}]),
     'spec.transforms[0]: Invalid value: "object": set exactly one of: where, select, withColumn, drop, sql'),
    ("missing trigger", spec_with(trigger=None),
     "spec.trigger: Required value"),
    ("missing checkpoint location", spec_with(checkpoint={}),
     "spec.checkpoint.location: Required value"),
    ("real-time mode reads kafka only", spec_with(trigger={"realTime": {}}, outputMode="update"),
     "spec.source: Invalid value: \"object\": realTime mode cannot read from a rate source (allowed: kafka)"),
    ("continuous mode appends only", spec_with(outputMode="update"),
     "spec.outputMode: Invalid value: \"object\": continuous mode supports only append output, not update"),
    ("real-time mode updates only",
     spec_with(source={"kafka": KAFKA}, trigger={"realTime": {"batchDuration": "5s"}}, outputMode="append"),
     "realTime mode supports only update output, not append"),
    ("continuous mode needs a free slot", spec_with(**{"source.rate.numPartitions": 4, "runtime.parallelism": 4}),
     "spec.runtime.parallelism: Invalid value: \"object\": continuous mode needs more task slots than source partitions"),
    ("continuous mode counts executor slots",
     spec_with(**{"source.rate.numPartitions": 4, "runtime.executors": {"instances": 2, "cores": 2}}),
     "continuous mode needs more task slots than source partitions"),
    ("backoff initial above max", spec_with(restartPolicy={"backoff": {"initial": "10m", "max": "1m"}}),
     "spec.restartPolicy.backoff: Invalid value: \"object\": initial is longer than max"),
    ("backoff initial above the default max", spec_with(restartPolicy={"backoff": {"initial": "1h"}}),
     "initial is longer than max"),
    ("zero checkpoint interval", spec_with(trigger={"continuous": {"checkpointInterval": "0s"}}),
     "spec.trigger.continuous.checkpointInterval: Invalid value: \"object\": checkpointInterval must be longer than 0"),
    ("duration without a unit", spec_with(trigger={"continuous": {"checkpointInterval": "5 seconds"}}),
     "spec.trigger.continuous.checkpointInterval: Invalid value: \"5 seconds\": spec.trigger.continuous.checkpointInterval in body should match '^[0-9]+(ms|s|m|h)$'"),
    ("topics and pattern", spec_with(source={"kafka": {**KAFKA, "pattern": "pay.*"}}),
     'spec.source.kafka: Invalid value: "object": set exactly one of: topics, pattern'),
    ("empty topic list", spec_with(source={"kafka": {"bootstrapServers": "kafka:9092", "topics": []}}),
     "spec.source.kafka.topics: Invalid value: 0: spec.source.kafka.topics in body should have at least 1 items"),
    ("bootstrap servers without a port", spec_with(source={"kafka": {"bootstrapServers": "kafka", "topics": ["t"]}}),
     "spec.source.kafka.bootstrapServers in body should match"),
    ("stall after zero intervals", spec_with(health={"stallAfterIntervals": 0}),
     "spec.health.stallAfterIntervals: Invalid value: 0: spec.health.stallAfterIntervals in body should be greater than or equal to 1"),
    ("unknown stall action", spec_with(health={"onStall": "panic"}),
     'spec.health.onStall: Unsupported value: "panic": supported values: "restart", "report"'),
    ("parallelism zero", spec_with(**{"runtime.parallelism": 0}),
     "spec.runtime.parallelism: Invalid value: 0: spec.runtime.parallelism in body should be greater than or equal to 1"),
    ("unknown backend", spec_with(**{"runtime.backend": "yarn"}),
     'spec.runtime.backend: Unsupported value: "yarn": supported values: "pod", "sparkApplication"'),
    ("unknown output mode", spec_with(outputMode="sideways"),
     'spec.outputMode: Unsupported value: "sideways"'),
    ("unknown field", spec_with(sourse={"rate": {}}),
     'unknown field "spec.sourse"'),
    ("maxRestarts below -1", spec_with(restartPolicy={"maxRestarts": -2}),
     "spec.restartPolicy.maxRestarts in body should be greater than or equal to -1"),
    ("memory that is not a quantity", spec_with(**{"runtime.driver": {"memory": "lots"}}),
     "spec.runtime.driver.memory in body should match"),
    ("too many transforms", spec_with(transforms=[{"where": "value > 0"}] * 65),
     "spec.transforms: Too many: 65: must have at most 64 items"),
    ("standby on a checkpoint only one pod reaches", spec_with(**{"runtime.standby": True, "checkpoint": {"location": "/ck"}}),
     "spec.checkpoint: Invalid value: \"object\": the standby driver must reach the same checkpoint"),
    ("standby with the SparkApplication backend", spec_with(**{"runtime": {"standby": True, "backend": "sparkApplication"},
                                                               "checkpoint": {"location": "s3a://bucket/ck"}}),
     "spec.runtime.standby: Invalid value: \"object\": a standby driver needs backend pod"),
    ("an s3 block on a local path", spec_with(checkpoint={"location": "/ck", "s3": {"region": "us-east-1"}}),
     "spec.checkpoint.s3: Invalid value: \"object\": checkpoint.s3 applies to an s3a://bucket/path location only"),
    ("a Secret key outside Kubernetes' syntax", spec_with(checkpoint={"location": "s3a://bucket/ck", "s3": {
        "credentials": {"secretRef": {"name": "store", "accessKeyIdKey": "a/b"}}}}),
     "spec.checkpoint.s3.credentials.secretRef.accessKeyIdKey in body should match"),
    ("resizing an availableNow query", spec_with(trigger={"availableNow": {}}, **{"runtime.executors": {"instances": 1},
        "autoscaling": {"maxExecutors": 2, "recommendOnly": False}}),
     "spec.autoscaling.recommendOnly: Invalid value: \"object\": recommendOnly: false acts for queries of backend pod"),
    ("resizing a SparkApplication's executors", spec_with(trigger={"microBatch": {}}, **{
        "runtime": {"backend": "sparkApplication", "executors": {"instances": 1}},
        "autoscaling": {"maxExecutors": 2, "recommendOnly": False}}),
     "spec.autoscaling.recommendOnly: Invalid value: \"object\": recommendOnly: false acts for queries of backend pod"),
    ("the driver writer with two producers", spec_with(trigger={"microBatch": {}}, sink={"kafka": {
        "bootstrapServers": "kafka:9092", "topic": "out", "delivery": "exactlyOnce",
        "transactions": {"writer": "driver", "producers": 2}}}),
     "spec.sink.kafka.transactions.producers: Invalid value: \"object\": writer driver writes each batch with the driver's one producer"),
    ("an executor CPU limit under its request", spec_with(**{"runtime.executors": {"instances": 1, "coreRequest": "600m",
                                                                                  "coreLimit": "500m"}}),
     "spec.runtime.executors.coreLimit: Invalid value: \"object\": coreLimit is below the executor's CPU request"),
    ("an executor CPU limit under its cores", spec_with(**{"runtime.executors": {"instances": 1, "cores": 2, "coreLimit": "1"}}),
     "spec.runtime.executors.coreLimit: Invalid value: \"object\": coreLimit is below the executor's CPU request"),
    ("store keys by value", spec_with(checkpoint={"location": "s3a://bucket/ck", "s3": {
        "credentials": {"accessKeyId": "AKIA", "secretAccessKey": "x"}}}),
     'unknown field "spec.checkpoint.s3.credentials.accessKeyId"'),
]  # fmt: skip


@pytest.mark.parametrize(("case", "spec", "message"), INVALID, ids=[c[0] for c in INVALID])
def test_the_api_server_refuses_with_kubectls_message(cluster, case, spec, message):
    result = cluster.apply("bad", spec, check=False)
    assert result.returncode != 0, f"{case}: accepted\n{result.stdout}"
    assert message in result.stderr, result.stderr
    assert cluster.get("bad") is None
    with pytest.raises(SpecError):
        validate_spec(spec)  # the model refuses it too


VALID = [
    ("the base", spec_with()),
    ("maxRestarts -1 means unlimited", spec_with(restartPolicy={"maxRestarts": -1})),
    ("kafka to kafka in real-time mode", spec_with(
        source={"kafka": KAFKA}, sink={"kafka": {"bootstrapServers": "a:1,b:2", "topic": "out"}},
        trigger={"realTime": {"batchDuration": "5s"}}, outputMode="update")),
    ("available now with a pattern", spec_with(
        source={"kafka": {"bootstrapServers": "kafka:9092", "pattern": "pay.*"}}, trigger={"availableNow": {}})),
    ("executors give the slots", spec_with(**{"source.rate.numPartitions": 4, "runtime.parallelism": 1,
                                             "runtime.executors": {"instances": 5}})),
    ("unset parallelism is sized for the partitions", spec_with(**{"source.rate.numPartitions": 8, "runtime": {}})),
    ("standby on a claim", spec_with(**{"runtime.standby": True,
                                        "checkpoint.volume": {"persistentVolumeClaim": {"claimName": "streamq-ck"}}})),
    ("standby on an object store", spec_with(**{"runtime.standby": True, "checkpoint": {"location": "s3a://bucket/ck"}})),
    ("an s3a checkpoint with its store and Secret", spec_with(checkpoint={"location": "s3a://bucket/ck", "s3": {
        "endpoint": "http://seaweedfs.storage:8333", "region": "us-east-1", "pathStyleAccess": True,
        "credentials": {"secretRef": {"name": "store", "accessKeyIdKey": "AWS_ACCESS_KEY_ID", "secretAccessKeyKey": "key"}}}})),
    ("resizing a micro-batch query", spec_with(trigger={"microBatch": {}}, **{"runtime.executors": {"instances": 1},
        "autoscaling": {"maxExecutors": 2, "recommendOnly": False}})),
    ("resizing a continuous query by a new driver", spec_with(**{"runtime.executors": {"instances": 1, "cores": 2},
        "autoscaling": {"maxExecutors": 2, "recommendOnly": False}})),
    ("exactly once written by the driver", spec_with(trigger={"microBatch": {}}, sink={"kafka": {
        "bootstrapServers": "kafka:9092", "topic": "out", "delivery": "exactlyOnce",
        "transactions": {"writer": "driver"}}})),  # producers defaults to 1
    ("small executors with a CPU limit", spec_with(**{"runtime.executors": {"instances": 2, "coreRequest": "300m",
                                                                        "coreLimit": "300m"}})),
    ("a CPU limit above whole cores", spec_with(**{"runtime.executors": {"instances": 1, "cores": 2, "coreLimit": "2500m"}})),
    ("stall detection settings", spec_with(health={"stallAfterIntervals": 3, "minStallTime": "20s", "onStall": "report"})),
    ("every transform kind", spec_with(transforms=[
        {"where": "value > 0"}, {"select": ["value", "timestamp"]}, {"withColumn": {"name": "v2", "expr": "value * 2"}},
        {"drop": ["timestamp"]}, {"sql": "SELECT * FROM input"}])),
]  # fmt: skip


@pytest.mark.parametrize(("case", "spec"), VALID, ids=[c[0] for c in VALID])
def test_valid_specs_are_accepted_and_stored_as_given(cluster, case, spec):
    validate_spec(spec)  # the model accepts it
    name = f"ok-{VALID.index((case, spec))}"
    cluster.custom.create_namespaced_custom_object(
        "streamq.io", "v1alpha1", cluster.namespace, "streamingqueries", resource(spec, name, cluster.namespace)
    )
    assert cluster.get(name)["spec"] == spec  # nothing pruned, nothing defaulted


def test_kubectl_apply_keeps_unlimited_max_restarts(cluster):
    """Unlimited is -1, not null: kubectl apply reads null as "remove this field"."""
    cluster.apply("unlimited", spec_with(restartPolicy={"maxRestarts": -1}))
    assert cluster.get("unlimited")["spec"]["restartPolicy"] == {"maxRestarts": -1}


@pytest.mark.parametrize("field", ["spec.trigger", "spec.source.kafka.bootstrapServers", "spec.transforms.sql",
                                   "spec.restartPolicy.backoff.initial", "status.phase"])  # fmt: skip
def test_kubectl_explain_prints_each_fields_description(kube_apiserver, streamq_installed, field):
    """What tests/unit/controller/test_crd_descriptions.py demands of the schema reaches the user."""
    import time

    from controller.crd import render_crd

    node = render_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for name in field.split("."):
        node = node["properties"][name]
        node = node.get("items", node)
    expected = " ".join(node["description"].split())
    deadline = time.monotonic() + 30  # the API server publishes a new CRD's OpenAPI a moment after it is Established
    while True:
        shown = kube_apiserver.kubectl("explain", f"sq.{field}", check=False)
        if expected in " ".join(shown.stdout.split()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)  # the poll interval of this wait (kubectl explain has no watch)
    assert expected in " ".join(shown.stdout.split()), f"kubectl explain sq.{field}:\n{shown.stdout}{shown.stderr}"
