"""`make dev` (`python -m devtools`): a broker, a payment feed, the fraud filter and what it flags, on loopback.

    broker (testbed.kafka_broker, cached jars)  <- payments, a steady feed (devtools.payments)
    the job (`python -m app run`, its own process, as in a driver pod)  payments -> payments-flagged
    a reader of payments-flagged: each flagged payment and its end-to-end latency

Ctrl-C (SIGINT) or SIGTERM stops the feed, then the job (SIGTERM: it stops its query, then
Spark, and says what it committed), then the broker; the working directory goes with it.
"""

from __future__ import annotations

import copy
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from app.console.lines import due_for_people, progress_line
from contract import ExitCode
from contract.progress import ProgressRecord
from devtools.payments_io import Screen, feed, read_flagged
from testbed.kafka_broker import CLIENT_LOGGER, BrokerError, JarsMissing, KafkaBroker, jars_dir, kafka_libs_dir

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fraud-local.yaml"
TRIGGERS = {
    "continuous": {"continuous": {"checkpointInterval": "1s"}},
    "realTime": {"realTime": {"batchDuration": "5s"}},
    "microBatch": {"microBatch": {"interval": "0s"}},
}
SOURCE_PARTITIONS = 2
STOP_GRACE_S = 60.0


def local_spec(document: dict, bootstrap: str, mode: str, checkpoint: str) -> dict:
    """The example pointed at this run's broker, in the chosen mode, on a fresh checkpoint."""
    doc = copy.deepcopy(document)
    spec = doc["spec"]
    spec["source"]["kafka"]["bootstrapServers"] = bootstrap
    spec["sink"]["kafka"]["bootstrapServers"] = bootstrap
    spec["trigger"] = copy.deepcopy(TRIGGERS[mode])
    spec["checkpoint"] = {"location": checkpoint}
    return doc


def relay_job(proc: subprocess.Popen, screen: Screen) -> None:
    """The job's progress records as readable lines (every few seconds); its other lines as they are."""
    shown = None
    for raw in proc.stdout:
        line = raw.rstrip("\n")
        record = ProgressRecord.from_line(line)
        if record is not None:
            state = record.health.state if record.health else None
            if due_for_people(shown, time.monotonic(), state):
                shown = (time.monotonic(), state)
                screen.say(progress_line(record))
        elif line.strip():
            screen.say(line)


class Stop:
    def __init__(self):
        self.event = threading.Event()

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.event.set())


def _stop_job(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # the driver pod's way: stop the query, then Spark
        try:
            return proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.wait()


def run_dev(mode: str = "continuous", per_second: float = 20.0, example: Path = EXAMPLE, screen: Screen | None = None) -> int:
    screen = screen or Screen()
    logging.getLogger(CLIENT_LOGGER).propagate = False  # librdkafka's complaints while the broker stops
    try:
        libs = kafka_libs_dir()
        jars_dir()
    except JarsMissing as exc:
        screen.say(f"cannot start: {exc}")
        return int(ExitCode.SOURCE_UNAVAILABLE)
    stop = Stop()
    stop.install()
    workdir = Path(tempfile.mkdtemp(prefix="streamq-dev-"))
    broker = KafkaBroker(libs, workdir=workdir / "kafka")
    feeding, reading = threading.Event(), threading.Event()
    threads: list[threading.Thread] = []
    proc = None
    code = 0
    try:
        screen.say(f"starting a Kafka broker on 127.0.0.1 (data in {workdir})")
        broker.start()
        screen.say(f"broker {broker.bootstrap} (controller 127.0.0.1:{broker.controller_port})")
        document = yaml.safe_load(example.read_text())
        spec = local_spec(document, broker.bootstrap, mode, str(workdir / "checkpoint"))
        source = spec["spec"]["source"]["kafka"]["topics"][0]
        sink = spec["spec"]["sink"]["kafka"]["topic"]
        broker.create_topic(source, SOURCE_PARTITIONS)
        broker.create_topic(sink, 1)
        spec_file = workdir / "query.yaml"
        spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
        screen.say(f"topics {source} ({SOURCE_PARTITIONS} partitions) -> {sink}; feeding {per_second:g} payments/s; "
                   f"the query runs in {mode} mode (Ctrl-C stops everything)")  # fmt: skip
        if stop.event.is_set():
            return 0
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "run", str(spec_file), "--log-format", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
            env={**os.environ, "STREAMQ_TERMINATION_LOG": str(workdir / "termination-log")},
            start_new_session=True,  # Ctrl-C reaches this process; it stops the job in order
        )  # fmt: skip
        threads = [
            threading.Thread(target=relay_job, args=(proc, screen), name="dev-job", daemon=True),
            threading.Thread(target=feed, args=(broker.bootstrap, source, per_second, feeding), name="dev-feed", daemon=True),
            threading.Thread(target=read_flagged, args=(broker.bootstrap, sink, mode, screen, reading), name="dev-read", daemon=True),
        ]  # fmt: skip
        for thread in threads:
            thread.start()
        while not stop.event.is_set() and proc.poll() is None:
            stop.event.wait(0.2)
        if proc.poll() is not None and not stop.event.is_set():
            code = proc.returncode  # the job ended by itself: say so with its code
            screen.say(f"the query ended by itself (exit {code})")
    except BrokerError as exc:
        screen.say(f"the Kafka broker failed: {exc}")
        code = int(ExitCode.SOURCE_UNAVAILABLE)
    finally:
        feeding.set()
        if proc is not None:
            job_code = _stop_job(proc)
            code = code or job_code
        reading.set()
        for thread in threads:
            thread.join(10)
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        screen.say("stopped: the query, the feed and the broker")
    return code
