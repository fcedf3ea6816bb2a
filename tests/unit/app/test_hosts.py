"""Hosts are parsed, not matched (contract.hosts and the policy's deniedHosts/allowedHosts):
every way the JVM and libc read an address is a way to the metadata endpoint, so each form is
compared as the address it means; what is neither a name nor an address is refused."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from contract import hosts
from contract.load import validate_spec
from contract.policy import METADATA_HOSTS, Policy, check_policy
from contract.problems import SpecError
from testbed.specs import changed, query_spec

pytestmark = pytest.mark.unit

DENIED = hosts.compile_patterns(METADATA_HOSTS)
BASE = query_spec()


@pytest.mark.parametrize(("address", "host", "port"), [
    ("kafka:9092", "kafka", 9092),
    ("kafka.kafka.svc:9092", "kafka.kafka.svc", 9092),
    ("[::1]:9092", "::1", 9092),
    ("[fe80::1%25eth0]:80", "fe80::1%25eth0", 80),
    ("fd00:ec2::254", "fd00:ec2::254", None),
    ("http://169.254.169.254/latest/meta-data", "169.254.169.254", None),
    ("https://user@store.example:8333/bucket", "store.example", 8333),
    ("abfss://container@account.dfs.core.windows.net/team-a/q", "account.dfs.core.windows.net", None),
    ("hdfs://namenode:8020/team-a/q", "namenode", 8020),
    ("PLAINTEXT://broker-1:9092", "broker-1", 9092),
    ("169.254.169.254/latest", "169.254.169.254", None),
    ("  kafka:9092 ", "kafka", 9092),
])  # fmt: skip
def test_split_reads_host_and_port_as_the_jvm_clients_do(address, host, port):
    assert hosts.split(address) == [hosts.Endpoint(host, port)]


def test_an_unbracketed_ipv6_address_with_a_port_is_read_both_ways():
    readings = {(e.host, e.port) for e in hosts.split("fd00:ec2::254:80")}
    assert readings == {("fd00:ec2::254:80", None), ("fd00:ec2::254", 80)}


@pytest.mark.parametrize(("written", "means"), [
    ("169.254.169.254", {"169.254.169.254"}),
    ("2852039166", {"169.254.169.254"}),
    ("0xa9fea9fe", {"169.254.169.254"}),
    ("0XA9FEA9FE", {"169.254.169.254"}),
    ("0251.0376.0251.0376", {"169.254.169.254"}),  # octal to C; no reading for Java (376 > 255)
    ("0169.0254.0169.0254", {"169.254.169.254"}),  # decimal to Java; not octal (9)
    ("0251.254.0xa9.254", {"169.254.169.254"}),  # mixed bases
    ("169.254.43518", {"169.254.169.254"}),  # a.b.c: the last part is 16 bits
    ("169.16689662", {"169.254.169.254"}),  # a.b: the last part is 24 bits
    ("0x7f.1", {"127.0.0.1"}),
    ("010.0.0.1", {"8.0.0.1", "10.0.0.1"}),  # C reads octal, Java decimal: both count
    ("169.254.169.254.", {"169.254.169.254"}),
])  # fmt: skip
def test_every_reading_of_an_ipv4_literal(written, means):
    assert {str(a) for a in hosts.parse_host(written).addresses} == means


@pytest.mark.parametrize(("written", "carries"), [
    ("::ffff:169.254.169.254", "169.254.169.254"),
    ("::ffff:a9fe:a9fe", "169.254.169.254"),
    ("0:0:0:0:0:FFFF:A9FE:A9FE", "169.254.169.254"),
    ("::169.254.169.254", "169.254.169.254"),  # IPv4-compatible
    ("::ffff:0:a9fe:a9fe", "169.254.169.254"),  # IPv4-translated
    ("64:ff9b::a9fe:a9fe", "169.254.169.254"),  # NAT64
    ("64:ff9b::169.254.169.254", "169.254.169.254"),
    ("64:ff9b:1:a9fe:a9:fe00::", "169.254.169.254"),  # local-use NAT64, /48
    ("2002:a9fe:a9fe::", "169.254.169.254"),  # 6to4
    ("2001:0:4136:e378:8000:63bf:5601:5601", "169.254.169.254"),  # Teredo client (inverted bits)
    ("fe80::5efe:a9fe:a9fe", "169.254.169.254"),  # ISATAP
    ("::ffff:0251.0376.0251.0376", "169.254.169.254"),  # a dotted tail read as inet_aton reads it
    ("::ffff:169.254.43518", "169.254.169.254"),
])  # fmt: skip
def test_ipv6_addresses_carry_the_ipv4_address_they_stand_for(written, carries):
    assert ip_address(carries) in hosts.parse_host(written).every_address()


@pytest.mark.parametrize("written", [
    "fd00:ec2::254", "fd00:ec2:0:0:0:0:0:254", "FD00:EC2::254", "fd00:0ec2:0000::0254", "fe80::1%eth0",
    "fe80::a9fe:a9fe", "100.100.100.200", "0x646464c8", "169.254.170.2", "169.254.170.23",
])  # fmt: skip
def test_metadata_addresses_in_any_form_are_denied(written):
    assert next(hosts.denied_by(hosts.parse_host(written), DENIED), None), written


@pytest.mark.parametrize("written", [
    "metadata", "METADATA.google.internal", "metadata.google.internal.", "x.metadata.google.internal",
    "metadata.goog", "metadata.azure.internal", "instance-data", "instance-data.ec2.internal",
    "instance-data.us-west-2.compute.internal",  # what a search domain makes of instance-data
    "metadata.c.my-project.internal",
    "169-254-169-254.team-a.pod.cluster.local",  # the cluster's pod records resolve it
    "app.169.254.169.254.nip.io", "magic-a9fea9fe.nip.io", "fd00-ec2--254.sslip.io",
])  # fmt: skip
def test_metadata_names_and_names_that_spell_the_address_are_denied(written):
    assert next(hosts.denied_by(hosts.parse_host(written), DENIED), None), written


@pytest.mark.parametrize("written", [
    "kafka", "kafka.kafka.svc", "my-cluster-kafka-bootstrap.kafka.svc.cluster.local", "127.0.0.1", "10.0.0.5",
    "::1", "fd00::5", "metadata-store.example.com", "kafka-metadata.kafka.svc", "broker_1.example.com",
    "10-0-0-5.kafka.pod.cluster.local", "s3.eu-west-1.amazonaws.com", "xn--bcher-kva.example",
])  # fmt: skip
def test_benign_hosts_are_not_denied(written):
    assert next(hosts.denied_by(hosts.parse_host(written), DENIED), None) is None


@pytest.mark.parametrize("written", [
    "", ".", "a..b", ".kafka", "kafka..", "a b", "kafka\t", "ev\\il", "user@host", "kafka%0a", "x%y",
    "ｍｅｔａｄａｔａ.google.internal",  # fullwidth letters: IDNA would map them to "metadata"
    "mеtadata.google.internal",  # a Cyrillic е
    "-kafka", "kafka-", "a" * 64 + ".example", "xn--a.example",  # not punycode
    "999.999.999.999", "0x1ffffffff", "1.2.3.256",  # written as an address but none
    "fe80::1%", "fe80::1%eth 0", "::ffff:1.2.3.4.5", "1:2:3:4:5:6:7:8:9", "12345::1",
])  # fmt: skip
def test_what_is_neither_a_name_nor_an_address_is_refused(written):
    with pytest.raises(hosts.HostError):
        hosts.parse_host(written)


@pytest.mark.parametrize("address", ["[::1", "::1]:80", "a@b@c:80", "kafka:99999", "kafka:9o92", "http://a@b@c/",
                                     "1:2:3:4:5:6:7:8:9:10"])  # fmt: skip
def test_addresses_that_cannot_be_split_are_refused(address):
    with pytest.raises(hosts.HostError):
        hosts.split(address)


# --- the policy's lists ------------------------------------------------------------------------


@pytest.mark.parametrize(("entry", "host", "denied"), [
    ("169.254.*", "0xa9fea9fe", True),  # an older prefix is its network
    ("169.254.*", "169.25.1.1", False),
    ("10.*", "012.1.2.3", True),  # 012 is 10 to C
    ("fd00:ec2::*", "FD00:EC2:0::254", True),  # other prefixes: on the address's text
    ("metadata*", "metadata-proxy.kube-system", True),
    ("*.internal", "metadata.google.internal", True),
    ("*.internal", "internal", False),
    (".example.com", "a.b.example.com", True),
    ("evil.example", "EVIL.example.", True),
    ("evil.example", "notevil.example", False),
    ("192.0.2.7", "::ffff:192.0.2.7", True),
    ("*", "anything.at.all", True),
])  # fmt: skip
def test_denied_entries(entry, host, denied):
    found = next(hosts.denied_by(hosts.parse_host(host), hosts.compile_patterns([entry])), None)
    assert bool(found) == denied


@pytest.mark.parametrize(("entries", "host", "allowed"), [
    (["*.kafka.svc"], "my-kafka.kafka.svc", True),
    (["*.kafka.svc"], "kafka.svc", False),
    (["*.kafka.svc"], "my-kafka.kafka.svc.evil.example", False),
    ([".example.com"], "broker.example.com", True),
    (["kafka.example.com"], "b1.kafka.example.com", True),
    (["*.${namespace}.svc"], "kafka.team-a.svc", True),
    (["*.${namespace}.svc"], "kafka.team-b.svc", False),
    (["10.0.0.0/8"], "10.0.0.5", True),
    (["10.0.0.0/8"], "012.0.0.5", False),  # Java reads 12.0.0.5: every reading must be listed
    (["10.0.0.0/8"], "::ffff:10.0.0.5", True),
    (["10.0.0.0/8"], "kafka", False),
    (["*.kafka.svc"], "10.0.0.5", False),
    (["*"], "anything", True),
])  # fmt: skip
def test_allowed_entries(entries, host, allowed):
    assert hosts.allowed(hosts.parse_host(host), hosts.compile_patterns(entries, "team-a")) == allowed


@pytest.mark.parametrize("entry", ["", "10.0.0.0/33", "a b", "*.", "ｍetadata", "x@y", "1.2.3.999"])
def test_a_policy_with_an_entry_that_is_no_host_is_refused(entry):
    with pytest.raises(ValueError):
        Policy(denied_hosts=[entry])
    with pytest.raises(ValueError):
        Policy(allowed_hosts=[entry])


# --- check_policy: every field that names a host -------------------------------------------------


def _problems(spec: dict, policy: Policy | None = None, namespace: str = "team-a") -> list[str]:
    try:
        validate_spec(spec, policy=policy or Policy(), namespace=namespace)
    except SpecError as exc:
        return [str(p) for p in exc.problems]
    return []


def _host_problems(spec: dict, policy: Policy | None = None, namespace: str = "team-a") -> list[str]:
    return [p for p in _problems(spec, policy, namespace) if "Hosts: " in p]


S3 = {"location": "s3a://bucket/team-a/q", "s3": {"endpoint": "http://store.example:8333", "pathStyleAccess": True,
                                                  "credentials": {"secretRef": {"name": "streamq-s3"}}}}  # fmt: skip


@pytest.mark.parametrize(("change", "path"), [
    ({"source.kafka.bootstrapServers": "kafka:9092,0xa9fea9fe:80"}, "spec.source.kafka.bootstrapServers"),
    ({"sink.kafka.bootstrapServers": "[::ffff:169.254.169.254]:80"}, "spec.sink.kafka.bootstrapServers"),
    ({"checkpoint": {**S3, "s3": {**S3["s3"], "endpoint": "http://2852039166/"}}}, "spec.checkpoint.s3.endpoint"),
    ({"checkpoint": {"location": "hdfs://169.254.43518:8020/team-a/q"}}, "spec.checkpoint.location"),
    ({"checkpoint": {"location": "webhdfs://[fd00:ec2::254]:9870/team-a/q"}}, "spec.checkpoint.location"),
    ({"checkpoint": {"location": "abfss://c@metadata.azure.internal/team-a/q"}}, "spec.checkpoint.location"),
    ({"checkpoint": {"location": "s3a://169.254.169.254/team-a/q"}}, "spec.checkpoint.location"),
    # virtual-host style: S3A puts the bucket in front of the endpoint's name
    ({"checkpoint": {**S3, "location": "s3a://metadata/team-a/q",
                     "s3": {**S3["s3"], "endpoint": "google.internal", "pathStyleAccess": False}}},
     "spec.checkpoint.s3.endpoint"),
])  # fmt: skip
def test_every_field_that_names_a_host_is_checked(change, path):
    found = _host_problems(changed(BASE, change))
    assert any(p.startswith(f"{path}: policy.deniedHosts: ") for p in found), found


def test_a_kafka_option_opened_by_the_policy_is_checked_too():
    spec = changed(BASE, {"source.kafka.options": {"kafka.sasl.oauthbearer.token.endpoint.url": "http://0xa9fea9fe/"}})
    policy = Policy(allowed_kafka_options=["sasl.oauthbearer.token.endpoint.url"])
    path = "spec.source.kafka.options.kafka.sasl.oauthbearer.token.endpoint.url"
    assert any(p.startswith(f"{path}: policy.deniedHosts: ") for p in _problems(spec, policy))


def test_an_unreadable_host_is_refused_and_named():
    (problem,) = _host_problems(changed(BASE, {"checkpoint": {"location": "hdfs://a..b:8020/team-a/q"}}))
    assert problem.startswith("spec.checkpoint.location: policy.deniedHosts: hdfs://a..b:8020/team-a/q: ")
    assert "a DNS name or an IP address" in problem


@pytest.mark.parametrize("location", ["hdfs://[::1/team-a/q", "hdfs://a]b/team-a/q", "s3a://k:s@[x/team-a/q"])
def test_a_location_urlsplit_cannot_read_is_refused_not_a_crash(location):
    found = _problems(changed(BASE, {"checkpoint": {"location": location}}))
    assert any(p.startswith("spec.checkpoint.location: policy.") for p in found), found
    assert not any("k:s" in p for p in found)


def test_credentials_in_a_location_are_not_repeated_in_the_message():
    found = _host_problems(changed(BASE, {"checkpoint": {"location": "hdfs://user:pw@169.254.169.254/team-a/q"}}))
    assert found and not any("pw" in p for p in found)


@pytest.mark.parametrize("bootstrap", [
    "kafka.kafka.svc:9092", "127.0.0.1:9092", "10.0.0.5:9092", "my-cluster-kafka-bootstrap.kafka.svc.cluster.local:9093",
    "[::1]:9092", "b-1.msk.example.com:9094,b-2.msk.example.com:9094",
])  # fmt: skip
def test_benign_brokers_pass_the_default_policy(bootstrap):
    assert _host_problems(query_spec(bootstrap=bootstrap)) == []


@pytest.mark.parametrize("location", ["s3a://bucket/team-a/q", "gs://my_bucket/team-a/q", "hdfs://namenode:8020/team-a/q",
                                      "abfss://c@account.dfs.core.windows.net/team-a/q", "s3a://123456789012/team-a/q"])  # fmt: skip
def test_benign_remote_checkpoints_pass(location):
    assert _host_problems(changed(BASE, {"checkpoint": {"location": location}})) == []


def test_allowed_hosts_limit_brokers_stores_and_namenodes_to_the_listed_ones():
    policy = Policy(allowed_hosts=["*.${namespace}.svc.cluster.local", "10.0.0.0/8", ".core.windows.net"])
    ok = query_spec(bootstrap="kafka.team-a.svc.cluster.local:9092")
    assert _host_problems(ok, policy) == []
    assert _host_problems(changed(ok, {"checkpoint": {"location": "abfss://c@a.dfs.core.windows.net/team-a/q"}}), policy) == []
    elsewhere = query_spec(bootstrap="kafka.team-b.svc.cluster.local:9092")
    found = _host_problems(elsewhere, policy)
    assert found and all(": policy.allowedHosts: " in p for p in found)
    assert "*.team-a.svc.cluster.local" in found[0]
    namenode = _host_problems(changed(ok, {"checkpoint": {"location": "hdfs://namenode.evil:8020/team-a/q"}}), policy)
    assert [p.split(": ")[:2] for p in namenode] == [["spec.checkpoint.location", "policy.allowedHosts"]]
    # a bucket is not a host: listing hosts does not limit buckets
    assert _host_problems(changed(ok, {"checkpoint": {**S3, "s3": {**S3["s3"], "endpoint": "10.0.0.9:8333"}}}), policy) == []
    # what deniedHosts refuses is reported once, by deniedHosts
    meta = _host_problems(query_spec(bootstrap="169.254.169.254:80"), Policy(allowed_hosts=["0.0.0.0/0"]))
    assert meta and all("policy.deniedHosts" in p for p in meta)


def test_older_policies_keep_their_meaning():
    old = Policy(denied_hosts=["169.254.*", "metadata", "metadata.google.internal", "fd00:ec2::254", "100.100.100.200"])
    for bootstrap in ("0xa9fea9fe:80", "metadata.google.internal.:80", "[fd00:ec2:0::254]:80", "100.100.100.200:80"):
        assert _host_problems(query_spec(bootstrap=bootstrap), old), bootstrap
    assert check_policy(validate_spec(query_spec()), old) == []
