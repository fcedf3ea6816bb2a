"""Hosts a query makes the pod connect to, read the way the JVM and libc read them (pure).

A host is compared as what it means, not as text: ``2852039166``, ``0xa9fea9fe``,
``0251.0376.0251.0376``, ``169.254.43518``, ``[::ffff:a9fe:a9fe]``, ``64:ff9b::a9fe:a9fe``
and ``169.254.169.254.`` are all the metadata endpoint to some client in the pod (Java's
``InetAddress`` reads dotted parts as decimal, glibc's ``inet_aton``, which getaddrinfo
tries first, as C numbers: 0x hex, 0 octal; both take 1 to 4 parts). So an address is
split into host and port as Kafka's ``Utils.getHost`` and ``java.net.URI`` split it, every
reading an IP literal can have is kept, and IPv4 addresses carried inside IPv6 ones
(mapped, compatible, NAT64, 6to4, Teredo, ISATAP) count as well. A name is compared after
lower-casing and dropping the root dot, together with the addresses its labels spell
(``169-254-169-254.ns.pod.cluster.local`` and nip.io-style names resolve to them). What is
neither a DNS name nor an IP literal is refused (``HostError``), never let through.

What parsing cannot see, a name whose DNS record points at the endpoint, is stopped by the
chart's NetworkPolicy (docs/security.md, "Hosts").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

IP = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network
NamePattern = tuple[str, str]  # ("name" | "domain" | "prefix", text)

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_BRACKETED = re.compile(r"^\[([^\[\]]*)\](?::([0-9]*))?$")
_NAME_CHARS = re.compile(r"^[A-Za-z0-9._\-]+$")
_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_\-]{0,61}[a-z0-9_])?$")
_NUMBER = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)$")
_ZONE = re.compile(r"^[A-Za-z0-9._~\-]+$")
_HEX8 = re.compile(r"^[0-9a-f]{8}$")
_DECIMAL_OCTET = re.compile(r"^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$")
MAX_PORT = 65535


class HostError(ValueError):
    """Neither a DNS name nor an IP literal: refused rather than guessed."""


@dataclass(frozen=True)
class Host:
    """One reading of a host. ``addresses``: what an IP literal means (several when Java and
    libc read it differently; empty for a name); ``carried``: IPv4 addresses inside those,
    and addresses a name's labels spell; ``name``: the lower-case ASCII name, no root dot."""

    text: str
    addresses: frozenset[IP] = field(default_factory=frozenset)
    carried: frozenset[IP] = field(default_factory=frozenset)
    name: str | None = None

    def every_address(self) -> frozenset[IP]:
        return self.addresses | self.carried


@dataclass(frozen=True)
class Endpoint:
    host: str  # as written, without brackets
    port: int | None


# --- host[:port], [v6]:port, scheme://user@host:port/path ----------------------------------------


def split(address: str) -> list[Endpoint]:
    """Every (host, port) a client could read ``address`` as: one, or two for an unbracketed
    IPv6 address ending in a group that could be a port (``fd00:ec2::254:80``)."""
    text = address.strip()
    url = _SCHEME.match(text)
    authority = re.split(r"[/?#]", text[url.end() :] if url else text, maxsplit=1)[0]  # S3A takes host/path too
    if "\\" in authority:
        raise HostError(f"{address!r}: a backslash in the host")
    if "@" in authority:
        if not url or authority.count("@") > 1:
            raise HostError(f"{address!r}: '@' is not part of a host")
        authority = authority.rpartition("@")[2]  # userinfo, or an Azure container
    if authority.startswith("[") or authority.endswith("]"):
        bracketed = _BRACKETED.match(authority)
        if not bracketed:
            raise HostError(f"{address!r}: unbalanced brackets")
        return [Endpoint(bracketed.group(1), _port(bracketed.group(2), address))]
    if authority.count(":") == 1:
        host, _, port = authority.partition(":")
        return [Endpoint(host, _port(port, address))]
    if authority.count(":") == 0:
        return [Endpoint(authority, None)]
    readings = []
    if _is_ipv6(authority):
        readings.append(Endpoint(authority, None))
    host, _, port = authority.rpartition(":")
    if port.isdigit() and _is_ipv6(host):
        readings.append(Endpoint(host, _port(port, address)))
    if not readings:
        raise HostError(f"{address!r}: neither host:port nor an IPv6 address")
    return readings


