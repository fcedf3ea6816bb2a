"""Holding the driver Lease of a standby query (timings and the safety argument: contract.lease).

``Candidate`` and ``Holder`` decide (pure: Lease records and monotonic times in);
``DriverLease`` reads and writes the Lease with the Kubernetes API and keeps it
renewed on a thread. The job waits in ``acquire`` with its SparkSession already
started (the standby), runs its query only while it holds the Lease, and stops
it, then exits, when it cannot renew in time: a driver cut off from the API
server fences itself.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import Field

from contract.environment import EnvSettings
from contract.lease import (
    DURATION_S,
    FENCE_GRACE_S,
    LEASE_ENV,
    POD_NAME_ENV,
    POD_NAMESPACE_ENV,
    POLL_EVERY_S,
    RENEW_DEADLINE_S,
    RENEW_EVERY_S,
)

log = logging.getLogger("streamq.lease")
REQUEST_TIMEOUT_S = 2.0  # a renew that takes longer is as good as lost: the next try comes in a second


@dataclass(frozen=True)
class Record:
    holder: str | None
    renew_time: str | None  # compared for change only, never as a clock (clocks of two machines differ)
    transitions: int = 0
    version: str | None = None  # resourceVersion: every write is conditional on it
    # The Lease's labels and owner (the operator makes it, owned by the StreamingQuery): a write
    # replaces the whole object, so it carries them, or the Lease would outlive its query.
    kept: dict | None = field(default=None, compare=False)


class Candidate:
    """When a waiting driver may take the Lease: it is free, released, or unchanged for ``duration_s``."""

    def __init__(self, me: str, duration_s: float = DURATION_S):
        self.me, self.duration_s = me, duration_s
        self._seen: tuple[str | None, str | None] | None = None
        self._seen_at = 0.0

    def decide(self, record: Record | None, now: float) -> str:
        """``create``, ``take``, ``mine`` or ``wait``."""
        if record is None:
            return "create"
        if record.holder == self.me:
            return "mine"
        if not record.holder:
            return "take"  # released by a driver that stopped cleanly, or by the operator for a dead one
        key = (record.holder, record.renew_time)
        if key != self._seen:  # renewed (or a new holder) since the last look: the wait starts again
            self._seen, self._seen_at = key, now
            return "wait"
        return "take" if now - self._seen_at >= self.duration_s else "wait"

    def expires_in(self, now: float) -> float:
        return max(0.0, self._seen_at + self.duration_s - now) if self._seen is not None else self.duration_s


class Holder:
    """The holder's deadline, from the moment its last successful renew was *sent*."""

    def __init__(self, sent_at: float, renew_deadline_s: float = RENEW_DEADLINE_S):
        self.last_sent, self.renew_deadline_s = sent_at, renew_deadline_s

    def renewed(self, sent_at: float) -> None:
        self.last_sent = max(self.last_sent, sent_at)

    @property
    def deadline(self) -> float:
        """When the holder must have stopped writing, on its own monotonic clock."""
        return self.last_sent + self.renew_deadline_s

    def expired(self, now: float) -> bool:
        return now >= self.deadline


class LeaseSettings(EnvSettings):
    """The variables the operator sets on a standby query's driver pod (``DriverLease.from_env``)."""

    lease: str | None = Field(None, validation_alias=LEASE_ENV)  # unset or empty: not a standby query
    pod_namespace: str = Field("default", validation_alias=POD_NAMESPACE_ENV)
    pod_name: str | None = Field(None, validation_alias=POD_NAME_ENV)  # unset or empty: streamq-<pid>


def _now_micro() -> datetime:
    return datetime.now(UTC)


