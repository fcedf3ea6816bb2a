"""Kafka over TLS (source/sink.kafka.tls): a CA and a client certificate from Secrets, mounted as files
into driver and executors, handed to Kafka's clients as paths; the Secrets under the same policy as
the SASL credentials, and inline key material still refused."""

from __future__ import annotations

import pytest

from app.pipeline import credentials, kafka_checks
from app.pipeline.exactly_once import connection_config
from app.pipeline.plan import kafka_sink_options, kafka_source_options
from contract import SECRETS_MOUNT_DIR
from contract.credentials import credential_secret_problems, secret_names
from contract.load import validate_spec
from contract.policy import OperatorFacts, Policy
from contract.problems import SpecError
from controller import render
from controller.config import Settings
from controller.run import Run
from testbed.specs import EXACTLY_ONCE, query_spec

pytestmark = pytest.mark.unit

CA = {"caSecretRef": {"name": "streamq-kafka-ca"}}
MTLS = {**CA, "clientCertificate": {"name": "streamq-kafka-user", "certificateKey": "user.crt", "keyKey": "user.key"}}
FACTS = OperatorFacts(operator_namespace="streamq-system")
SETTINGS = Settings(job_image="streamq:9.9.9", spark_version="4.3.0")
CERT_PEM = "-----BEGIN CERTIFICATE-----\nMIIBcertificatebody\n-----END CERTIFICATE-----\n"
KEY_PEM = "-----BEGIN PRIVATE KEY-----\nMIIEprivatekeybody\n-----END PRIVATE KEY-----\n"


def tls_spec(tls=MTLS, *presets, **changes) -> dict:
    return query_spec(*presets, **{"source.kafka.tls": tls, "sink.kafka.tls": tls, **changes})


def problems(spec: dict, policy: Policy | None = None) -> list[str]:
    try:
        validate_spec(spec, policy=policy or Policy(), facts=FACTS, namespace="team-a")
    except SpecError as exc:
        return [str(p) for p in exc.problems]
    return []


@pytest.fixture
def mounted(tmp_path, monkeypatch):
    """The Secrets as the driver pod mounts them, under STREAMQ_SECRETS_DIR."""
    (tmp_path / "streamq-kafka-ca").mkdir()
    (tmp_path / "streamq-kafka-ca" / "ca.crt").write_text(CERT_PEM)
    (tmp_path / "streamq-kafka-user").mkdir()
    (tmp_path / "streamq-kafka-user" / "user.crt").write_text(CERT_PEM)
    (tmp_path / "streamq-kafka-user" / "user.key").write_text(KEY_PEM)
    monkeypatch.setenv("STREAMQ_SECRETS_DIR", str(tmp_path))
    return tmp_path


# --- the spec and the policy ----------------------------------------------------------------


def test_keys_default_to_cert_managers_names():
    spec = validate_spec(tls_spec({"caSecretRef": {"name": "ca"}, "clientCertificate": {"name": "user"}}))
    tls = spec.source.kafka.tls
    assert (tls.ca_secret_ref.key, tls.client_certificate.certificate_key, tls.client_certificate.key_key) == (
        "ca.crt",
        "tls.crt",
        "tls.key",
    )


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", None])  # None: the default, SASL_PLAINTEXT
def test_sasl_without_tls_beside_tls_is_refused_naming_the_field(protocol):
    auth = {"secretRef": {"name": "streamq-creds"}, **({"securityProtocol": protocol} if protocol else {})}
    found = problems(tls_spec(CA, **{"source.kafka.auth": auth}))
    assert any(p.startswith("spec.source.kafka.auth.securityProtocol: SASL_PLAINTEXT") and "use SASL_SSL" in p
               for p in found), found  # fmt: skip


def test_sasl_over_tls_with_the_private_ca_is_accepted():
    auth = {"secretRef": {"name": "streamq-creds"}, "securityProtocol": "SASL_SSL", "mechanism": "SCRAM-SHA-512"}
    assert problems(tls_spec(CA, **{"source.kafka.auth": auth, "sink.kafka.auth": auth})) == []