def _port(text: str | None, address: str) -> int | None:
    if not text:
        return None
    if not text.isdigit() or int(text) > MAX_PORT:
        raise HostError(f"{address!r}: port {text} is not a port")
    return int(text)


def _is_ipv6(text: str) -> bool:
    try:
        _ipv6_readings(text)
    except HostError:
        return False
    return True


# --- IP literals ---------------------------------------------------------------------------------


def _combine(parts: list[int]) -> int | None:
    """BSD's 1 to 4 part forms: a, a.b (8.24 bits), a.b.c (8.8.16), a.b.c.d."""
    *head, last = parts
    if any(p > 0xFF for p in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    value = 0
    for p in head:
        value = value << 8 | p
    return value << (8 * (4 - len(head))) | last


def _c_number(part: str) -> int | None:
    if part[:2].lower() == "0x":
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part[0] == "0":
        return int(part, 8) if re.fullmatch(r"[0-7]+", part) else None
    return int(part)


def ipv4_readings(text: str) -> frozenset[IPv4Address] | None:
    """Every IPv4 address ``text`` is to inet_aton (C numbers) or to Java (decimal parts);
    None when it is not written as 1 to 4 numbers, an empty set when no reader accepts it."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4 or not all(_NUMBER.match(p) for p in parts):
        return None
    found = set()
    as_c = [_c_number(p) for p in parts]
    if None not in as_c:
        found.add(_combine(as_c))  # type: ignore[arg-type]
    if all(p.isdigit() for p in parts):
        found.add(_combine([int(p) for p in parts]))
    return frozenset(IPv4Address(v) for v in found if v is not None)


def _ipv6_readings(text: str) -> frozenset[IPv6Address]:
    """An IPv6 literal (zone id allowed), with a dotted tail read as ipv4_readings reads it."""
    address, percent, zone = text.partition("%")
    if percent and not _ZONE.match(zone):
        raise HostError(f"{text!r}: not a zone id")
    head, colon, tail = address.rpartition(":")
    tails = [tail]
    if colon and "." in tail:
        v4 = ipv4_readings(tail)
        if not v4:
            raise HostError(f"{text!r}: not an IPv4 tail")
        tails = [str(a) for a in v4]
    try:
        return frozenset(IPv6Address(f"{head}{colon}{t}") for t in tails)
    except ValueError:
        raise HostError(f"{text!r}: not an IPv6 address") from None


_NAT64_LENGTHS = (32, 40, 48, 56, 64, 96)  # RFC 6052: where the IPv4 address sits


def _rfc6052(value: int, length: int) -> IPv4Address:
    bits = f"{value:0128b}"
    if length == 96:
        return IPv4Address(value & 0xFFFF_FFFF)
    payload = (bits[:64] + bits[72:])[length : length + 32]  # bits 64-71 are always zero
    return IPv4Address(int(payload, 2))


def carried_ipv4(address: IPv6Address) -> frozenset[IPv4Address]:
    """IPv4 addresses an IPv6 address stands for: mapped ::ffff:a.b.c.d, compatible ::a.b.c.d,
    translated ::ffff:0:a.b.c.d, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4, Teredo, ISATAP."""
    value = int(address)
    found: set[IPv4Address] = set()
    if value >> 32 in (0, 0xFFFF, 0xFFFF_0000):
        found.add(IPv4Address(value & 0xFFFF_FFFF))
    if address in IPv6Network("64:ff9b::/96"):
        found.add(IPv4Address(value & 0xFFFF_FFFF))
    if address in IPv6Network("64:ff9b:1::/48"):
        found.update(_rfc6052(value, n) for n in _NAT64_LENGTHS if n >= 48)
    if address.sixtofour is not None:
        found.add(address.sixtofour)
    if address.teredo is not None:
        found.update(address.teredo)
    if (value >> 32) & 0xFDFF_FFFF == 0x0000_5EFE:
        found.add(IPv4Address(value & 0xFFFF_FFFF))
    return frozenset(found)


# --- names ---------------------------------------------------------------------------------------


def _spelled(labels: list[str]) -> frozenset[IP]:
    """Addresses a name's labels spell, which wildcard DNS (nip.io, sslip.io) and the cluster's
    pod records (a-b-c-d.<ns>.pod.cluster.local) resolve to."""
    found: set[IP] = set()
    for i in range(len(labels) - 3):
        if all(_DECIMAL_OCTET.match(p) for p in labels[i : i + 4]):
            found.add(IPv4Address(".".join(labels[i : i + 4])))
    for label in labels:
        dashed = label.split("-")
        for i in range(len(dashed) - 3):
            if all(_DECIMAL_OCTET.match(p) for p in dashed[i : i + 4]):
                found.add(IPv4Address(".".join(dashed[i : i + 4])))
        found.update(IPv4Address(int(p, 16)) for p in dashed if _HEX8.match(p))
        if "-" in label:
            try:
                found.add(IPv6Address(label.replace("-", ":")))
            except ValueError:
                pass
    for address in list(found):
        if isinstance(address, IPv6Address):
            found.update(carried_ipv4(address))
    return frozenset(found)


def _name(text: str, written: str) -> Host:
    if len(text) > 253:
        raise HostError(f"{written!r}: a name longer than 253 characters")
    labels = text.lower().split(".")
    for label in labels:
        if not _LABEL.match(label):
            raise HostError(f"{written!r}: {label!r} is not a DNS label")
        if label.startswith("xn--"):
            try:
                label.encode("ascii").decode("idna")
            except UnicodeError:
                raise HostError(f"{written!r}: {label!r} is not valid punycode") from None
    name = ".".join(labels)
    return Host(name, name=name, carried=_spelled(labels))


def parse_host(written: str) -> Host:
    """What a host (no port, no brackets) means; HostError when it is neither a DNS name nor an
    IP literal: '@', '%' outside an IPv6 zone id, whitespace, backslashes, non-ASCII, empty labels."""
    text = written[:-1] if written.endswith(".") else written
    if not text:
        raise HostError(f"{written!r}: an empty host")
    if ":" in text:
        v6 = _ipv6_readings(text)
        carried = frozenset(a for address in v6 for a in carried_ipv4(address))
        return Host(str(min(v6)), addresses=frozenset(v6), carried=carried)
    if not _NAME_CHARS.match(text):
        raise HostError(f"{written!r}: neither a DNS name nor an IP address")
    v4 = ipv4_readings(text)
    if v4 is not None:
        if not v4:
            raise HostError(f"{written!r}: written as an IP address but not one")
        shown = ", ".join(sorted(str(a) for a in v4))
        return Host(text if shown == text else f"{text} ({shown})", addresses=frozenset(v4))
    return _name(text, written)


def parse(address: str) -> list[Host]:
    """Every reading of the host of ``address``."""
    return [parse_host(endpoint.host) for endpoint in split(address)]


# --- what the policy lists -------------------------------------------------------------------------


@dataclass(frozen=True)
class Patterns:
    """A policy's list of hosts: networks (CIDR or address), names (the name and its
    subdomains), domains (``*.example.com`` or ``.example.com``: subdomains only), prefixes
    of names (``name*``, as older policies wrote them), or ``*`` for every host."""

    entries: tuple[tuple[str, Network | NamePattern | str], ...]  # (as written, Network | NamePattern | "*")


def _network(text: str) -> Network | None:
    try:
        if "/" in text:
            return ip_network(text, strict=False)
        return ip_network(ip_address(text.split("%")[0]))
    except ValueError:
        return None


def _legacy_prefix(prefix: str) -> Network | None:
    """``169.254.*``: the octets before the star are a network."""
    octets = prefix.rstrip(".").split(".")
    if prefix.endswith(".") and 1 <= len(octets) <= 3 and all(_DECIMAL_OCTET.match(o) for o in octets):
        return IPv4Network(f"{'.'.join(octets + ['0'] * (4 - len(octets)))}/{8 * len(octets)}")
    return None


def compile_patterns(entries: Iterable[str], namespace: str | None = None) -> Patterns:
    """ValueError names an entry that is none of the forms ``Patterns`` takes."""
    out: list[tuple[str, Network | NamePattern | str]] = []
    for written in entries:
        text = written.strip().lower()
        if namespace is not None:
            text = text.replace("${namespace}", namespace)
        network = _network(text)
        if text == "*":
            out.append((written, "*"))
        elif network is not None:
            out.append((written, network))
        elif text.endswith("*") and not text.startswith(("*", ".")):
            legacy = _legacy_prefix(text[:-1])
            out.append((written, legacy if legacy is not None else ("prefix", text[:-1])))
        else:
            kind, name = ("domain", text.lstrip("*").lstrip(".")) if text.startswith(("*.", ".")) else ("name", text)
            checkable = name.replace("${namespace}", "ns")
            try:
                if parse_host(checkable).name is None:
                    raise HostError(checkable)
            except HostError:
                raise ValueError(f"{written!r} is not a CIDR, an address, a name or *.domain") from None
            out.append((written, (kind, name.rstrip("."))))
    return Patterns(tuple(out))


def _name_matches(name: str, kind: str, pattern: str, search: bool) -> bool:
    if kind == "prefix":
        return name.startswith(pattern)
    below = name.endswith("." + pattern)
    if kind == "domain":
        return below
    # a single label is also what the resolver's search domains complete (instance-data.ec2.internal)
    return name == pattern or below or (search and "." not in pattern and name.split(".")[0] == pattern)


def denied_by(host: Host, patterns: Patterns) -> Iterator[tuple[str, str]]:
    """(entry, what matched it) for every entry ``host`` falls under; addresses carried or
    spelled count, and a single-label name also as the first label of a longer one."""
    for written, entry in patterns.entries:
        if entry == "*":
            yield written, host.text
        elif isinstance(entry, (IPv4Network, IPv6Network)):
            hit = next((a for a in sorted(host.every_address(), key=str) if a.version == entry.version and a in entry), None)
            if hit is not None:
                yield written, str(hit)
        elif isinstance(entry, tuple):
            kind, pattern = entry
            if host.name is not None and _name_matches(host.name, kind, pattern, search=True):
                yield written, host.name
            elif kind == "prefix":
                texts = sorted({t for a in host.every_address() for t in (str(a), a.exploded)})
                spelled = next((t for t in texts if t.startswith(pattern)), None)
                if spelled is not None:
                    yield written, spelled


def allowed(host: Host, patterns: Patterns) -> bool:
    """Every address of an IP literal (an IPv6 one may be listed as the IPv4 address it maps)
    is in a listed network; a name is listed, or below a listed domain."""
    if any(entry == "*" for _, entry in patterns.entries):
        return True
    networks = [e for _, e in patterns.entries if isinstance(e, (IPv4Network, IPv6Network))]
    if host.name is not None:
        return any(_name_matches(host.name, *e, search=False) for _, e in patterns.entries if isinstance(e, tuple))

    def listed(address: IP) -> bool:
        forms = [address]
        if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
            forms.append(address.ipv4_mapped)
        return any(f.version == n.version and f in n for f in forms for n in networks)

    return bool(host.addresses) and all(listed(a) for a in host.addresses)
