"""What the operator creates for a driver attempt, field by field."""

from __future__ import annotations

import base64
import json

import pytest

from contract import LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_QUERY, SECRETS_MOUNT_DIR
from contract.load import load_document, validate_spec
from contract.names import MAX_QUERY_NAME, query_name_problem
from controller import names, render
from controller.config import Settings
from controller.run import Run, spec_hash
from tests.unit.controller.world import base_spec

pytestmark = pytest.mark.unit

SETTINGS = Settings(job_image="streamq:9.9.9", spark_version="4.3.0")


def make_run(spec: dict | None = None, attempt: int = 3, location: str | None = None) -> Run:
    parsed = validate_spec(spec or base_spec())
    return Run(query="payments", namespace="team-a", attempt=attempt, spec=parsed,
                      checkpoint_location=location or parsed.checkpoint.location)  # fmt: skip


def test_driver_pod_exact_fields():
    run = make_run(base_spec(**{"runtime.driver": {"cores": 2, "memory": "2Gi"}}))
    pod = render.driver_pod(run, SETTINGS)
    assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod"
    meta = pod["metadata"]
    assert meta["name"] == "payments-driver-3" and meta["namespace"] == "team-a"
    assert meta["labels"] == {
        LABEL_QUERY: "payments",
        LABEL_COMPONENT: "driver",
        LABEL_MANAGED_BY: "streamq",
        names.LABEL_ATTEMPT: "3",
    }
    assert meta["annotations"][names.ANNOTATION_SPEC_HASH] == spec_hash(run.spec, "/checkpoints/q")
    assert meta["annotations"][names.ANNOTATION_CHECKPOINT] == "/checkpoints/q"
    assert meta["annotations"][names.ANNOTATION_RESTART_NONCE] == ""  # recorded even when unset
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["terminationGracePeriodSeconds"] == 60
    assert spec["enableServiceLinks"] is False
    # its checkpoint is the pod's own, so no warm upgrades and no Lease: no token
    assert spec["automountServiceAccountToken"] is False and "serviceAccountName" not in spec
    assert spec["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }  # fmt: skip
    (c,) = spec["containers"]
    assert c["name"] == "driver" and c["image"] == "streamq:9.9.9" and c["imagePullPolicy"] == "IfNotPresent"
    assert c["args"] == ["job", "/etc/streamq/query.json"] and "command" not in c
    assert c["resources"] == {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"memory": "2Gi"}}
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "privileged": False,
                                    "readOnlyRootFilesystem": True}  # fmt: skip
    assert c["terminationMessagePath"] == "/dev/termination-log"
    assert c["terminationMessagePolicy"] == "File"  # never the log tail
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["STREAMQ_PROGRESS_FILE"] == "/tmp/streamq/progress.json"
    assert env["STREAMQ_SECRETS_DIR"] == SECRETS_MOUNT_DIR
    assert "STREAMQ_LEASE" not in env
    # Ready = warm or running (app.driver.ready): what a warm upgrade waits for before it stops the old driver
    assert env["STREAMQ_READY_FILE"] == "/tmp/streamq/ready"
    assert c["readinessProbe"]["exec"]["command"] == ["test", "-e", "/tmp/streamq/ready"]
    # the progress channel (app.monitoring.endpoint): the port by name, the job told which
    assert c["ports"] == [{"name": "progress", "containerPort": 8090}] and env["STREAMQ_PROGRESS_PORT"] == "8090"
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["query"] == {"name": "query", "mountPath": "/etc/streamq", "readOnly": True}
    assert {v["name"]: v for v in spec["volumes"]}["query"] == {"name": "query", "configMap": {"name": "payments-query"}}


def test_image_from_the_spec_wins_over_the_operator_default():
    run = make_run(base_spec(**{"runtime.image": "registry.local/streamq:custom"}))
    assert render.driver_pod(run, SETTINGS)["spec"]["containers"][0]["image"] == "registry.local/streamq:custom"