@pytest.mark.parametrize(("tls", "path"), [
    ({"caSecretRef": {"name": "db-admin"}}, "spec.source.kafka.tls.caSecretRef.name"),
    ({"clientCertificate": {"name": "db-admin"}}, "spec.source.kafka.tls.clientCertificate.name"),
])  # fmt: skip
def test_tls_secrets_are_bounded_by_allowed_secrets(tls, path):
    found = problems(query_spec(**{"source.kafka.tls": tls}))
    assert any(p.startswith(f"{path}: policy.allowedSecrets: Secret db-admin is not allowed") for p in found), found


def test_a_tls_secret_named_like_an_account_token_is_refused():
    found = problems(query_spec(**{"sink.kafka.tls": {"clientCertificate": {"name": "streamq-driver-token"}}}))
    assert any(p.startswith("spec.sink.kafka.tls.clientCertificate.name: policy.allowedSecrets") for p in found), found


@pytest.mark.parametrize("key", ["..", "../../kubernetes.io/serviceaccount/token", "a/b"])
def test_a_key_cannot_climb_out_of_its_secret(key):
    found = problems(query_spec(**{"source.kafka.tls": {"clientCertificate": {"name": "streamq-u", "keyKey": key}}}))
    assert any(p.startswith("spec.source.kafka.tls.clientCertificate.keyKey") for p in found), found


def test_the_operator_reads_tls_secrets_like_credentials_secrets():
    spec = validate_spec(tls_spec())
    assert secret_names(tls_spec()) == ("streamq-kafka-ca", "streamq-kafka-user")
    unmarked = {"type": "Opaque", "labels": {}}
    tls_type = {"type": "kubernetes.io/tls", "labels": {"streamq.io/credentials": "true"}}
    found = credential_secret_problems(spec, {"streamq-kafka-ca": unmarked, "streamq-kafka-user": tls_type})
    assert [(p.path, "not marked" in p.message, "kubernetes.io/tls" in p.message) for p in found] == [
        ("spec.source.kafka.tls.caSecretRef.name", True, False),
        ("spec.source.kafka.tls.clientCertificate.name", False, True),
        ("spec.sink.kafka.tls.caSecretRef.name", True, False),
        ("spec.sink.kafka.tls.clientCertificate.name", False, True),
    ]


@pytest.mark.parametrize("option", ["kafka.ssl.truststore.certificates", "kafka.ssl.keystore.key",
                                    "kafka.ssl.keystore.location", "kafka.ssl.truststore.location",
                                    "kafka.ssl.key.password", "kafka.security.protocol",
                                    "kafka.config.providers"])  # fmt: skip
def test_inline_ssl_options_stay_refused(option):
    found = problems(tls_spec(**{"source.kafka.options": {option: "x"}}))
    assert any(p.startswith(f"spec.source.kafka.options.{option}: ") for p in found), found


def test_a_tenant_cannot_use_the_jobs_config_provider_whatever_the_policy():
    token = "${streamqsecrets:/var/run/secrets/kubernetes.io/serviceaccount:token}"
    found = problems(tls_spec(**{"source.kafka.options": {"kafka.client.id": token}}),
                     Policy(allowed_kafka_options=["*"]))  # fmt: skip
    assert any(p.startswith("spec.source.kafka.options.kafka.client.id: ") and "config-provider" in p for p in found)


# --- what the job hands Kafka's clients -----------------------------------------------------------


def test_jvm_clients_get_paths_never_key_material(mounted):
    options = kafka_source_options(validate_spec(tls_spec()))
    user = mounted / "streamq-kafka-user"
    assert options["kafka.security.protocol"] == "SSL"
    assert options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.ssl.truststore.location"] == str(mounted / "streamq-kafka-ca" / "ca.crt")
    assert options["kafka.ssl.keystore.type"] == "PEM"
    provider = credentials.CONFIG_PROVIDER
    assert options[f"kafka.config.providers.{provider}.class"] == credentials.DIRECTORY_PROVIDER
    assert options[f"kafka.config.providers.{provider}.param.allowed.paths"] == str(user)
    assert options["kafka.ssl.keystore.key"] == f"${{{provider}:{user}:user.key}}"
    assert options["kafka.ssl.keystore.certificate.chain"] == f"${{{provider}:{user}:user.crt}}"
    assert not any("PRIVATE KEY" in v or "CERTIFICATE" in v for v in options.values())


