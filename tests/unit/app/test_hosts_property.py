"""A property of the default policy: no address in the metadata and link-local ranges gets
through as a broker, an S3 endpoint or an HDFS namenode, whichever way it is written:
any base per part (decimal, hex, octal), 1 to 4 parts, one number, IPv4 inside IPv6
(mapped, compatible, NAT64, 6to4), IPv6 compressed, expanded or zero-padded, upper case,
bracketed with a port, with a trailing dot."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract.load import validate_spec
from contract.policy import Policy
from contract.problems import SpecError
from testbed.specs import changed, query_spec

pytestmark = pytest.mark.unit

BASE = query_spec()
V4 = IPv4Network("169.254.0.0/16")
V6 = (IPv6Network("fd00:ec2::/32"), IPv6Network("fe80::/10"))


def _inside(network) -> st.SearchStrategy:
    size = network.num_addresses
    return st.integers(0, size - 1).map(lambda i: network[i])


def _number(value: int, draw) -> str:
    base = draw(st.sampled_from(["dec", "hex", "HEX", "oct"]))
    if base == "hex":
        return f"0x{value:x}"
    if base == "HEX":
        return f"0X{value:X}"
    if base == "oct":
        return f"0{value:o}"
    return str(value)


@st.composite
def ipv4_literals(draw) -> tuple[str, bool]:
    """(written, is IPv6): a metadata-range IPv4 address in one of the forms C or the JVM read."""
    address = draw(_inside(V4))
    n = int(address)
    octets = list(address.packed)
    form = draw(st.sampled_from(["4", "3", "2", "1", "mapped", "mapped-hex", "compat", "nat64", "6to4", "translated"]))
    if form == "4":
        return ".".join(_number(o, draw) for o in octets), False
    if form == "3":
        return ".".join([_number(octets[0], draw), _number(octets[1], draw), _number(n & 0xFFFF, draw)]), False
    if form == "2":
        return ".".join([_number(octets[0], draw), _number(n & 0xFFFFFF, draw)]), False
    if form == "1":
        return _number(n, draw), False
    dotted, high, low = str(address), f"{n >> 16:x}", f"{n & 0xFFFF:x}"
    expanded = draw(st.booleans())
    return {
        "mapped": "0:0:0:0:0:ffff:" + dotted if expanded else "::ffff:" + dotted,
        "mapped-hex": f"0:0:0:0:0:ffff:{high}:{low}" if expanded else f"::ffff:{high}:{low}",
        "compat": "0:0:0:0:0:0:" + dotted if expanded else "::" + dotted,
        "nat64": f"64:ff9b:0:0:0:0:{high}:{low}" if expanded else f"64:ff9b::{high}:{low}",
        "6to4": f"2002:{high}:{low}:0:0:0:0:0" if expanded else f"2002:{high}:{low}::",
        "translated": f"0:0:0:0:ffff:0:{high}:{low}" if expanded else f"::ffff:0:{high}:{low}",
    }[form], True


@st.composite
def ipv6_literals(draw) -> tuple[str, bool]:
    address: IPv6Address = draw(st.sampled_from(V6).flatmap(_inside))
    form = draw(st.sampled_from(["compressed", "exploded", "unpadded", "zone"]))
    if form == "exploded":
        text = address.exploded
    elif form == "unpadded":
        text = ":".join(f"{int(g, 16):x}" for g in address.exploded.split(":"))
    else:
        text = address.compressed
    if form == "zone":
        text += "%" + draw(st.sampled_from(["eth0", "1", "25eth0"]))
    return text, True


@st.composite
def metadata_hosts(draw) -> tuple[str, bool]:
    """(host as written in an address, is IPv6)."""
    text, v6 = draw(st.one_of(ipv4_literals(), ipv6_literals()))
    if draw(st.booleans()):
        text = text.upper()
    if not v6 and draw(st.booleans()):
        text += "."
    return text, v6


def _with_port(host: str, v6: bool, port: int, draw) -> str:
    if v6 and not draw(st.booleans()):
        return f"{host}:{port}"  # unbracketed: Kafka reads the last group as the port
    return f"[{host}]:{port}" if v6 else f"{host}:{port}"


def _refused_at(spec: dict, path: str, host: str) -> bool:
    """Refused at ``path`` by policy.deniedHosts; a zone id ('%') the spec's own pattern refuses first."""
    try:
        validate_spec(spec, policy=Policy(), namespace="team-a")
    except SpecError as exc:
        at = [p for p in exc.problems if p.path == path]
        return any(p.message.startswith("policy.deniedHosts: ") or ("%" in host and "policy." not in p.message)
                   for p in at)  # fmt: skip
    return False


SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(metadata_hosts(), st.integers(1, 65535), st.sampled_from(["source", "sink"]), st.data())
def test_no_metadata_address_is_a_broker(host, port, side, data):
    text, v6 = host
    server = _with_port(text, v6, port, data.draw)
    spec = changed(BASE, {f"{side}.kafka.bootstrapServers": f"kafka:9092,{server}"})
    assert _refused_at(spec, f"spec.{side}.kafka.bootstrapServers", text), server


@SETTINGS
@given(metadata_hosts(), st.sampled_from(["", "http://", "https://"]), st.one_of(st.none(), st.integers(1, 65535)),
       st.data())  # fmt: skip
def test_no_metadata_address_is_an_s3_endpoint(host, scheme, port, data):
    text, v6 = host
    authority = (f"[{text}]" if v6 else text) if port is None else _with_port(text, v6, port, data.draw)
    endpoint = f"{scheme}{authority}{data.draw(st.sampled_from(['', '/', '/latest/meta-data']))}"
    spec = changed(BASE, {"checkpoint": {"location": "s3a://bucket/team-a/q", "s3": {"endpoint": endpoint}}})
    assert _refused_at(spec, "spec.checkpoint.s3.endpoint", text), endpoint


@SETTINGS
@given(metadata_hosts(), st.sampled_from(["hdfs", "webhdfs", "swebhdfs", "abfss", "viewfs"]), st.data())
def test_no_metadata_address_is_a_namenode(host, scheme, data):
    text, v6 = host
    authority = _with_port(text, v6, 8020, data.draw) if data.draw(st.booleans()) else (f"[{text}]" if v6 else text)
    if scheme == "abfss":
        authority = f"container@{authority}"
    location = f"{scheme}://{authority}/team-a/q"
    assert _refused_at(changed(BASE, {"checkpoint": {"location": location}}), "spec.checkpoint.location", text), location


@pytest.mark.parametrize("bootstrap", ["kafka.kafka.svc:9092", "127.0.0.1:9092", "10.0.0.5:9092",
                                       "my-cluster-kafka-bootstrap.kafka.svc.cluster.local:9093"])  # fmt: skip
def test_benign_brokers_pass(bootstrap):
    validate_spec(query_spec(bootstrap=bootstrap), policy=Policy(), namespace="team-a")


def test_the_strategies_draw_addresses_inside_the_ranges():
    assert IPv4Address("169.254.169.254") in V4 and IPv6Address("fd00:ec2::254") in V6[0]
