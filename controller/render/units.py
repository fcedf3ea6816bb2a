"""Kubernetes quantities as Spark and the JVM read them (pure)."""

from __future__ import annotations

import math
from decimal import Decimal

from kubernetes.utils import parse_quantity  # a pure parser: nothing of the API client


def mebibytes(quantity: str) -> int:
    """A Kubernetes memory quantity in MiB (rounded up, at least 1)."""
    size: Decimal = parse_quantity(quantity)
    return max(1, math.ceil(size / 2**20))


def spark_memory(quantity: str) -> str:
    """Spark reads "1024m", not "1Gi"."""
    return f"{mebibytes(quantity)}m"


def driver_heap(quantity: str) -> str:
    """The JVM heap of a driver pod limited to `quantity`: room is left for Python and off-heap."""
    return f"{max(256, int(mebibytes(quantity) * 0.6))}m"