@pytest.mark.parametrize(
    ("volume", "expected"),
    [
        ({"persistentVolumeClaim": {"claimName": "cp"}}, {"persistentVolumeClaim": {"claimName": "cp"}}),
        ({"hostPath": "/data/cp"}, {"hostPath": {"path": "/data/cp", "type": "DirectoryOrCreate"}}),
        ({"emptyDir": {"sizeLimit": "1Gi"}}, {"emptyDir": {"sizeLimit": "1Gi"}}),
    ],
)
def test_the_checkpoint_volume_is_mounted_at_the_locations_parent(volume, expected):
    run = make_run(base_spec(**{"checkpoint.volume": volume, "checkpoint.location": "/checkpoints/payments"}))
    pod = render.driver_pod(run, SETTINGS)
    vol = {v["name"]: v for v in pod["spec"]["volumes"]}["checkpoint"]
    assert {k: v for k, v in vol.items() if k != "name"} == expected
    mounts = {m["name"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["checkpoint"] == {"name": "checkpoint", "mountPath": "/checkpoints"}


@pytest.mark.parametrize(
    ("location", "mount"),
    [
        ("/checkpoints/q", "/checkpoints"),
        ("/checkpoints/q/", "/checkpoints"),
        ("file:///data/cp/q", "/data/cp"),
        ("/q", "/q"),
        ("s3a://bucket/q", None),
    ],
)
def test_checkpoint_mount_path(location, mount):
    assert render.checkpoint_mount_path(location) == mount


def test_kafka_auth_secrets_are_mounted_read_only_by_name():
    auth = {"secretRef": {"name": "kafka-creds"}}
    spec = base_spec(**{"source.kafka.auth": auth, "sink.kafka.auth": {"secretRef": {"name": "sink-creds"}}})
    pod = render.driver_pod(make_run(spec), SETTINGS)
    mounts = {m["mountPath"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert mounts[f"{SECRETS_MOUNT_DIR}/kafka-creds"]["readOnly"] is True
    assert mounts[f"{SECRETS_MOUNT_DIR}/sink-creds"]["readOnly"] is True
    secrets = [v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v]
    assert secrets == ["kafka-creds", "sink-creds"]


def test_the_same_secret_is_mounted_once():
    auth = {"secretRef": {"name": "kafka-creds"}}
    pod = render.driver_pod(make_run(base_spec(**{"source.kafka.auth": auth, "sink.kafka.auth": auth})), SETTINGS)
    assert [v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v] == ["kafka-creds"]


def test_config_map_holds_a_document_the_job_accepts():
    run = make_run(base_spec(suspend=False), location="/checkpoints/q-reset-1")
    cm = render.config_map(run, SETTINGS)
    assert cm["metadata"]["name"] == "payments-query"
    assert cm["metadata"]["labels"][LABEL_COMPONENT] == "query-config"
    doc = json.loads(cm["data"]["query.json"])
    assert doc["apiVersion"] == "streamq.io/v1alpha1" and doc["kind"] == "StreamingQuery"
    assert doc["metadata"] == {"name": "payments", "namespace": "team-a"}
    assert doc["spec"]["checkpoint"]["location"] == "/checkpoints/q-reset-1"
    assert "suspend" not in doc["spec"]
    loaded = load_document(doc)  # the job's own loader: the document is valid for it
    assert loaded.name == "payments" and loaded.spec.checkpoint.location == "/checkpoints/q-reset-1"
    assert loaded.spec.runtime.spark_conf["spark.driver.memory"] == "614m"


def test_without_executors_spark_runs_local_in_the_driver():
    run = make_run()
    doc = render.query_document(run, SETTINGS)
    assert set(doc["spec"]["runtime"]["sparkConf"]) == {"spark.driver.memory"}
    assert render.driver_service(run) is None
    assert [c["kind"] for c in render.children(run, SETTINGS)] == ["ConfigMap", "Pod"]


def test_with_executors_the_driver_gets_a_headless_service_and_kubernetes_conf():
    spec = base_spec(**{
        "runtime.executors": {"instances": 2, "cores": 2, "memory": "2Gi"},
        "runtime.sparkConf": {"spark.executor.memory": "3g"},
        "checkpoint.volume": {"persistentVolumeClaim": {"claimName": "cp"}},
    })  # fmt: skip
    run = make_run(spec)
    conf = render.query_document(run, SETTINGS)["spec"]["runtime"]["sparkConf"]
    assert conf["spark.master"] == "k8s://https://kubernetes.default.svc:443"
    assert conf["spark.submit.deployMode"] == "client"
    assert conf["spark.kubernetes.driver.pod.name"] == "payments-driver-3"
    assert conf["spark.kubernetes.executor.podNamePrefix"] == "payments-3"
    assert conf["spark.driver.host"] == "payments-driver-svc.team-a.svc"
    assert conf["spark.driver.port"] == "7078" and conf["spark.driver.blockManager.port"] == "7079"
    assert conf["spark.driver.bindAddress"] == "0.0.0.0"
    assert conf["spark.kubernetes.executor.useDriverPodIP"] == "false"  # else executors dial 0.0.0.0
    assert conf["spark.executor.instances"] == "2" and conf["spark.executor.cores"] == "2"
    assert conf["spark.executor.memory"] == "3g"  # the user's sparkConf wins
    assert conf["spark.kubernetes.namespace"] == "team-a"
    assert conf["spark.kubernetes.container.image"] == "streamq:9.9.9"
    assert conf[f"spark.kubernetes.executor.label.{LABEL_COMPONENT}"] == "executor"
    assert conf["spark.kubernetes.executor.volumes.persistentVolumeClaim.checkpoint.mount.path"] == "/checkpoints"
    assert conf["spark.kubernetes.executor.volumes.persistentVolumeClaim.checkpoint.options.claimName"] == "cp"

    svc = render.driver_service(run)
    assert svc["metadata"]["name"] == "payments-driver-svc"
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == names.labels("payments", "driver")
    assert [p["port"] for p in svc["spec"]["ports"]] == [7078, 7079]

    pod = render.driver_pod(run, SETTINGS)
    assert pod["spec"]["serviceAccountName"] == "streamq-driver"
    assert "automountServiceAccountToken" not in pod["spec"]
    assert [p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]] == [8090, 7078, 7079]
    assert [c["kind"] for c in render.children(run, SETTINGS)] == [
        "ConfigMap",
        "Secret",
        "Service",
        "Pod",
    ]  # executors: no warm upgrades, no Lease


def test_a_service_account_from_the_spec_is_used():
    pod = render.driver_pod(make_run(base_spec(**{"runtime.serviceAccountName": "payments-sa"})), SETTINGS)
    assert pod["spec"]["serviceAccountName"] == "payments-sa"


def test_spark_application_exact_fields():
    spec = base_spec(**{
        "runtime.backend": "sparkApplication",
        "runtime.executors": {"instances": 2, "cores": 1, "memory": "1Gi"},
        "runtime.driver": {"cores": 1, "memory": "1536Mi"},
        "checkpoint.volume": {"persistentVolumeClaim": {"claimName": "cp"}},
    })  # fmt: skip
    run = make_run(spec)
    app = render.spark_application(run, SETTINGS)
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2" and app["kind"] == "SparkApplication"
    assert app["metadata"]["name"] == "payments-driver-3"
    assert app["metadata"]["labels"][names.LABEL_ATTEMPT] == "3"
    s = app["spec"]
    assert (s["type"], s["mode"], s["pythonVersion"], s["sparkVersion"]) == ("Python", "cluster", "3", "4.3.0")
    assert s["image"] == "streamq:9.9.9"
    assert s["mainApplicationFile"] == "local:///opt/streamq/app/__main__.py"
    assert s["arguments"] == ["/etc/streamq/query.json"]
    assert s["restartPolicy"] == {"type": "Never"}
    assert s["driver"]["cores"] == 1 and s["driver"]["memory"] == "1536m"
    assert s["driver"]["labels"] == names.labels("payments", "driver", 3)
    assert s["driver"]["serviceAccount"] == "streamq-driver"
    assert s["driver"]["podSecurityContext"]["runAsNonRoot"] is True
    assert s["executor"]["instances"] == 2 and s["executor"]["memory"] == "1024m"
    assert s["executor"]["volumeMounts"] == [{"name": "checkpoint", "mountPath": "/checkpoints"}]
    assert {v["name"] for v in s["volumes"]} == {"query", "tmp", "checkpoint"}
    assert [c["kind"] for c in render.children(run, SETTINGS)] == ["ConfigMap", "SparkApplication"]
    conf = render.query_document(run, SETTINGS)["spec"]["runtime"]["sparkConf"]
    assert conf["spark.master"] == "k8s://https://kubernetes.default.svc:443"
    assert "spark.driver.host" not in conf and "spark.driver.memory" not in conf  # spark-operator's job


def test_core_request_lowers_what_pods_ask_the_scheduler_for_not_the_task_slots():
    resources = {"runtime.driver": {"cores": 1, "coreRequest": "250m"},
                 "runtime.executors": {"instances": 2, "cores": 2, "coreRequest": "500m"}}  # fmt: skip
    run = make_run(base_spec(**resources))
    (c,) = render.driver_pod(run, SETTINGS)["spec"]["containers"]
    assert c["resources"]["requests"]["cpu"] == "250m"
    conf = render.executor_conf(run, SETTINGS)
    assert conf["spark.kubernetes.executor.request.cores"] == "500m" and conf["spark.executor.cores"] == "2"
    app = render.spark_application(make_run(base_spec(**resources, **{"runtime.backend": "sparkApplication"})), SETTINGS)
    assert (app["spec"]["driver"]["coreRequest"], app["spec"]["driver"]["cores"]) == ("250m", 1)
    assert (app["spec"]["executor"]["coreRequest"], app["spec"]["executor"]["cores"]) == ("500m", 2)


def test_without_core_request_pods_ask_for_whole_cores():
    run = make_run(base_spec(**{"runtime.executors": {"instances": 1, "cores": 3}}))
    assert "spark.kubernetes.executor.request.cores" not in render.executor_conf(run, SETTINGS)
    app = render.spark_application(make_run(base_spec(**{"runtime.backend": "sparkApplication"})), SETTINGS)
    assert "coreRequest" not in app["spec"]["driver"] and "coreRequest" not in app["spec"]["executor"]


def test_core_limit_caps_each_executor_pod_and_none_by_default():
    limited = {"runtime.executors": {"instances": 2, "cores": 1, "coreRequest": "300m", "coreLimit": "500m"}}
    assert render.executor_conf(make_run(base_spec(**limited)), SETTINGS)["spark.kubernetes.executor.limit.cores"] == "500m"
    app = render.spark_application(make_run(base_spec(**limited, **{"runtime.backend": "sparkApplication"})), SETTINGS)
    assert app["spec"]["executor"]["coreLimit"] == "500m"
    unlimited = make_run(base_spec(**{"runtime.executors": {"instances": 2}}))
    assert "spark.kubernetes.executor.limit.cores" not in render.executor_conf(unlimited, SETTINGS)


def test_spark_application_without_executors_has_no_instances():
    app = render.spark_application(make_run(base_spec(**{"runtime.backend": "sparkApplication"})), SETTINGS)
    assert "instances" not in app["spec"]["executor"]


@pytest.mark.parametrize(("quantity", "mib"), [("1Gi", 1024), ("512Mi", 512), ("1G", 954), ("1.5Gi", 1536), ("100", 1)])
def test_memory_quantities_in_mebibytes(quantity, mib):
    assert render.mebibytes(quantity) == mib


def test_spec_hash_ignores_suspend_and_restart_policy_but_not_the_nonce_or_checkpoint():
    a = validate_spec(base_spec())
    same = [
        validate_spec(base_spec(suspend=True)),
        validate_spec(base_spec(**{"restartPolicy.maxRestarts": 99})),
    ]
    different = [validate_spec(base_spec(restartNonce="1")), validate_spec(base_spec(**{"runtime.parallelism": 8}))]
    h = spec_hash(a, "/c")
    assert all(spec_hash(s, "/c") == h for s in same)
    assert all(spec_hash(s, "/c") != h for s in different)
    assert spec_hash(a, "/other") != h


# --- names ---------------------------------------------------------------------------------


def test_child_names_are_the_query_name_and_a_suffix():
    assert names.driver_name("payments", 7) == "payments-driver-7"
    assert names.config_map_name("payments") == "payments-query"
    assert names.driver_service_name("payments") == "payments-driver-svc"
    longest = "a" * MAX_QUERY_NAME
    assert len(names.driver_name(longest, 999_999)) <= 63
    assert len(names.executor_prefix(longest, 999_999)) <= 47  # Spark's limit on the executor pod name prefix


@pytest.mark.parametrize(
    "name", ["fraud.filter", "7eleven", "Payments", "a" * (MAX_QUERY_NAME + 1), "ends-", "a_b", "fraud\n", "", "a..b"]
)
def test_names_that_would_make_ambiguous_or_invalid_children_are_refused(name):
    assert query_name_problem(name) is not None


@pytest.mark.parametrize("name", ["payments", "fraud-filter", "a", "q1", "a" * MAX_QUERY_NAME])
def test_dns_labels_name_queries(name):
    assert query_name_problem(name) is None


def test_query_label_fits_a_label_value():
    assert names.query_label("payments") == "payments"
    long = "b" * 100
    assert len(names.query_label(long)) <= 63 and names.query_label(long) == names.query_label(long)
    assert names.selector("payments") == f"{LABEL_QUERY}=payments,{LABEL_COMPONENT}=driver,{LABEL_MANAGED_BY}=streamq"


def test_offsets_for_a_lost_checkpoint_ride_on_the_document_not_the_spec_hash():
    from contract import RESUME_ANNOTATION
    from contract.resume import ResumeFrom

    plain = make_run()
    resume = ResumeFrom('{"payments":{"0":40}}', batch_id=4, checkpoint="/checkpoints/q")
    with_resume = Run(**{**plain.__dict__, "resume": resume})
    doc = render.query_document(with_resume, SETTINGS)
    assert json.loads(doc["metadata"]["annotations"][RESUME_ANNOTATION]) == {
        "startingOffsets": '{"payments":{"0":40}}',
        "batchId": 4,
        "checkpoint": "/checkpoints/q",
    }
    loaded = load_document(doc)
    assert ResumeFrom.from_annotation(loaded.annotations[RESUME_ANNOTATION]) == resume
    assert "annotations" not in render.query_document(plain, SETTINGS)["metadata"]
    assert spec_hash(plain.spec, plain.checkpoint_location) == spec_hash(with_resume.spec, with_resume.checkpoint_location)


def test_executors_start_from_a_restricted_read_only_template():
    run = make_run(base_spec(**{"runtime.executors": {"instances": 2}}))
    data = render.config_map(run, SETTINGS)["data"]
    template = json.loads(data[render.EXECUTOR_TEMPLATE_FILE])
    conf = render.query_document(run, SETTINGS)["spec"]["runtime"]["sparkConf"]
    assert conf["spark.kubernetes.executor.podTemplateFile"] == f"/etc/streamq/{render.EXECUTOR_TEMPLATE_FILE}"
    assert conf["spark.kubernetes.executor.podTemplateContainerName"] == template["spec"]["containers"][0]["name"]
    pod, container = template["spec"]["securityContext"], template["spec"]["containers"][0]["securityContext"]
    assert pod["runAsNonRoot"] and pod["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["readOnlyRootFilesystem"] and container["capabilities"] == {"drop": ["ALL"]}
    assert not container["allowPrivilegeEscalation"]
    assert template["spec"]["containers"][0]["workingDir"] == "/tmp"  # writable: executors fetch jars into "."
    assert render.EXECUTOR_TEMPLATE_FILE not in render.config_map(make_run(), SETTINGS)["data"]  # no executors, no template


def test_driver_and_executors_authenticate_and_encrypt_with_the_querys_own_secret():
    run = make_run(base_spec(**{"runtime.executors": {"instances": 2}}))
    conf = render.query_document(run, SETTINGS)["spec"]["runtime"]["sparkConf"]
    assert conf["spark.authenticate"] == "true" and conf["spark.network.crypto.enabled"] == "true"
    assert conf["spark.io.encryption.enabled"] == "true"
    assert "spark.authenticate.secret" not in conf  # never the value
    # the driver reads the key file; the executor file setting keeps Spark from putting its own
    # key into the executors' env by value; they get the driver's key by reference instead
    assert (
        conf["spark.authenticate.secret.driver.file"]
        == conf["spark.authenticate.secret.executor.file"]
        == render.AUTH_SECRET_FILE
    )
    assert (
        conf["spark.kubernetes.executor.secretKeyRef._SPARK_AUTH_SECRET"]
        == f"payments-spark-auth:{render.AUTH_SECRET_BASE64_KEY}"
    )

    secret = render.auth_secret(run, key=b"k" * 32)
    assert secret["metadata"]["name"] == "payments-spark-auth" and secret["metadata"]["namespace"] == "team-a"
    assert secret["immutable"] is True
    file_bytes = base64.b64decode(secret["data"][render.AUTH_SECRET_KEY])
    executor_env = base64.b64decode(secret["data"][render.AUTH_SECRET_BASE64_KEY]).decode()
    assert file_bytes == b"k" * 32
    assert executor_env == base64.b64encode(file_bytes).decode()  # Spark's key from the driver's file: the same
    a, b = render.auth_secret(run), render.auth_secret(run)
    assert a["data"] != b["data"] and len(base64.b64decode(a["data"][render.AUTH_SECRET_KEY])) == 32  # random each time made
    kinds = [c["kind"] for c in render.children(run, SETTINGS)]
    assert kinds.index("Secret") < kinds.index("Pod")  # the driver mounts it

    driver = render.driver_pod(run, SETTINGS)["spec"]
    (volume,) = [v for v in driver["volumes"] if "secret" in v and v["secret"]["secretName"] == "payments-spark-auth"]
    assert volume["secret"]["items"] == [{"key": render.AUTH_SECRET_KEY, "path": render.AUTH_SECRET_KEY}]
    (mount,) = [m for m in driver["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    assert mount == {"name": volume["name"], "mountPath": render.AUTH_MOUNT_DIR, "readOnly": True}
    assert render.AUTH_SECRET_FILE == f"{mount['mountPath']}/{render.AUTH_SECRET_KEY}"
    # the values are only in the Secret: not in the ConfigMap, the pods or the conf
    rendered = json.dumps([c for c in render.children(run, SETTINGS) if c["kind"] != "Secret"])
    for value in (*secret["data"].values(), executor_env):
        assert value not in rendered


def test_no_auth_secret_without_executors_or_with_spark_operator():
    local = make_run()
    assert (
        render.auth_secret(local) is None
        and "spark.authenticate" not in render.query_document(local, SETTINGS)["spec"]["runtime"]["sparkConf"]
    )
    assert "Secret" not in [c["kind"] for c in render.children(local, SETTINGS)]
    spark_app = make_run(base_spec(**{"runtime.executors": {"instances": 2}, "runtime.backend": "sparkApplication"}))
    assert render.auth_secret(spark_app) is None


def _env(pod: dict) -> dict:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}


def test_a_micro_batch_driver_with_executors_reads_its_executors_from_its_own_annotation():
    """autoscaling.recommendOnly false resizes it in place (app.driver.resize): the operator writes the pod's
    annotation, the downward API shows it to the driver. Rendered whatever spec.autoscaling says, so turning
    recommendOnly off needs no new driver."""
    from contract import EXECUTORS_ANNOTATION, EXECUTORS_FILE_ENV, EXECUTORS_MOUNT_DIR

    pod = render.driver_pod(make_run(base_spec(mode="microBatch", **{"runtime.executors": {"instances": 3}})), SETTINGS)
    assert pod["metadata"]["annotations"][EXECUTORS_ANNOTATION] == "3"
    volume = next(v for v in pod["spec"]["volumes"] if "downwardAPI" in v)
    assert volume["downwardAPI"]["items"] == [
        {"path": "executors", "fieldRef": {"fieldPath": f"metadata.annotations['{EXECUTORS_ANNOTATION}']"}}
    ]
    mount = next(m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == volume["name"])
    assert mount == {"name": volume["name"], "mountPath": EXECUTORS_MOUNT_DIR, "readOnly": True}
    assert _env(pod)[EXECUTORS_FILE_ENV] == f"{EXECUTORS_MOUNT_DIR}/executors"


@pytest.mark.parametrize(
    "changes",
    [
        {"mode": "microBatch"},  # no executors: Spark runs in the driver
        {"runtime.executors": {"instances": 2, "cores": 2}},  # continuous: tasks are fixed at start
    ],
)
def test_drivers_that_cannot_resize_in_place_get_no_executors_file(changes):
    from contract import EXECUTORS_ANNOTATION, EXECUTORS_FILE_ENV

    pod = render.driver_pod(make_run(base_spec(**changes)), SETTINGS)
    assert EXECUTORS_ANNOTATION not in pod["metadata"]["annotations"]
    assert not any("downwardAPI" in v for v in pod["spec"]["volumes"])
    assert EXECUTORS_FILE_ENV not in _env(pod)
