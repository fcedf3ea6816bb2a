"""What `streamq validate` reads: the StreamingQuery documents in files and directories.

A CI job runs it over a folder of manifests (`streamq validate manifests/`), where a
StreamingQuery sits beside a Namespace, a Kustomization, a ServiceAccount, several to a file.
So directories are searched, every document of a multi-document file is one candidate, and
what is not a StreamingQuery is skipped with a reason rather than reported as invalid.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from contract.names import GROUP, KIND

SUFFIXES = (".yaml", ".yml", ".json")
_MENTIONS_KIND = re.compile(rf"\bkind\W+{KIND}\b")
# A mapping without kind and apiVersion is a bare spec (what `streamq run` takes) when it sets one of these.
SPEC_KEYS = frozenset({"source", "sink", "trigger", "checkpoint", "transforms"})


@dataclass(frozen=True)
class Document:
    label: str  # the file, or "file#n" for the n-th document (from 1) of a file that holds several
    path: Path
    data: Any


@dataclass(frozen=True)
class Skipped:
    label: str
    reason: str


@dataclass(frozen=True)
class Unreadable:
    path: Path
    message: str
    # True: read, but not YAML (it may be a StreamingQuery: counted as an invalid one); False: no input at
    # all (a path that does not exist or cannot be read).
    broken: bool


def files(paths: list[Path]) -> Iterator[tuple[Path, bool] | Unreadable]:
    """Each file named (True: named), and each *.yaml/*.yml/*.json below each directory named (sorted,
    hidden ones left out)."""
    for path in paths:
        if path.is_dir():
            yield from ((p, False) for p in sorted(_below(path)))
        elif path.exists():
            yield path, True
        else:
            yield Unreadable(path, f"cannot read {path}: no such file or directory", broken=False)


def _below(folder: Path) -> Iterator[Path]:
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]  # .git, .venv: never walked into
        yield from (Path(root, n) for n in names if not n.startswith(".") and Path(n).suffix in SUFFIXES)


def documents(path: Path, named: bool = True) -> list[Document] | Skipped | Unreadable:
    """Every document of ``path``, in order; empty ones (a trailing ``---``) left out.

    A file that is not YAML is an invalid query when it was ``named`` or mentions the kind; found in a
    folder, it is skipped: a Helm chart's templates (``{{- if ... }}``) are no YAML, nor a query."""
    text = ""
    try:
        text = path.read_text()
        loaded = [d for d in yaml.safe_load_all(text) if d is not None]  # YAML is a superset of JSON
    except OSError as exc:
        return Unreadable(path, f"cannot read {path}: {exc.strerror}", broken=False)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        if named or _MENTIONS_KIND.search(text):
            return Unreadable(path, f"{path} is not valid YAML/JSON: {exc}", broken=True)
        return Skipped(str(path), "not a StreamingQuery (not YAML: a template?)")
    if len(loaded) == 1:
        return [Document(str(path), path, loaded[0])]
    return [Document(f"{path}#{n}", path, d) for n, d in enumerate(loaded, 1)]


def queries(document: Document) -> Iterator[Document | Skipped]:
    """The document itself when it is a StreamingQuery (or a bare spec), each item of a kind: List, else why not."""
    data = document.data
    if not isinstance(data, dict):
        yield Skipped(document.label, f"not a StreamingQuery (a {type(data).__name__}, not a mapping)")
        return
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if kind == "List" and isinstance(data.get("items"), list):  # what `kubectl get sq -o yaml` writes
        for n, item in enumerate(data["items"], 1):
            yield from queries(Document(f"{document.label} item {n}", document.path, item))
        return
    if kind is None and api_version is None:
        if SPEC_KEYS & set(data):
            yield document
        else:
            yield Skipped(document.label, "not a StreamingQuery (no kind, no spec fields)")
        return
    # Anything of streamq.io is checked (a wrong version or a missing kind is a mistake to report), and a
    # StreamingQuery without apiVersion; the same kind name of another API group is not ours.
    group = str(api_version).split("/", 1)[0] if api_version is not None else None
    if group == GROUP or (kind == KIND and group is None):
        yield document
        return
    yield Skipped(document.label, f"not a StreamingQuery (kind {kind}, apiVersion {api_version})")


def walk(paths: list[Path]) -> Iterator[Document | Skipped | Unreadable]:
    """Every candidate below ``paths``, in order: a query to check, a document skipped, a file not read."""
    for item in files(paths):
        if isinstance(item, Unreadable):
            yield item
            continue
        found = documents(*item)
        if isinstance(found, Skipped | Unreadable):
            yield found
            continue
        for document in found:
            yield from queries(document)
