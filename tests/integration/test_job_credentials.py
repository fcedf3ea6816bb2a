"""Kafka credentials from a mounted Secret (files), against a broker that requires SASL."""

import signal

import pytest

from contract import ExitCode
from testbed.jobs import JobProcess
from testbed.kafka_broker import free_port
from testbed.specs import flagged, payments, query_spec, write_resource
from testbed.wait import wait_for

pytestmark = pytest.mark.integration

USER, PASSWORD = "streamq", "s3cret-Pa55"


@pytest.fixture
def sasl_broker(kafka_broker_factory):
    sasl_port = free_port()
    holder = {}

    def listeners(broker_port, controller_port):
        return (
            f"PLAINTEXT://127.0.0.1:{broker_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},CONTROLLER://127.0.0.1:{controller_port}"
        )

    port, controller_port = free_port(), free_port()
    broker = kafka_broker_factory(
        port=port,
        controller_port=controller_port,
        extra_properties={
            "listeners": listeners(port, controller_port),
            "advertised.listeners": listeners(port, controller_port),
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";',
        },
    )
    holder["sasl_bootstrap"] = f"127.0.0.1:{sasl_port}"
    return broker, holder["sasl_bootstrap"]


def _secret(tmp_path, password):
    folder = tmp_path / "secrets" / "kafka-creds"
    folder.mkdir(parents=True)
    (folder / "username").write_text(USER + "\n")
    (folder / "password").write_text(password + "\n")
    return tmp_path / "secrets"


def _spec(bootstrap, tmp_path):
    auth = {"mechanism": "PLAIN", "securityProtocol": "SASL_PLAINTEXT", "secretRef": {"name": "kafka-creds"}}
    spec = query_spec(
        bootstrap=bootstrap,
        topic="payments",
        sink_topic="flagged",
        location=tmp_path / "ck",
        trigger={"continuous": {"checkpointInterval": "500ms"}},
    )
    spec["source"]["kafka"]["auth"] = auth
    spec["sink"]["kafka"]["auth"] = auth
    return write_resource(tmp_path / "q.yaml", "sasl", spec)


def test_credentials_from_secret_files(sasl_broker, tmp_path):
    broker, sasl_bootstrap = sasl_broker
    broker.create_topic("payments", 2)
    broker.create_topic("flagged", 1)
    records = payments(60)
    broker.produce("payments", records)
    job = JobProcess(_spec(sasl_bootstrap, tmp_path), tmp_path, env={"STREAMQ_SECRETS_DIR": str(_secret(tmp_path, PASSWORD))})
    try:
        expected = sorted(flagged(records))
        out = broker.consume_all("flagged", timeout=150, expected_count=len(expected), decode=True)
        assert sorted(out) == expected, job.log()[-3000:]
        # A continuous query's rows can reach the sink before its first progress record: wait for
        # one, or the file this test reads for the password may not exist yet.
        wait_for(job.progress_file.exists, 60, lambda: f"a progress record:\n{job.log()[-3000:]}")
        job.signal(signal.SIGTERM)
        assert job.wait(60) == ExitCode.OK
    finally:
        job.stop()
    assert PASSWORD not in job.log()
    assert PASSWORD not in job.progress_file.read_text()


def test_wrong_password_fails_clearly_without_leaking_it(sasl_broker, tmp_path):
    broker, sasl_bootstrap = sasl_broker
    broker.create_topic("payments", 1)
    wrong = "not-the-Pa55word"
    code, job = JobProcess.run_to_exit(
        _spec(sasl_bootstrap, tmp_path), tmp_path, 90, env={"STREAMQ_SECRETS_DIR": str(_secret(tmp_path, wrong))}
    )
    assert code == ExitCode.SOURCE_UNAVAILABLE, job.log()[-3000:]
    message = job.termination_message()
    assert "Authentication failed" in message or "SASL" in message, message
    assert wrong not in message and wrong not in job.log()


def test_missing_secret_file_is_an_invalid_spec(kafka_broker, tmp_path):
    code, job = JobProcess.run_to_exit(
        _spec(kafka_broker.bootstrap, tmp_path), tmp_path, 60, env={"STREAMQ_SECRETS_DIR": str(tmp_path / "none")}
    )
    assert code == ExitCode.INVALID_SPEC
    assert "secret file" in job.termination_message() and "kafka-creds/username" in job.termination_message()
