"""s3a:// checkpoints are read with obstore: the store's settings and the Files view of it.

The listing and reading logic runs here on obstore's MemoryStore (the same list_with_delimiter /
get API as its S3Store); tests/integration/test_object_store.py reads a real one (SeaweedFS)."""

import pytest

from app.checkpoints import reader as checkpoint
from app.checkpoints.reader import CheckpointError, S3Files, S3Options, configure_s3, open_location, read_checkpoint
from contract.load import validate_spec
from testbed.specs import query_spec, with_change

pytestmark = pytest.mark.unit


def test_options_from_the_spec_block_and_the_key_pair():
    spec = validate_spec(with_change(query_spec(), "checkpoint", {
        "location": "s3a://bucket/q",
        "s3": {"endpoint": "http://127.0.0.1:8333", "region": "us-east-1", "pathStyleAccess": True,
               "credentials": {"secretRef": {"name": "store"}}},
    }))  # fmt: skip
    options = S3Options.of(spec.checkpoint.s3, ("AKID", "SECRET"))
    config, client = options.config()
    assert config == {"endpoint": "http://127.0.0.1:8333", "region": "us-east-1", "virtual_hosted_style_request": False,
                      "access_key_id": "AKID", "secret_access_key": "SECRET"}  # fmt: skip
    assert client == {"allow_http": True}  # http:// endpoints only when the spec says so
    assert "SECRET" not in repr(options) and "AKID" not in repr(options)
    assert S3Options.of(None).config() == ({}, {})  # no block: the AWS_* environment, as for any S3 client


def test_a_bare_host_endpoint_means_https():
    config, client = S3Options(endpoint="minio.storage:9000").config()
    assert config["endpoint"] == "https://minio.storage:9000" and client == {}


@pytest.fixture
def memory_s3(monkeypatch):
    from obstore.store import MemoryStore

    store = MemoryStore()
    real_init = S3Files.__init__

    def init(self, bucket, options):
        real_init(self, bucket, options)
        self.store = store

    monkeypatch.setattr(S3Files, "__init__", init)
    yield store
    configure_s3(S3Options())


def test_a_checkpoint_on_s3_reads_like_a_local_one(memory_s3):
    memory_s3.put("ck/q/metadata", b'{"id":"s-1"}')
    memory_s3.put("ck/q/offsets/0", b'v1\n{}\n{"t":{"0":3,"1":4}}')
    memory_s3.put("ck/q/offsets/1", b'v1\n{}\n{"t":{"0":5,"1":6}}')
    memory_s3.put("ck/q/commits/0", b'v1\n{"nextBatchWatermarkMs":0}')
    memory_s3.put(
        "ck/q/state/0/_metadata/metadata",
        b'v1\n{"operatorInfo":{"operatorName":"dedupe"},"stateStoreInfo":[{"numPartitions":2}]}',
    )
    state = read_checkpoint("s3a://bucket/ck/q")
    assert state.exists and state.query_id == "s-1" and state.last_committed == 0 and state.in_flight == 1
    assert state.kafka_offsets() == {"t": {0: 3, 1: 4}} and state.committed_at is not None  # LastModified
    assert [(o.id, o.name) for o in state.stateful_operators] == [(0, "dedupe")]
    assert read_checkpoint("s3a://bucket/ck/none").exists is False
    assert read_checkpoint("s3://bucket/ck/q").query_id == "s-1"
    memory_s3.delete("ck/q/metadata")  # not written yet: no query id, not a problem
    assert read_checkpoint("s3a://bucket/ck/q").query_id is None and read_checkpoint("s3a://bucket/ck/q").problems == ()


def test_store_errors_are_checkpoint_errors_without_secrets(monkeypatch):
    configure_s3(S3Options(endpoint="http://127.0.0.1:9", path_style=True, access_key_id="AKID", secret_access_key="TOPSECRET"))
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    files, root = open_location("s3a://bucket/ck/q")
    assert isinstance(files, S3Files) and root == "ck/q"
    files.store = _Failing()
    with pytest.raises(CheckpointError) as caught:
        files.list(root)
    assert "s3a://bucket/ck/q" in str(caught.value) and "TOPSECRET" not in str(caught.value)
    configure_s3(S3Options())


def test_a_location_without_a_bucket_is_refused():
    with pytest.raises(CheckpointError, match="no bucket"):
        read_checkpoint("s3a:///ck/q")


class _Failing:
    def list_with_delimiter(self, prefix=None):
        raise OSError("Generic S3 error: error sending request: connection refused")

    def get(self, path):
        raise OSError("refused")


def test_the_module_default_is_the_environment():
    assert checkpoint._s3_options == S3Options()
