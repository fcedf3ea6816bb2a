"""Checkpoint locations read the way the pod and Hadoop will read them (pure).

A path is compared with the policy's roots only after it is normalised: ``//opt``
is ``/opt`` to the kernel (POSIX keeps a leading ``//``, ``posixpath.normpath``
too), ``.`` and ``..`` are resolved, and a relative path has no place to be
compared with, so it is refused rather than guessed. A URI is split into its
scheme, bucket (authority) and key, with userinfo kept apart so it can be refused
(credentials in a location end up in annotations, status and logs).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_LEADING_SLASHES = re.compile(r"^/+")
AZURE_SCHEMES = ("abfs", "abfss", "wasb", "wasbs")  # their authority is container@account
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def is_uri(location: str) -> bool:
    return bool(_SCHEME.match(location))


def normalise_path(path: str) -> str | None:
    """The absolute path the kernel would use; None for a relative path."""
    if not path.startswith("/"):
        return None
    return _LEADING_SLASHES.sub("/", posixpath.normpath(path))


def under(path: str, root: str) -> bool:
    """``path`` is ``root`` or below it (both normalised)."""
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")


@dataclass(frozen=True)
class Location:
    """A checkpoint location: a local path (scheme "" or "file") or a remote URI."""

    scheme: str  # lower case; "" for a bare path
    bucket: str  # the URI's host (bucket, container@account, namenode); "" for paths
    path: str  # the key or path, normalised; None-like "" when relative
    userinfo: bool = False  # user[:password]@ before the host
    extras: bool = False  # a query string or fragment
    dot_segments: bool = False  # ".", ".." segments, %-escapes or backslashes in a remote key

    @property
    def local(self) -> bool:
        return self.scheme in ("", "file")


def parse(location: str) -> Location:
    if not is_uri(location):
        return Location("", "", normalise_path(location) or "")
    try:
        parts = urlsplit(location)
    except ValueError:  # unbalanced [ ]: no reader agrees on its host; refused as not a plain URI
        return Location(location.split(":", 1)[0].lower(), "", "", extras=True)
    scheme = parts.scheme.lower()
    netloc = parts.netloc
    before, at, after = netloc.rpartition("@")
    if scheme in AZURE_SCHEMES and at and ":" not in before:
        host, userinfo = netloc, False  # abfss://container@account...: the container, not a user
    else:
        host, userinfo = (after, True) if at else (netloc, False)
    raw = parts.path
    if scheme == "file":
        # file:/x and file:///x are local paths; file://host/x names another machine
        path = normalise_path(raw) or ""
        return Location(scheme, host, path, userinfo, bool(parts.query or parts.fragment))
    segments = [s for s in raw.split("/") if s]
    return Location(
        scheme,
        host,
        "/" + "/".join(segments),
        userinfo,
        bool(parts.query or parts.fragment),
        any(s in (".", "..") for s in segments) or "%" in raw or "\\" in raw,  # no encoded or Windows-style tricks
    )


def redacted(location: str) -> str:
    """The location with any userinfo removed, for messages."""
    if not is_uri(location):
        return location
    try:
        parts = urlsplit(location)
    except ValueError:
        return location.split("://", 1)[0] + "://***"  # unreadable: show nothing that might be a credential
    if "@" not in parts.netloc:
        return location
    return parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[-1]).geturl()
