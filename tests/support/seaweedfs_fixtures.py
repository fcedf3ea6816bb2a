"""Pytest fixtures for a real S3-compatible store (see testbed/seaweedfs.py).

* ``s3_store`` (session): one SeaweedFS server on 127.0.0.1 for the run, with one access key pair.
* ``s3_bucket`` (function): a new bucket on it, its name.

A missing ``weed`` binary makes them FAIL with a hint to run hack/install-seaweedfs.sh;
with STREAMQ_ALLOW_SKIP=1 they skip instead.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from testbed.seaweedfs import SeaweedS3, WeedMissing, weed_binary

_buckets = itertools.count()


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    try:
        weed = weed_binary()
    except WeedMissing as err:
        message = str(err)
        if os.environ.get("STREAMQ_ALLOW_SKIP") == "1":
            pytest.skip(f"{message} (skipped because STREAMQ_ALLOW_SKIP=1)")
        pytest.fail(message, pytrace=False)
    store = SeaweedS3(weed, tmp_path_factory.mktemp("seaweedfs")).start()
    try:
        yield store
    finally:
        store.stop()


@pytest.fixture
def s3_bucket(s3_store: SeaweedS3) -> str:
    return s3_store.create_bucket(f"streamq-{os.getpid()}-{next(_buckets)}")
