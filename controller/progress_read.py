"""Observing a running driver's progress: from its endpoint, else from its log (I/O).

The channel (docs/architecture.md, "The progress channel"): the driver serves its newest record on
the container port named ``progress`` (app.monitoring.endpoint), and the operator reads it from the
pod's IP. Neither the API server nor the kubelet is in the path, so a read costs one small HTTP
exchange with the pod; and the answer is the newest record whatever the job printed since, where a
log tail of PROGRESS_LOG_LINES hides it behind a burst of output.

What a driver answers is the tenant's, so it is read as hostile: at most MAX_PROGRESS_BYTES, within
READ_TIMEOUT_S, and anything that is not a progress record is *refused* (a condition on that query
alone, controller.decide.health), never parsed further. A driver that declares no progress port
(made before the channel, or by Spark's operator) or that cannot be reached (a NetworkPolicy without
the operator's rule) is read from its log tail, as before; the metric ``streamq_progress_reads``
counts each read by channel and result.
"""

from __future__ import annotations

import http.client
import ipaddress
import logging
import math
import zlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kubernetes.client.exceptions import ApiException

from contract import MAX_PROGRESS_BYTES, PROGRESS_PATH
from contract.progress import ProgressRecord
from controller import names
from controller.kube import Kube, api_message
from controller.observe import Driver
from controller.progress import last_progress
from controller.status import QueryStatus

PROGRESS_LOG_LINES = 200  # the log channel's tail
READ_TIMEOUT_S = 2.0  # connect and read, each: a driver that does not answer in time is read from its log


Log = logging.Logger | logging.LoggerAdapter[Any]


class Channel(StrEnum):
    ENDPOINT = "endpoint"
    LOG = "log"  # a driver with no progress port
    LOG_FALLBACK = "log-fallback"  # a driver whose progress port did not answer


class ReadResult(StrEnum):
    OK = "ok"
    NONE = "none"  # nothing yet (204 before the first record), no record in the tail, no log
    REFUSED = "refused"  # an answer that is not a progress record: too large, not JSON, not the schema


@dataclass(frozen=True)
class ProgressRead:
    record: ProgressRecord | None = None
    channel: Channel = Channel.ENDPOINT
    result: ReadResult = ReadResult.NONE
    refused: str | None = None  # why the driver's answer was refused (for the condition; never its content)


def next_read(now: float, interval_s: float, query: str) -> float:
    """When to read a query's progress next: on its own phase of the interval (a hash of its name), so that
    2,000 queries started together, or an operator that restarts, do not all fall due in the same second."""
    phase = (zlib.crc32(query.encode()) % 10_000) / 10_000 * interval_s
    due = phase + (math.floor((now - phase) / interval_s) + 1) * interval_s
    return due if due - now > interval_s * 1e-6 else due + interval_s  # now on its phase: the next one


class Refused(Exception):
    """The driver answered something that is not a progress record."""


def fetch(address: str, port: int, timeout_s: float = READ_TIMEOUT_S) -> ProgressRecord | None:
    """The record a driver serves at ``address:port``; None before its first. Raises OSError when it does
    not answer, Refused when what it answers is not a record."""
    host = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    connection = http.client.HTTPConnection(host.strip("[]"), port, timeout=timeout_s)
    try:
        connection.request("GET", PROGRESS_PATH, headers={"Host": f"{host}:{port}"})
        response = connection.getresponse()
        if response.status == 204:
            return None
        if response.status != 200:
            raise Refused(f"the driver's progress endpoint answered HTTP {response.status}")
        body = response.read(MAX_PROGRESS_BYTES + 1)
    except http.client.HTTPException as exc:  # a malformed answer (bad status line, headers...): the driver's
        raise Refused(f"the driver's progress endpoint answered no valid HTTP ({type(exc).__name__})") from exc
    finally:
        connection.close()
    if len(body) > MAX_PROGRESS_BYTES:
        raise Refused(f"the driver's progress record is larger than {MAX_PROGRESS_BYTES // 1024} KiB")
    try:
        text = body.decode()
    except UnicodeDecodeError as exc:
        raise Refused("the driver's progress record is not UTF-8 text") from exc
    record = ProgressRecord.from_line(text)
    if record is None:
        raise Refused(f"the driver answered {len(body)} bytes that are not a progress record (JSON of the schema)")
    return record


def read_progress(kube: Kube, namespace: str, status: QueryStatus, drivers: tuple[Driver, ...],
                  log: Log) -> ProgressRead:  # fmt: skip
    """The current driver's newest record, by the channel its pod offers."""
    if not status.driver:
        return ProgressRead()
    current = next((d for d in drivers if d.name == status.driver and d.kind == "Pod"), None)
    if current is not None and current.pod_ip and current.progress_port:
        try:
            record = fetch(current.pod_ip, current.progress_port)
        except Refused as exc:
            return ProgressRead(channel=Channel.ENDPOINT, result=ReadResult.REFUSED, refused=str(exc))
        except (OSError, ValueError) as exc:  # refused, reset, timed out, no route: the log still has it
            log.debug("progress endpoint of %s does not answer (%s): reading its log", current.name, exc)
            return _from_log(kube, namespace, status, log, Channel.LOG_FALLBACK)
        return ProgressRead(record.for_status() if record else None, Channel.ENDPOINT,
                            ReadResult.OK if record else ReadResult.NONE)  # fmt: skip
    return _from_log(kube, namespace, status, log, Channel.LOG)


def _from_log(kube: Kube, namespace: str, status: QueryStatus, log: Log, channel: Channel) -> ProgressRead:
    assert status.driver is not None
    pod = status.driver if status.driver_kind == "Pod" else names.spark_app_driver_pod_name(status.driver)
    container = names.DRIVER_CONTAINER if status.driver_kind == "Pod" else names.SPARK_APP_DRIVER_CONTAINER
    try:
        text = kube.read_pod_log(namespace, pod, container, PROGRESS_LOG_LINES)
    except ApiException as exc:  # no kubelet yet, or the pod just went: progress is best effort
        log.debug("no progress from %s: %s", pod, api_message(exc))
        return ProgressRead(channel=channel)
    record = last_progress(text)
    return ProgressRead(record, channel, ReadResult.OK if record else ReadResult.NONE)
