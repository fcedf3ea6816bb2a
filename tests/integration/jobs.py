"""Helpers for the job's integration tests: payments in, flagged payments out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
FLAG_ABOVE = 1000


def payments(n: int, start: int = 0) -> list[tuple[str, str]]:
    """Deterministic payments; every third one is above the flag threshold."""
    return [(f"p{i}", json.dumps({"id": i, "amount": 1500 if i % 3 == 0 else 20 + i % 7})) for i in range(start, start + n)]


def flagged(records: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in records if json.loads(v)["amount"] > FLAG_ABOVE]


FRAUD_TRANSFORMS = [
    {"withColumn": {"name": "amount", "expr": "CAST(get_json_object(CAST(value AS STRING), '$.amount') AS INT)"}},
    {"where": f"amount > {FLAG_ABOVE}"},
    {"select": ["CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"]},
]


def fraud_spec(bootstrap: str, source_topic: str, sink_topic: str, checkpoint: Path, trigger: dict, **extra) -> dict:
    spec = {
        "source": {"kafka": {"bootstrapServers": bootstrap, "topics": [source_topic], "startingOffsets": "earliest"}},
        "transforms": FRAUD_TRANSFORMS,
        "sink": {"kafka": {"bootstrapServers": bootstrap, "topic": sink_topic}},
        "trigger": trigger,
        "checkpoint": {"location": str(checkpoint)},
        "runtime": {"parallelism": 4},
    }
    spec.update(extra)
    return spec


def write_resource(path: Path, name: str, spec: dict, annotations: dict | None = None) -> Path:
    metadata = {"name": name, **({"annotations": annotations} if annotations else {})}
    path.write_text(yaml.safe_dump({"apiVersion": "streamq.io/v1alpha1", "kind": "StreamingQuery", "metadata": metadata, "spec": spec}))
    return path


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
            [sys.executable, "-m", "app", "run", str(spec_path), *(args or [])], cwd=ROOT, env=full_env,
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    @classmethod
    def run_to_exit(cls, spec_path: Path, workdir: Path, timeout: float, env: dict | None = None) -> tuple[int, "JobProcess"]:
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
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = next((r for r in self.records() if predicate(r)), None)
            if found is not None:
                return found
            if self.proc.poll() is not None:
                raise AssertionError(f"job exited with {self.proc.returncode} before {what}:\n{self.log()[-4000:]}")
            time.sleep(0.3)
        raise AssertionError(f"no {what} within {timeout}s:\n{self.log()[-4000:]}")

    def wait_for_progress(self, timeout: float, min_batch: int = 0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"job exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            if self.progress_file.exists():
                record = json.loads(self.progress_file.read_text())
                if record["batchId"] is not None and record["batchId"] >= min_batch:
                    return record
            time.sleep(0.2)
        raise AssertionError(f"no progress within {timeout}s:\n{self.log()[-4000:]}")
