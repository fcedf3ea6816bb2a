"""The Lease that fences a query's drivers: what the job and the controller agree on.

A query with ``spec.runtime.standby`` runs two driver pods; exactly one of them runs
the query: the one that holds the Lease ``<query>-driver`` (coordination.k8s.io).
The timings make two writers on one checkpoint impossible, even when the holder
is cut off from the API server:

    the holder renews every RENEW_EVERY_S; when it has not renewed for
    RENEW_DEADLINE_S it stops its query, and FENCE_GRACE_S later it exits hard;
    a candidate takes the Lease only after it has seen the same record unchanged
    for DURATION_S, measured on its own clock from when it first saw it.

The holder's deadline runs from before its last successful renew was sent; the
candidate's wait runs from after it read that renew. So the holder is gone by
RENEW_DEADLINE_S + FENCE_GRACE_S (7 s) after a moment the candidate's 8 s wait
starts later than: no clock is compared across machines, only durations.

A renew is one write, conditional on the resourceVersion of the holder's own last write
(a 409 means someone else wrote: only then is the Lease read). Each try is one request of at
most REQUEST_TIMEOUT_S (app.driver.lease_holder), with no retries inside it, and a try that
timed out is followed at once: on a slow API server the holder gets as many tries before
its deadline as the server's answers allow, and every one of them is counted.
"""

from __future__ import annotations

LEASE_ENV = "STREAMQ_LEASE"  # set on the driver pods of a standby query: the Lease's name
POD_NAME_ENV = "POD_NAME"
POD_NAMESPACE_ENV = "POD_NAMESPACE"

DURATION_S = 8.0
RENEW_EVERY_S = 1.0
RENEW_DEADLINE_S = 5.0
FENCE_GRACE_S = 2.0
POLL_EVERY_S = 0.25  # how often a waiting candidate looks (a released Lease is taken this fast)

assert RENEW_DEADLINE_S + FENCE_GRACE_S < DURATION_S, "a cut-off holder must be gone before anyone may take over"


def lease_name(query: str) -> str:
    return f"{query}-driver"
