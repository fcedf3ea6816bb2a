"""spec.checkpoint.s3: an S3-compatible store's settings, its key pair by Secret reference only."""

import pytest

from contract.load import SpecError, validate_spec
from contract.spec import SECRET_KEY_PATTERN
from testbed.specs import query_spec, with_change

pytestmark = pytest.mark.unit


def _spec(checkpoint: dict):
    return validate_spec(with_change(query_spec(), "checkpoint", checkpoint))


def test_a_full_block_and_its_defaults():
    spec = _spec({"location": "s3a://bucket/q", "s3": {
        "endpoint": "http://127.0.0.1:8333", "region": "us-east-1", "pathStyleAccess": True,
        "credentials": {"secretRef": {"name": "store"}}}})  # fmt: skip
    s3 = spec.checkpoint.s3
    assert (s3.endpoint, s3.region, s3.path_style_access) == ("http://127.0.0.1:8333", "us-east-1", True)
    ref = s3.credentials.secret_ref
    assert (ref.name, ref.access_key_id_key, ref.secret_access_key_key) == ("store", "accessKeyId", "secretAccessKey")
    assert _spec({"location": "s3a://bucket/q", "s3": {}}).checkpoint.s3.path_style_access is False


@pytest.mark.parametrize("key", ["AWS_ACCESS_KEY_ID", "access-key.id", "a_b", "x"])
def test_secret_keys_use_kubernetes_syntax(key):
    ref = {"name": "store", "accessKeyIdKey": key, "secretAccessKeyKey": key}
    assert (
        _spec(
            {"location": "s3a://b/q", "s3": {"credentials": {"secretRef": ref}}}
        ).checkpoint.s3.credentials.secret_ref.access_key_id_key
        == key
    )


@pytest.mark.parametrize("key", ["a/b", "a b", "", "ключ", "a:b"])
def test_keys_outside_kubernetes_syntax_are_refused(key):
    with pytest.raises(SpecError, match="accessKeyIdKey"):
        _spec({"location": "s3a://b/q", "s3": {"credentials": {"secretRef": {"name": "store", "accessKeyIdKey": key}}}})


@pytest.mark.parametrize("credentials", [
    {"accessKeyId": "AKID", "secretAccessKey": "x"},  # values: never in the spec
    {"secretRef": {"name": "store", "secretAccessKey": "x"}},
])  # fmt: skip
def test_credentials_are_a_secret_reference_only(credentials):
    with pytest.raises(SpecError):
        _spec({"location": "s3a://b/q", "s3": {"credentials": credentials}})


@pytest.mark.parametrize("location", ["/checkpoints/q", "file:///checkpoints/q", "s3://bucket/q", "gs://bucket/q"])
def test_the_block_applies_to_s3a_locations_only(location):
    with pytest.raises(SpecError, match=r"s3a://bucket/path location only") as caught:
        _spec({"location": location, "s3": {"region": "us-east-1"}})
    assert any(p.path == "spec.checkpoint.s3" for p in caught.value.problems)


def test_the_rule_is_in_the_crd_too():
    from controller.crd import render_crd

    schema = render_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["checkpoint"]
    rules = [v["rule"] for v in schema.get("x-kubernetes-validations", [])]
    assert "!has(self.s3) || self.location.startsWith('s3a://')" in rules
    keys = schema["properties"]["s3"]["properties"]["credentials"]["properties"]["secretRef"]["properties"]
    assert keys["accessKeyIdKey"]["pattern"] == keys["secretAccessKeyKey"]["pattern"] == SECRET_KEY_PATTERN
