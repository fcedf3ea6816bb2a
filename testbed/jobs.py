"""The job as a local process, as the driver pod runs it (`python -m app run SPEC`),
and a steady stream of payments to stop it in the middle of. Specs and payments
come from testbed/specs.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

from testbed.specs import payments
from testbed.wait import wait_for

ROOT = Path(__file__).resolve().parents[1]


class SteadyProducer(threading.Thread):
    """Produces payments at a steady pace until stopped: the stream a job is stopped in the middle of."""

    def __init__(self, broker, topic, per_batch=15, period_s=0.1):
        super().__init__(daemon=True)
        self.broker, self.topic, self.per_batch, self.period_s = broker, topic, per_batch, period_s
        self.sent: list[tuple[str, str]] = []
        self.positions: list[tuple[int, int]] = []  # (partition, offset) of each sent record
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            batch = payments(self.per_batch, start=len(self.sent))
            self.positions.extend(self.broker.produce(self.topic, batch))
            self.sent.extend(batch)
            self._halt.wait(self.period_s)

    def stop(self):
        self._halt.set()
        self.join(30)


class JobProcess:
    """`python -m app SPEC` as the driver pod runs it, with its exit code and reason."""

    def __init__(self, spec_path: Path, workdir: Path, env: dict | None = None, args: list[str] | None = None):
        self.termination_log = workdir / "termination-log"
        self.progress_file = workdir / "progress.json"
        self.log_path = workdir / f"job-{int(time.time() * 1000)}.log"
        full_env = {
            **os.environ,
            "STREAMQ_TERMINATION_LOG": str(self.termination_log),
            "STREAMQ_PROGRESS_FILE": str(self.progress_file),
            "STREAMQ_SPARK_LOG_LEVEL": "ERROR",
            **(env or {}),
        }
        self._log = open(self.log_path, "w")
        # Its own session, like PID 1 in a container: signals reach the job, not the JVM first.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app", "run", str(spec_path), *(args or [])],
            cwd=ROOT,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @classmethod
    def run_to_exit(cls, spec_path: Path, workdir: Path, timeout: float, env: dict | None = None) -> tuple[int, JobProcess]:
        """Run a job that is expected to end by itself; its exit code and the finished job."""
        job = cls(spec_path, workdir, env)
        try:
            return job.wait(timeout), job
        finally:
            job.stop()

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def kill_all(self) -> None:
        """SIGKILL the job and its JVM, as when a node or container dies."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def freeze(self) -> None:
        """SIGSTOP the job and its JVM together: every thread stops at once, as on a paused node."""
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT: every thread runnable at once, as when the paused node comes back."""
        os.killpg(self.proc.pid, signal.SIGCONT)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill_all()
            self.proc.wait(30)
        self._log.close()

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def termination_message(self) -> str:
        return self.termination_log.read_text() if self.termination_log.exists() else ""

    def records(self) -> list[dict]:
        """Every progress record the job printed so far (JSON lines on stderr)."""
        out = []
        for line in self.log().splitlines():
            if line.startswith("{") and '"progress"' in line:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("event") == "progress":
                    out.append(record)
        return out

    def wait_for_record(self, predicate, timeout: float, what: str = "a progress record") -> dict:
        """The first record (in order) that satisfies predicate; fails if the job exits first."""

        def found() -> dict | None:
            record = next((r for r in self.records() if predicate(r)), None)
            if record is None:
                self._check_alive(what)
            return record

        return wait_for(found, timeout, lambda: f"{what}:\n{self.log()[-4000:]}")

    def wait_for_progress(self, timeout: float, min_batch: int = 0) -> dict:
        """The progress file once it reports batch ``min_batch`` or later."""

        def progressed() -> dict | None:
            self._check_alive("progress")
            if self.progress_file.exists():
                record = json.loads(self.progress_file.read_text())
                if record["batchId"] is not None and record["batchId"] >= min_batch:
                    return record
            return None

        return wait_for(progressed, timeout, lambda: f"progress:\n{self.log()[-4000:]}")

    def _check_alive(self, what: str) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"job exited with {self.proc.returncode} before {what}:\n{self.log()[-4000:]}")


class Resumed(NamedTuple):
    out: list
    expected: set
    exit_code: int
    log: str


def resume_and_collect(spec_path: Path, workdir: Path, producer: SteadyProducer, broker, sink: str,
                       expected_of) -> Resumed:  # fmt: skip
    """Start the job again after a stop while ``producer`` still sends: 30 more payments arrive while
    it is down, then its own first commit (progress.json may still hold the last run's), then every
    record ``expected_of(sent)`` names in ``sink``, then a SIGTERM."""
    sent = len(producer.sent)
    wait_for(lambda: len(producer.sent) >= sent + 30, 30, "30 payments while the job is down")
    job = JobProcess(spec_path, workdir)
    try:
        job.wait_for_record(lambda r: r["batchId"] is not None, 300, "a commit of the resumed job")
        producer.stop()
        expected = set(expected_of(producer.sent))
        out = broker.wait_for_records(sink, expected, timeout=120)
    finally:
        job.signal(signal.SIGTERM)
        code = job.wait(60)
        job.stop()
        producer.stop()
    return Resumed(out, expected, code, job.log())
