"""Restarting a failed query inside the running driver (pure).

A new driver pod costs a new JVM and SparkSession: 12-16 s of the 15-20 s a killed
driver takes to come back (docs/benchmarks.md, section 2). A query restarted from
its checkpoint in the SparkSession that is already there skips all of that. Only
what a restart can fix is restarted in place (``ExitCode.QUERY_FAILED``: a task
that failed past Spark's retries, a broker that stopped answering); a refused
query, a stall (the JVM itself may be wedged) or a source that outgrew its task
slots (the session must be sized again) still ends the process for the operator.

``limit`` counts failures in a row: a commit between two failures starts the count
again, so a query that fails once an hour is never sent to a new pod for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from contract import ExitCode

MAX_DELAY_S = 16.0


@dataclass
class InPlaceRestarts:
    limit: int
    total: int = 0  # restarts in place by this driver, for status
    in_a_row: int = 0  # failures since the last commit
    last_reason: str | None = None
    _committed_at_last_failure: int | None = None

    def after_failure(self, code: ExitCode, reason: str, last_committed: int | None) -> float | None:
        """Seconds to wait before restarting in place; None: the driver exits with ``code``."""
        if code is not ExitCode.QUERY_FAILED:
            return None
        if self.in_a_row and last_committed != self._committed_at_last_failure:
            self.in_a_row = 0  # the restarted query committed: this is a new failure, not the same one again
        if self.in_a_row >= self.limit:
            return None
        delay = min(float(2**self.in_a_row), MAX_DELAY_S)
        self.in_a_row += 1
        self.total += 1
        self.last_reason = reason
        self._committed_at_last_failure = last_committed
        return delay

    def describe(self) -> str:
        return f"{self.in_a_row}/{self.limit} in a row, {self.total} in all"