def test_the_sink_and_the_exactly_once_writers_get_them_too(mounted):
    spec = validate_spec(tls_spec(MTLS, EXACTLY_ONCE))
    assert kafka_sink_options(spec)["kafka.ssl.truststore.location"].endswith("/streamq-kafka-ca/ca.crt")
    user = mounted / "streamq-kafka-user"
    assert connection_config(spec) == {
        "bootstrap.servers": "kafka:9092", "security.protocol": "SSL",
        "ssl.ca.location": str(mounted / "streamq-kafka-ca" / "ca.crt"),
        "ssl.certificate.location": str(user / "user.crt"), "ssl.key.location": str(user / "user.key"),
    }  # fmt: skip
    assert [e.config["security.protocol"] for e in kafka_checks.endpoints(spec)] == ["SSL", "SSL"]


def test_the_operators_settings_win_over_the_tenants_types(mounted):
    spec = validate_spec(tls_spec(**{"source.kafka.options": {"kafka.ssl.truststore.type": "JKS"}}))
    assert kafka_source_options(spec)["kafka.ssl.truststore.type"] == "PEM"


def test_sasl_ssl_keeps_its_protocol_and_adds_the_ca(mounted):
    (mounted / "creds").mkdir()
    (mounted / "creds" / "username").write_text("u")
    (mounted / "creds" / "password").write_text("p")
    auth = {"secretRef": {"name": "creds"}, "securityProtocol": "SASL_SSL"}
    options = kafka_source_options(validate_spec(query_spec(**{"source.kafka.auth": auth, "source.kafka.tls": CA})))
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.ssl.truststore.location"].endswith("/streamq-kafka-ca/ca.crt")
    assert "kafka.ssl.keystore.type" not in options


def test_a_missing_file_names_the_field(mounted):
    (mounted / "streamq-kafka-user" / "user.key").unlink()
    with pytest.raises(SpecError) as err:
        kafka_source_options(validate_spec(tls_spec()))
    (problem,) = err.value.problems
    assert problem.path == "spec.source.kafka.tls.clientCertificate.keyKey"
    assert "streamq-kafka-user/user.key is missing or unreadable" in problem.message


@pytest.mark.parametrize(("reason", "says"), [
    ("ssl://b:9093/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls alert bad certificate",
     "spec.source.kafka.tls.clientCertificate"),
    ("ssl://b:9093/bootstrap: SSL handshake failed: certificate verify failed: unable to get local issuer",
     "spec.source.kafka.tls.caSecretRef"),
    ("Connection refused", None),
])  # fmt: skip
def test_a_failed_handshake_says_what_to_check(reason, says):
    hint = kafka_checks.tls_hint(reason, "source")
    assert (says in hint) if says else hint == ""


# --- what the operator mounts -------------------------------------------------------------------


def _run(spec: dict) -> Run:
    parsed = validate_spec(spec)
    return Run(query="payments", namespace="team-a", attempt=1, spec=parsed,
                      checkpoint_location=parsed.checkpoint.location)  # fmt: skip


def test_driver_mounts_each_tls_secret_once_read_only():
    pod = render.driver_pod(_run(tls_spec()), SETTINGS)
    secrets = [v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v]
    assert secrets == ["streamq-kafka-ca", "streamq-kafka-user"]
    mounts = {m["mountPath"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert all(mounts[f"{SECRETS_MOUNT_DIR}/{name}"]["readOnly"] for name in secrets)


def test_executors_mount_the_tls_secrets_at_the_drivers_paths():
    spec = tls_spec(**{"runtime.executors": {"instances": 2, "cores": 1}, "runtime.parallelism": None})
    conf = render.executor_conf(_run(spec), SETTINGS)
    assert {k: v for k, v in conf.items() if k.startswith("spark.kubernetes.executor.secrets.")} == {
        f"spark.kubernetes.executor.secrets.{name}": f"{SECRETS_MOUNT_DIR}/{name}"
        for name in ("streamq-kafka-ca", "streamq-kafka-user")
    }


def test_sasl_secrets_are_not_mounted_into_executors():
    spec = query_spec(**{"source.kafka.auth": {"secretRef": {"name": "streamq-creds"}},
                         "runtime.executors": {"instances": 1, "cores": 1}, "runtime.parallelism": None})  # fmt: skip
    assert not any(k.startswith("spark.kubernetes.executor.secrets.") for k in render.executor_conf(_run(spec), SETTINGS))
