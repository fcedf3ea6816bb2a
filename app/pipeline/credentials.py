"""Kafka credentials from a mounted Secret, turned into client options.

The values are read from files at start and handed straight to Spark; they are
never logged and never written back anywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

from contract import SECRETS_DIR_ENV, SECRETS_MOUNT_DIR
from contract.problems import Problem, SpecError
from contract.spec import KafkaAuth, KafkaTls, S3Checkpoint, SaslMechanism

_LOGIN_MODULES = {
    SaslMechanism.PLAIN: "org.apache.kafka.common.security.plain.PlainLoginModule",
    SaslMechanism.SCRAM_SHA_256: "org.apache.kafka.common.security.scram.ScramLoginModule",
    SaslMechanism.SCRAM_SHA_512: "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def secrets_dir() -> Path:
    return Path(os.environ.get(SECRETS_DIR_ENV, SECRETS_MOUNT_DIR))


def _read_secret(path: Path, at: str) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        raise SpecError([Problem(at, f"secret file {path} is missing or unreadable")]) from None


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def read_credentials(auth: KafkaAuth, at: str) -> tuple[str, str]:
    folder = secrets_dir() / auth.secret_ref.name
    username = _read_secret(folder / auth.secret_ref.username_key, f"{at}.secretRef.usernameKey")
    password = _read_secret(folder / auth.secret_ref.password_key, f"{at}.secretRef.passwordKey")
    return username, password


def kafka_auth_options(auth: KafkaAuth | None, at: str) -> dict[str, str]:
    """Options for Spark's Kafka source and sink (JVM client)."""
    if auth is None:
        return {}
    username, password = read_credentials(auth, at)
    jaas = f"{_LOGIN_MODULES[auth.mechanism]} required username={_quote(username)} password={_quote(password)};"
    return {
        "kafka.security.protocol": auth.security_protocol.value,
        "kafka.sasl.mechanism": auth.mechanism.value,
        "kafka.sasl.jaas.config": jaas,
    }


def librdkafka_auth_config(auth: KafkaAuth | None, at: str) -> dict[str, str]:
    """The same credentials for the job's own checks (confluent-kafka client)."""
    if auth is None:
        return {}
    username, password = read_credentials(auth, at)
    return {
        "security.protocol": auth.security_protocol.value,
        "sasl.mechanisms": auth.mechanism.value,
        "sasl.username": username,
        "sasl.password": password,
    }


# --- TLS: a CA and a client certificate from Secrets, as files ----------------------

# Kafka's JVM clients read a PEM keystore from one file holding key and certificate, and a Secret
# holds them under two keys. So the JVM clients (driver and executors) read the two mounted files
# through Kafka's DirectoryConfigProvider: the options carry paths, the key is read by the client in
# its own pod, and no value passes through Spark's settings, plans or logs.
CONFIG_PROVIDER = "streamqsecrets"
DIRECTORY_PROVIDER = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"


def _secret_file(name: str, key: str, at: str) -> Path:
    """The mounted file of a Secret's key, checked readable (never read here)."""
    path = secrets_dir() / name / key
    if not path.is_file() or not os.access(path, os.R_OK):
        raise SpecError([Problem(at, f"secret file {path} is missing or unreadable")])
    return path


def tls_files(tls: KafkaTls | None, at: str) -> tuple[Path | None, Path | None, Path | None]:
    """(CA, client certificate, client key) files; None for what ``tls`` leaves unset."""
    if tls is None:
        return None, None, None
    ca = cert = key = None
    if (ref := tls.ca_secret_ref) is not None:
        ca = _secret_file(ref.name, ref.key, f"{at}.caSecretRef.key")
    if (client := tls.client_certificate) is not None:
        cert = _secret_file(client.name, client.certificate_key, f"{at}.clientCertificate.certificateKey")
        key = _secret_file(client.name, client.key_key, f"{at}.clientCertificate.keyKey")
    return ca, cert, key


def kafka_tls_options(tls: KafkaTls | None, auth: KafkaAuth | None, at: str) -> dict[str, str]:
    """Options for Spark's Kafka source and sink (JVM client); with ``auth`` the protocol is
    auth's (SASL_SSL: the rules refuse SASL_PLAINTEXT with tls), without it SSL."""
    if tls is None:
        return {}
    ca, cert, key = tls_files(tls, at)
    options = {} if auth is not None else {"kafka.security.protocol": "SSL"}
    if ca is not None:
        options.update({"kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(ca)})
    if cert is not None and key is not None:
        provider = f"kafka.config.providers.{CONFIG_PROVIDER}"
        options.update({
            "kafka.config.providers": CONFIG_PROVIDER,
            f"{provider}.class": DIRECTORY_PROVIDER,
            # the provider reads that folder only (Kafka 3.8+); tenants' ${...} values are refused anyway
            f"{provider}.param.allowed.paths": str(key.parent),
            "kafka.ssl.keystore.type": "PEM",
            "kafka.ssl.keystore.certificate.chain": f"${{{CONFIG_PROVIDER}:{cert.parent}:{cert.name}}}",
            "kafka.ssl.keystore.key": f"${{{CONFIG_PROVIDER}:{key.parent}:{key.name}}}",
        })  # fmt: skip
    return options


def librdkafka_tls_config(tls: KafkaTls | None, auth: KafkaAuth | None, at: str) -> dict[str, str]:
    """The same files for the job's own clients (confluent-kafka: checks, exactly-once writers)."""
    if tls is None:
        return {}
    ca, cert, key = tls_files(tls, at)
    config = {} if auth is not None else {"security.protocol": "SSL"}
    if ca is not None:
        config["ssl.ca.location"] = str(ca)
    if cert is not None and key is not None:
        config.update({"ssl.certificate.location": str(cert), "ssl.key.location": str(key)})
    return config


# --- s3a:// checkpoints -------------------------------------------------------------

S3A_SIMPLE_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
S3_CREDENTIALS_AT = "spec.checkpoint.s3.credentials.secretRef"


def s3_credentials(s3: S3Checkpoint | None) -> tuple[str, str] | None:
    """(access key id, secret access key) from the mounted Secret; None without a secretRef."""
    if s3 is None or s3.credentials is None:
        return None
    ref = s3.credentials.secret_ref
    folder = secrets_dir() / ref.name
    key_id = _read_secret(folder / ref.access_key_id_key, f"{S3_CREDENTIALS_AT}.accessKeyIdKey")
    secret = _read_secret(folder / ref.secret_access_key_key, f"{S3_CREDENTIALS_AT}.secretAccessKeyKey")
    return key_id, secret


def s3a_hadoop_secrets(s3: S3Checkpoint | None) -> dict[str, str]:
    """The key pair as Hadoop settings for S3A. The session sets them on the running JVM's
    Hadoop configuration (``app.pipeline.session.get_session``), not as ``spark.hadoop.*``
    SparkConf entries: PySpark hands its SparkConf to spark-submit as ``--conf k=v`` arguments,
    which any process on the node can read in /proc/<pid>/cmdline. Executors get them with the
    Hadoop configuration Spark broadcasts to their tasks (state stores write checkpoints there)."""
    pair = s3_credentials(s3)
    if pair is None:
        return {}
    return {
        "fs.s3a.aws.credentials.provider": S3A_SIMPLE_PROVIDER,
        "fs.s3a.access.key": pair[0],
        "fs.s3a.secret.key": pair[1],
    }
