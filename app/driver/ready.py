"""The driver's readiness: a file the pod's readiness probe tests (thin I/O).

A driver pod is Ready once it is worth handing the query to: a standby (or the
new driver of a warm upgrade) that has warmed up and waits on the Lease, or a
driver whose query has started. The operator stops the running driver of a warm
upgrade only once the new one is Ready (controller.decide.upgrade), so the gap
is the hand-over alone, not a JVM start.
"""

from __future__ import annotations

import logging
import os

from contract.names import READY_FILE_ENV

log = logging.getLogger("streamq.job")


def mark_ready(why: str, path: str | None = None) -> None:
    """Create the ready file (``STREAMQ_READY_FILE``; nothing when unset: a run outside a pod)."""
    path = path if path is not None else os.environ.get(READY_FILE_ENV)
    if not path:
        return
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as f:
            f.write(why + "\n")
    except OSError as exc:  # the probe fails: the pod stays not Ready, the upgrade waits and then gives up
        log.warning("cannot write the ready file %s: %s", path, exc)