class DriverLease:
    """The Lease ``name`` in ``namespace``, for the pod ``me``."""

    def __init__(self, name: str, namespace: str, me: str, api=None, clock: Callable[[], float] = time.monotonic,
                 exit_hard: Callable[[int], None] = os._exit):  # fmt: skip
        self.name, self.namespace, self.me = name, namespace, me
        self._api = api
        self.clock = clock
        self.exit_hard = exit_hard
        self.holder: Holder | None = None
        self.lost = threading.Event()
        self.lost_reason = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._looking: Candidate | None = None
        self._written: Record | None = None  # the Lease as this pod's last write left it (renewed on it)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DriverLease | None:
        """The lease the operator named on a standby query's driver pod; None for every other run."""
        found = LeaseSettings.from_env(env)
        if not found.lease:
            return None
        return cls(found.lease, found.pod_namespace, found.pod_name or f"streamq-{os.getpid()}")

    @property
    def api(self):
        if self._api is None:
            from kubernetes import client, config

            settings = client.Configuration()
            try:
                config.load_incluster_config(client_configuration=settings)
            except config.ConfigException:  # outside a pod (tests, a driver run by hand): KUBECONFIG
                config.load_kube_config(client_configuration=settings)
            self._api = self.client_for(settings)
        return self._api

    @staticmethod
    def client_for(settings):
        """The Lease API on ``settings`` (a kubernetes ``Configuration``), without retries inside a call:
        urllib3's default three, each REQUEST_TIMEOUT_S, turned one renew on a slow API server into 6 s
        (kind, one loaded node). The renew loop is the retry, and it knows the deadline."""
        from kubernetes import client

        settings.retries = False
        return client.CoordinationV1Api(client.ApiClient(settings))

    # --- reading and writing the Lease ------------------------------------------------

    def read(self) -> Record | None:
        from kubernetes.client.exceptions import ApiException

        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return self._record(lease)

    def _record(self, lease) -> Record:
        spec = lease.spec
        renew = spec.renew_time.isoformat() if spec.renew_time is not None else None
        return Record(spec.holder_identity, renew, spec.lease_transitions or 0, lease.metadata.resource_version,
                      self._kept(lease.metadata))  # fmt: skip

    def _kept(self, meta) -> dict:
        kept: dict = {}
        if getattr(meta, "labels", None):
            kept["labels"] = dict(meta.labels)
        if getattr(meta, "owner_references", None):
            kept["ownerReferences"] = self.api.api_client.sanitize_for_serialization(meta.owner_references)
        return kept

    def _body(self, record: Record | None, transitions: int, holder: str | None, acquired: bool) -> dict:
        now = _now_micro()
        spec = {"holderIdentity": holder, "leaseDurationSeconds": int(DURATION_S), "leaseTransitions": transitions,
                "renewTime": now.isoformat()}  # fmt: skip
        if acquired:
            spec["acquireTime"] = now.isoformat()
        meta = {**((record.kept or {}) if record is not None else {}), "name": self.name, "namespace": self.namespace}
        if record is not None:
            meta["resourceVersion"] = record.version  # the write fails (409) if anyone wrote in between
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    def _write(self, record: Record | None, holder: str | None, acquired: bool) -> Record | None:
        """Create or replace; the Lease as written, or None when someone else wrote first (409, 404)."""
        from kubernetes.client.exceptions import ApiException

        transitions = (record.transitions if record else 0) + (1 if acquired and record is not None else 0)
        body = self._body(record, transitions, holder, acquired)
        try:
            if record is None:
                written = self.api.create_namespaced_lease(self.namespace, body, _request_timeout=REQUEST_TIMEOUT_S)
            else:
                written = self.api.replace_namespaced_lease(self.name, self.namespace, body,
                                                            _request_timeout=REQUEST_TIMEOUT_S)  # fmt: skip
            return self._record(written)
        except ApiException as exc:
            if exc.status in (409, 404):  # lost a race: look again
                return None
            raise

    # --- the candidate ----------------------------------------------------------------

    def could_take(self) -> bool:
        """Whether acquire() would get the Lease now (none yet, released, or expired on this pod's
        clock): a standby stops warming up at once then. An unreadable Lease says no."""
        self._looking = self._looking or Candidate(self.me)
        try:
            return self._looking.decide(self.read(), self.clock()) != "wait"
        except Exception:  # noqa: BLE001 - acquire() reports it
            return False

    def acquire(self, stop: threading.Event, on_wait: Callable[[Record, float], None] | None = None) -> bool:
        """Block until this pod holds the Lease (True) or ``stop`` is set (False)."""
        candidate = self._looking = self._looking or Candidate(self.me)  # what could_take() saw counts
        said = 0.0
        while not stop.is_set():
            sent = self.clock()
            try:
                record = self.read()
                verdict = candidate.decide(record, self.clock())
                written = self._write(record, self.me, acquired=verdict != "mine") if verdict != "wait" else None
                if written is not None:
                    self.holder, self._written = Holder(sent), written
                    log.info("holding lease %s/%s (%s)", self.namespace, self.name,
                             "created" if verdict == "create" else "taken over" if verdict == "take" else "already ours")  # fmt: skip
                    return True
                if record is not None and on_wait is not None and self.clock() - said >= 5.0:
                    said = self.clock()
                    on_wait(record, candidate.expires_in(self.clock()))
            except Exception as exc:  # noqa: BLE001 - the API server away, or an answer we cannot read: keep waiting; nobody else can take it meanwhile either
                log.warning("lease %s: %s", self.name, exc)
            stop.wait(POLL_EVERY_S)
        return False

    # --- the holder -------------------------------------------------------------------

    def keep(self, on_lost: Callable[[str], None], code: int,
             on_renewed: Callable[[float], None] | None = None) -> None:  # fmt: skip
        """Renew on a thread. Past the deadline: ``on_lost`` (stop the query), and ``code`` as a hard
        exit FENCE_GRACE_S later if the process is still here. ``on_renewed`` gets the holder's
        deadline (time.monotonic) now and after each renewal: the write fence (app.driver.write_fence)."""
        renewed = on_renewed or (lambda deadline: None)
        renewed(self.holder.deadline)

        def run() -> None:
            # A renew is one conditional write on the resourceVersion of our own last write; only when
            # that fails (409: someone else wrote) is the Lease read, to see who holds it. A try starts
            # RENEW_EVERY_S after the last one started: a try that timed out is followed at once.
            sent = self.clock()
            while not self._stop.wait(max(0.0, sent + RENEW_EVERY_S - self.clock())):
                sent = self.clock()
                try:
                    written = self._write(self._written, self.me, acquired=False) if self._written else None
                    if written is None:  # our view was stale (409), or none: who holds it now?
                        record = self.read()
                        if record is None or record.holder != self.me:
                            self._lose(f"the lease is held by {record.holder if record else 'nobody'} now", on_lost, code)
                            return
                        written = self._write(record, self.me, acquired=False)
                    self._written = written
                    if written is not None:
                        self.holder.renewed(sent)
                        renewed(self.holder.deadline)
                except Exception as exc:  # noqa: BLE001 - this thread must live to see the deadline pass and fence the query
                    log.warning("lease %s: renew failed: %s", self.name, exc)
                if self.holder.expired(self.clock()):
                    self._lose(f"not renewed for {RENEW_DEADLINE_S:g}s (the API server unreachable?)", on_lost, code)
                    return

        self._thread = threading.Thread(target=run, name="streamq-lease", daemon=True)
        self._thread.start()

    def _lose(self, reason: str, on_lost: Callable[[str], None], code: int) -> None:
        self.lost_reason = f"lost lease {self.name}: {reason}; stopping the query"
        log.error("%s", self.lost_reason)
        self.lost.set()
        on_lost(self.lost_reason)
        # Whatever the query's stop does, this process writes nothing after the grace.
        timer = threading.Timer(FENCE_GRACE_S, self.exit_hard, args=(code,))
        timer.daemon = True
        timer.start()

    def release(self) -> None:
        """After a clean stop: free the Lease so the standby takes over at once."""
        self._stop.set()
        try:
            record = self.read()
            if record is not None and record.holder == self.me:
                self._write(record, None, acquired=False)
                log.info("released lease %s", self.name)
        except Exception as exc:  # noqa: BLE001 - a clean stop goes on whatever failed: the Lease expires by itself
            log.warning("lease %s: release failed: %s", self.name, exc)
