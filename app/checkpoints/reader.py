"""Read a Structured Streaming checkpoint without Spark (pure Python).

Layout (Spark 4.x): ``metadata`` holds {"id": ...}; ``offsets/N`` is "v1", a
line of batch metadata (empty in continuous mode), then one JSON line per
source (Kafka: {"topic": {"partition": next_offset}}); ``commits/N`` marks
epoch/batch N as committed; ``state/<operator>/_metadata/metadata`` names each
stateful operator. Writers create hidden temp files and rename, so only plain
numeric names count; a file cut short (a crash, an object store without
atomic rename) is reported as a problem and the newest readable batch is used.

Local paths need nothing more. s3a:// (and s3://) locations are read with obstore's
S3 client (a dependency: botocore, under s3fs, pins python-dateutil<3 and the
kubernetes client needs >=3), with the store's endpoint, region and key pair from
``configure_s3`` (the job: the spec's checkpoint.s3 and its mounted Secret; the
CLI: flags and AWS_* environment variables). Other URIs (gs://, abfss://,
memory://) are read through fsspec when it and its driver are installed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from contract.checkpoint import (  # noqa: F401  (re-exported: the job's readers return these)
    CheckpointState,
    KafkaOffsets,
    StatefulOperator,
    local_path,
)


class CheckpointError(Exception):
    """The location cannot be read at all (no filesystem for its scheme)."""


# --- filesystems ------------------------------------------------------------------


class Files(Protocol):
    def list(self, path: str) -> dict[str, float | None] | None:
        """{name: mtime} of a directory's entries; None when it does not exist."""

    def read(self, path: str) -> str | None:
        """The text of a file; None when it cannot be read."""

    def join(self, *parts: str) -> str: ...


class LocalFiles:
    def list(self, path: str) -> dict[str, float | None] | None:
        try:
            with os.scandir(path) as entries:
                out: dict[str, float | None] = {}
                for entry in entries:
                    try:
                        out[entry.name] = entry.stat().st_mtime
                    except OSError:  # renamed or deleted while we looked
                        out[entry.name] = None
                return out
        except (FileNotFoundError, NotADirectoryError):
            return None

    def read(self, path: str) -> str | None:
        try:
            return Path(path).read_text(errors="replace")
        except OSError:
            return None

    def join(self, *parts: str) -> str:
        return os.path.join(*parts)


def _mtime(info: dict[str, Any]) -> float | None:
    """fsspec implementations name the time differently (mtime, LastModified, updated, created)."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


class FsspecFiles:
    def __init__(self, fs):
        self.fs = fs

    def list(self, path: str) -> dict[str, float | None] | None:
        try:
            entries = self.fs.ls(path, detail=True)
        except (FileNotFoundError, NotADirectoryError):
            return None
        out: dict[str, float | None] = {}
        for info in entries:
            name = str(info.get("name", "")).rstrip("/").rsplit("/", 1)[-1]
            if name:
                out[name] = _mtime(info)
        return out

    def read(self, path: str) -> str | None:
        try:
            return self.fs.cat_file(path).decode(errors="replace")
        except (OSError, ValueError):
            return None

    def join(self, *parts: str) -> str:
        return "/".join(p.rstrip("/") for p in parts)


@dataclass(frozen=True)
class S3Options:
    """Where an s3a:// checkpoint's store is and how to sign for it. Unset fields fall back to
    the AWS_* environment variables (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID...)."""

    endpoint: str | None = None
    region: str | None = None
    path_style: bool | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, s3: Any, key_pair: tuple[str, str] | None = None) -> S3Options:
        """From a spec's checkpoint.s3 block (None: the environment only) and the key pair read from its Secret."""
        if s3 is None:
            return cls()
        key_id, secret = key_pair or (None, None)
        return cls(s3.endpoint, s3.region, s3.path_style_access, key_id, secret)

    def config(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(obstore S3Config, ClientConfig)."""
        config: dict[str, Any] = {}
        endpoint = self.endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if self.endpoint:
            config["endpoint"] = self.endpoint if "://" in self.endpoint else f"https://{self.endpoint}"
        if self.region:
            config["region"] = self.region
        if self.path_style is not None:
            config["virtual_hosted_style_request"] = not self.path_style
        if self.access_key_id and self.secret_access_key:
            config["access_key_id"] = self.access_key_id
            config["secret_access_key"] = self.secret_access_key
        client = {"allow_http": True} if (endpoint or "").startswith("http://") else {}
        return config, client


_s3_options = S3Options()


def configure_s3(options: S3Options) -> None:
    """The store settings every later s3a:// read of this process uses."""
    global _s3_options
    _s3_options = options


class S3Files:
    """s3a://bucket/path through obstore: a listing is one LIST with a delimiter (names and
    LastModified), a read one GET. No listing cache: the watchdog re-reads the same prefixes."""

    def __init__(self, bucket: str, options: S3Options):
        from obstore.store import S3Store

        config, client = options.config()
        self.bucket = bucket
        self.store = S3Store(bucket, config=config, client_options=client)

    def _fail(self, what: str, exc: Exception) -> CheckpointError:
        return CheckpointError(f"s3a://{self.bucket}/{what}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")

    def list(self, path: str) -> dict[str, float | None] | None:
        from obstore.exceptions import BaseError, NotFoundError

        prefix = path.strip("/")
        try:
            result = self.store.list_with_delimiter(prefix or None)
        except (NotFoundError, FileNotFoundError):  # obstore raises either, by version and call
            return None
        except (BaseError, OSError, ValueError) as exc:  # unreachable endpoint, refused credentials, no such bucket
            raise self._fail(prefix, exc) from None
        out: dict[str, float | None] = {}
        for obj in result["objects"]:
            name = obj["path"].rstrip("/").rsplit("/", 1)[-1]
            modified = obj.get("last_modified")
            out[name] = modified.timestamp() if isinstance(modified, datetime) else None
        for common in result["common_prefixes"]:
            out[common.rstrip("/").rsplit("/", 1)[-1]] = None
        return out or None  # an object store has no empty directories

    def read(self, path: str) -> str | None:
        from obstore.exceptions import BaseError, NotFoundError

        try:
            return bytes(self.store.get(path.strip("/")).bytes()).decode(errors="replace")
        except (NotFoundError, FileNotFoundError):  # obstore raises either, by version and call
            return None
        except (BaseError, OSError, ValueError) as exc:  # obstore's own, and the built-ins it raises by version and call
            raise self._fail(path.strip("/"), exc) from None

    def join(self, *parts: str) -> str:
        return "/".join(p.strip("/") for p in parts if p.strip("/"))


def unwritable(location: str | os.PathLike) -> str | None:
    """Why this process cannot write a local checkpoint location, or None when it can
    (or the location is remote: Spark finds out itself). Checked before Spark starts,
    because Spark's own error for it is an IOException deep in a stack trace."""
    path = local_path(location)
    if path is None:
        return None
    existing = Path(path)
    try:
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if os.access(existing, os.W_OK | os.X_OK) and existing.is_dir():
            return None
        info = existing.stat()
    except PermissionError as exc:  # an ancestor this user may not even look into
        return f"cannot write checkpoint {path}: {exc.strerror}: {exc.filename} (this job runs as uid {os.getuid()})"
    what = "directory" if existing.is_dir() else "file (not a directory)"
    hint = (
        "a hostPath volume is created owned by root: create the directory owned by the driver's user, "
        "or use a PersistentVolumeClaim (fsGroup applies to it)"
        if existing.is_dir()
        else "point checkpoint.location at a directory"
    )
    return (
        f"cannot write checkpoint {path}: {what} {existing} is owned by uid {info.st_uid} with mode "
        f"{info.st_mode & 0o7777:04o} and this job runs as uid {os.getuid()}; {hint}"
    )


def open_location(location: str | os.PathLike) -> tuple[Files, str]:
    """The filesystem and the path in it for a checkpoint location."""
    path = local_path(location)
    if path is not None:
        return LocalFiles(), path
    text = str(location)
    parsed = urlparse(text)
    scheme = parsed.scheme
    if scheme in ("s3a", "s3"):
        if not parsed.netloc:
            raise CheckpointError(f"{text}: no bucket (use s3a://bucket/path)")
        try:
            from obstore.exceptions import BaseError as StoreError
        except ImportError:
            raise CheckpointError("reading s3a:// checkpoints needs obstore (a streamq dependency)") from None
        try:
            return S3Files(parsed.netloc, _s3_options), parsed.path.strip("/")
        except (StoreError, ValueError) as exc:  # obstore refuses the configuration itself
            raise CheckpointError(f"cannot open {text}: {exc}") from None
    try:
        import fsspec
    except ImportError:
        raise CheckpointError(
            f"reading {scheme}:// checkpoints needs fsspec and its {scheme} driver (pip install 'streamq[objectstore]')"
        ) from None
    try:
        fs, path = fsspec.core.url_to_fs(text)
    except (ImportError, ValueError) as exc:
        raise CheckpointError(f"cannot open {text}: {exc}") from None
    return FsspecFiles(fs), path


# --- reading ------------------------------------------------------------------------


def _batch_ids(listing: dict[str, float | None] | None) -> list[int]:
    return sorted(int(name) for name in (listing or {}) if name.isdigit())


def parse_offsets(text: str | None) -> list[Any] | None:
    """The per-source lines of an offsets file; None when it is not a complete offsets file."""
    if not text:
        return None
    lines = text.splitlines()
    if not lines or not lines[0].startswith("v") or len(lines) < 2:
        return None
    sources: list[Any] = []
    for line in lines[2:]:
        try:
            sources.append(json.loads(line) if line and line != "-" else None)
        except ValueError:
            sources.append(line)  # a source with a non-JSON offset format: keep it verbatim
    return sources


def _commit_ok(text: str | None) -> bool:
    return bool(text) and text.startswith("v") and "\n" in text


def _query_id(files: Files, root: str) -> tuple[str | None, str | None]:
    text = files.read(files.join(root, "metadata"))
    if text is None:
        return None, None  # Spark writes it when the query starts: absent is not a problem yet
    try:
        value = json.loads(text.splitlines()[0] if text.strip() else "")
        return (str(value["id"]), None) if isinstance(value, dict) and "id" in value else (None, "metadata has no query id")
    except (ValueError, IndexError):
        return None, "metadata is not readable JSON (a write cut short?)"


def _stateful_operators(files: Files, root: str) -> tuple[StatefulOperator, ...]:
    state = files.join(root, "state")
    found = []
    for op in _batch_ids(files.list(state)):
        name = partitions = None
        text = files.read(files.join(state, str(op), "_metadata", "metadata"))
        if text:
            try:
                meta = json.loads(text.splitlines()[1])
                name = meta.get("operatorInfo", {}).get("operatorName")
                stores = meta.get("stateStoreInfo") or []
                partitions = stores[0].get("numPartitions") if stores else None
            except (ValueError, IndexError, AttributeError):
                pass
        found.append(StatefulOperator(op, name, partitions))
    return tuple(found)


def read_checkpoint(location: str | os.PathLike, files: Files | None = None) -> CheckpointState:
    if files is None:
        files, root = open_location(location)
    else:
        root = str(location)
    top = files.list(root)
    if top is None:
        return CheckpointState(location=str(location), exists=False)
    problems: list[str] = []
    query_id, problem = _query_id(files, root)
    if problem:
        problems.append(problem)
    commit_listing = files.list(files.join(root, "commits"))
    offset_listing = files.list(files.join(root, "offsets")) or {}
    commits = _batch_ids(commit_listing)
    planned = _batch_ids(offset_listing)

    last = offsets = None
    for n, batch in enumerate(reversed(commits)):
        where = "the newest commit" if n == 0 else f"commit {batch}"
        if not _commit_ok(files.read(files.join(root, "commits", str(batch)))):
            problems.append(f"{where} (commits/{batch}) is empty or malformed")
            continue
        offsets = parse_offsets(files.read(files.join(root, "offsets", str(batch))))
        if offsets is None:
            problems.append(f"{where}'s offsets (offsets/{batch}) are missing or malformed")
            continue
        last = batch
        break

    newest = planned[-1] if planned else None
    marked = commits[-1] if commits else None  # the newest commit marker, readable or not
    in_flight = newest if newest is not None and (marked is None or newest > marked) else None
    in_flight_offsets = None
    if in_flight is not None:
        in_flight_offsets = parse_offsets(files.read(files.join(root, "offsets", str(in_flight))))
        if in_flight_offsets is None:  # being written right now, or cut short: Spark plans it again
            problems.append(f"in-flight offsets/{in_flight} are incomplete")
    newest_sources = in_flight_offsets if in_flight_offsets is not None else offsets
    return CheckpointState(
        location=str(location),
        exists=True,
        query_id=query_id,
        last_committed=last,
        committed_offsets=offsets or [],
        committed_at=(commit_listing or {}).get(str(last)) if last is not None else None,
        in_flight=in_flight,
        in_flight_offsets=in_flight_offsets or [],
        planned_at=offset_listing.get(str(in_flight)) if in_flight is not None else None,
        sources=len(newest_sources) if newest_sources is not None else None,
        stateful_operators=_stateful_operators(files, root),
        problems=tuple(problems),
    )
