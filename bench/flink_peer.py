"""The Flink SQL peer of the latency benchmark: the fraud filter and projection of
bench/latency.py as a Flink SQL job, on the same broker, for the same producer and
consumer. Benchmark-only (issue #11): never part of the product.

PyFlink runs in its own venv (its pins clash with the project's: see
bench/flink/requirements.txt), made with the Kafka SQL connector jar by
``hack/install-flink.sh`` under ``${STREAMQ_CACHE:-~/.cache/streamq}/flink``. This
module imports nothing from it: :class:`FlinkPeer` writes the job (SQL + Flink
configuration) to ``workdir/job.json`` and starts this very file with the Flink venv's
interpreter, which runs the job on a local mini-cluster (the PyFlink gateway JVM, a
child of that process) until it is stopped. Process tree: python (job driver,
``peer.proc``) -> java (gateway + mini-cluster); both in their own session, so
:meth:`FlinkPeer.stop` ends both and ``tree_cpu_seconds(peer.proc.pid)`` counts both.

    peer = FlinkPeer(broker.bootstrap, "in", "out", partitions=2, workdir=tmp).start()
    ...                      # probe records until one comes out: then it is up
    peer.stop(); print(peer.log())

By hand (from the repository root, with any Python 3.11: no package needed here):

    .venv/bin/python -m bench.flink_peer --bootstrap 127.0.0.1:9092 --source in --sink out --partitions 2

The query (the Spark path's: amount > 1000, then id, amount, sentNs) reads JSON
values and ignores unknown fields and unparsable records; it writes
``{"id":<n>,"amount":<n>,"inTs":<n>,"sentNs":<n>}`` (Flink's JSON format writes the
fields in the sink table's order, BIGINTs as plain numbers): ``id`` first and
``sentNs`` last, as the benchmark's consumer parses them, and ``inTs`` the input
record's Kafka timestamp in epoch milliseconds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

ROOT = Path(__file__).resolve().parents[1]
INSTALL_SCRIPT = ROOT / "hack" / "install-flink.sh"
INSTALL_HINT = f"run {INSTALL_SCRIPT.relative_to(ROOT)} (about 2 min and 850 MiB the first time, into ${{STREAMQ_CACHE:-~/.cache/streamq}}/flink)"
READY_MARK = "FLINK_PEER_RUNNING"  # the child prints it once the job is RUNNING
_RUN_AS_MAIN = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"


class FlinkNotInstalled(RuntimeError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("STREAMQ_CACHE") or Path.home() / ".cache" / "streamq") / "flink"


def flink_python() -> Path:
    """The Flink venv's interpreter; raises :class:`FlinkNotInstalled` with the command to run."""
    venv = cache_dir() / "venv"
    python = venv / "bin" / "python"
    if not (venv / ".complete").is_file() or not python.exists():
        raise FlinkNotInstalled(f"PyFlink is not installed in {venv}: {INSTALL_HINT}")
    return python


def connector_jars() -> list[Path]:
    """Flink's Kafka SQL connector (one shaded jar); raises :class:`FlinkNotInstalled`."""
    jars = cache_dir() / "jars"
    found = sorted(jars.glob("flink-sql-connector-kafka-*.jar"))
    if not (jars / ".complete").is_file() or not found:
        raise FlinkNotInstalled(f"Flink's Kafka SQL connector is not in {jars}: {INSTALL_HINT}")
    return found


def installed_versions() -> dict[str, str]:
    """What the install markers say (for a results file): python, connector, PyFlink."""
    out: dict[str, str] = {}
    for marker in (cache_dir() / "venv" / ".complete", cache_dir() / "jars" / ".complete"):
        try:
            for line in marker.read_text().splitlines():
                key, _, value = line.partition("=")
                if value and not key.endswith("sha256"):
                    out[key] = value
        except OSError:
            pass
    for jar in cache_dir().joinpath("jars").glob("flink-sql-connector-kafka-*.jar"):
        out["flink-sql-connector-kafka"] = jar.name[len("flink-sql-connector-kafka-") : -len(".jar")]
    for dist in cache_dir().joinpath("venv").glob("lib/python*/site-packages/apache_flink-*.dist-info"):
        out["apache-flink"] = dist.name[len("apache_flink-") : -len(".dist-info")]
    return out


# ---------------------------------------------------------------- the job (pure)
def sql_string(value: str) -> str:
    """A Flink SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _with(options: dict[str, str]) -> str:
    return ",\n".join(f"  {sql_string(k)} = {sql_string(v)}" for k, v in options.items())


def job_statements(bootstrap: str, source: str, sink: str, *, group_id: str = "streamq-flink-peer",
                   startup_mode: str = "earliest-offset") -> list[str]:  # fmt: skip
    """The job as a Flink SQL user writes it: two tables and one INSERT."""
    source_options = {
        "connector": "kafka",
        "topic": source,
        "properties.bootstrap.servers": bootstrap,
        "properties.group.id": group_id,
        # The benchmark's topics are fresh: earliest loses nothing produced while the
        # job starts (the caller's probes included) and replays nothing old.
        "scan.startup.mode": startup_mode,
        "format": "json",
        # Tolerant like the Spark path's from_json: unknown fields are ignored (always),
        # missing ones are NULL (and NULL > 1000 drops the row), garbage is skipped.
        "json.fail-on-missing-field": "false",
        "json.ignore-parse-errors": "true",
    }
    sink_options = {
        "connector": "kafka",
        "topic": sink,
        "properties.bootstrap.servers": bootstrap,
        "format": "json",
        # Sends as records come, flushes on checkpoints (if any): no transactions, whose
        # commit on each checkpoint would hold every record back until then.
        "sink.delivery-guarantee": "at-least-once",
        # Kafka 4 producers wait 5 ms to fill a batch: the Spark path sets 0 too
        # (app/pipeline/plan.py LOW_LATENCY_PRODUCER). acks stays the client's default
        # (all), like the Spark path's.
        "properties.linger.ms": "0",
    }
    return [
        f"""CREATE TABLE fraud_in (
  `id` BIGINT,
  `amount` BIGINT,
  `sentNs` BIGINT,
  `kafkaTs` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL
) WITH (
{_with(source_options)}
)""",
        # Field order = JSON field order: id first, sentNs last (the consumer's parse).
        f"""CREATE TABLE fraud_out (
  `id` BIGINT,
  `amount` BIGINT,
  `inTs` BIGINT,
  `sentNs` BIGINT
) WITH (
{_with(sink_options)}
)""",
        # inTs: epoch ms of the input record's Kafka timestamp. CAST(TIMESTAMP_LTZ AS
        # BIGINT) is refused and TIMESTAMPDIFF returns INT (ms overflow): seconds as
        # BIGINT, times 1000, plus the millisecond field.
        """INSERT INTO fraud_out
SELECT `id`, `amount`,
  CAST(TIMESTAMPDIFF(SECOND, TO_TIMESTAMP_LTZ(0, 3), `kafkaTs`) AS BIGINT) * 1000 + EXTRACT(MILLISECOND FROM `kafkaTs`) AS `inTs`,
  `sentNs`
FROM fraud_in
WHERE `amount` > 1000""",
    ]


def job_config(partitions: int, jars: Sequence[Path], *, checkpoint_interval_ms: int | None = None,
               buffer_timeout_ms: int = 5, tmp_dir: Path | None = None) -> dict[str, str]:  # fmt: skip
    """The Flink configuration a user tuning a local job for latency would set."""
    conf = {
        # One source subtask per partition; the Calc and the sink run at the same
        # parallelism, so the whole job chains into one task per partition (source ->
        # filter/projection -> Kafka writer, in one thread, no network shuffle).
        "parallelism.default": str(partitions),
        "pipeline.operator-chaining.enabled": "true",
        # Only matters where records cross a network buffer (nowhere once chained). The
        # Flink docs' low-latency advice: a few ms, not 0 (0 flushes every record).
        "execution.buffer-timeout.enabled": "true",
        "execution.buffer-timeout.interval": f"{buffer_timeout_ms} ms",
        "pipeline.object-reuse": "true",
        "pipeline.name": "streamq-flink-peer",
        "pipeline.jars": ";".join(p.resolve().as_uri() for p in jars),
        # Loopback only, any free port: several peers (or engineers) side by side.
        "rest.bind-address": "127.0.0.1",
        "rest.address": "127.0.0.1",
        "rest.bind-port": "0",
        "taskmanager.host": "127.0.0.1",
        "jobmanager.rpc.address": "127.0.0.1",
    }
    if tmp_dir is not None:
        conf["io.tmp.dirs"] = str(tmp_dir)
    # Checkpointing is off by default: the peer as the issue measured it. Nothing waits on a
    # checkpoint then, and nothing is ever flushed on purpose; it also recovers nothing. A
    # continuous Spark query pays for its recovery at every epoch: the task commits it with
    # KafkaDataWriter.commit -> producer.flush() on the task's own thread. checkpoint_interval_ms
    # turns checkpoints on (bench.latency's flinkCheckpointed: 1000, the continuous epoch), at
    # least once and stored in files as a Spark checkpoint is, so the peer pays the same: its
    # barrier flushes the producer (KafkaWriter.flush before the snapshot).
    if checkpoint_interval_ms:
        conf["execution.checkpointing.interval"] = f"{checkpoint_interval_ms} ms"
        conf["execution.checkpointing.mode"] = "AT_LEAST_ONCE"  # no barrier alignment
        if tmp_dir is not None:
            conf["execution.checkpointing.storage"] = "filesystem"
            conf["execution.checkpointing.dir"] = (tmp_dir.parent / "checkpoints").resolve().as_uri()
    return conf


# ------------------------------------------------------------------ the peer
class FlinkPeer:
    """The Flink SQL job as a child process (its own session: killable as a group).

    ``proc`` (``.pid``, ``.poll()``) once started; :meth:`stop`; :meth:`log` (tail of
    the driver's output and of Flink's log, both in ``workdir``).
    """

    def __init__(self, bootstrap: str, source: str, sink: str, partitions: int, workdir: Path | str, *,
                 checkpoint_interval_ms: int | None = None, heap: str = "1g",
                 startup_mode: str = "earliest-offset") -> None:  # fmt: skip
        self.bootstrap, self.source, self.sink, self.partitions = bootstrap, source, sink, partitions
        self.workdir = Path(workdir)
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.heap = heap
        self.startup_mode = startup_mode
        self.proc: subprocess.Popen[bytes] | None = None
        self.out_file = self.workdir / "flink-peer.out"
        self.job_file = self.workdir / "job.json"
        self.started_at: float | None = None

    def job(self) -> dict[str, Any]:
        return {
            "config": job_config(
                self.partitions,
                connector_jars(),
                checkpoint_interval_ms=self.checkpoint_interval_ms,
                tmp_dir=self.workdir / "tmp",
            ),  # fmt: skip
            "statements": job_statements(self.bootstrap, self.source, self.sink, startup_mode=self.startup_mode),
        }

    def start(self) -> FlinkPeer:
        """Start the job and return at once (raises :class:`FlinkNotInstalled`)."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        python = flink_python()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.job_file.write_text(json.dumps(self.job(), indent=1) + "\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PYSPARK", "SPARK_"))}
        # Everything Flink writes (its log, the RPC jar it unpacks, blobs, spill files)
        # stays in workdir, which the caller removes: nothing is left in /tmp.
        tmp = self.workdir / "tmp"
        tmp.mkdir(exist_ok=True)
        env.update({
            "PYTHONUNBUFFERED": "1",
            "TMPDIR": str(tmp),
            "FLINK_LOG_DIR": str(self.workdir),  # Flink's own log: flink-*-python-*.log
            "JVM_ARGS": f"-Xms256m -Xmx{self.heap} -Djava.io.tmpdir={tmp}",
        })  # fmt: skip
        with self.out_file.open("ab") as out:
            self.proc = subprocess.Popen(
                # Not `python bench/flink_peer.py`: that puts bench/ first on sys.path,
                # where bench/operator.py shadows the standard library's operator.
                [str(python), "-c", _RUN_AS_MAIN, str(Path(__file__).resolve()), "--run-job", str(self.job_file)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                env=env,
                start_new_session=True,
            )
        self.started_at = time.monotonic()
        return self

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def is_running(self) -> bool:
        """Whether the driver printed that the job reached RUNNING (tasks may still be deploying)."""
        try:
            return READY_MARK in self.out_file.read_text(errors="replace")
        except OSError:
            return False

    def wait_running(self, timeout: float = 120) -> bool:
        """Until the job is RUNNING (True) or the driver exited / timeout (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.is_running():
                return True
            if self.poll() is not None:
                return False
            time.sleep(0.2)
        return False

    def stop(self, grace: float = 10) -> int | None:
        """SIGTERM to the whole session (driver + JVM), SIGKILL after ``grace`` s."""
        proc = self.proc
        if proc is None:
            return None
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30)):
            try:
                os.killpg(proc.pid, sig)  # the session's group: the JVM too
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=wait)
                # The JVM may outlive the driver by a moment: give the group its grace.
                end = time.monotonic() + (wait if sig == signal.SIGTERM else 5)
                while _group_alive(proc.pid) and time.monotonic() < end:
                    time.sleep(0.1)
                if not _group_alive(proc.pid):
                    break
            except subprocess.TimeoutExpired:
                continue
        return proc.returncode

    def completed_checkpoints(self) -> int:
        """The last checkpoint the JobManager logged as completed (0: none): that a checkpointed peer
        did checkpoint, which its results would not show otherwise."""
        found = [0]
        for path in self.workdir.glob("flink-*.log"):
            found += [int(n) for n in re.findall(r"Completed checkpoint (\d+) for job", path.read_text(errors="replace"))]
        return max(found)

    def log(self, lines: int = 60) -> str:
        """The tail of the driver's output and of Flink's log file."""
        parts = []
        for path in [self.out_file, *sorted(self.workdir.glob("flink-*.log"))]:
            try:
                text = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            parts.append(f"==> {path.name} <==\n" + "\n".join(text))
        return "\n".join(parts) or "(no log)"

    def __enter__(self) -> FlinkPeer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# --------------------------------------------- inside the Flink venv: the driver
def run_job(job_file: str) -> int:
    """Submit the job to a local mini-cluster and block until it ends (runs with PyFlink)."""
    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment

    job = json.loads(Path(job_file).read_text())
    t0 = time.monotonic()
    conf = Configuration()
    for key, value in job["config"].items():
        conf.set_string(key, value)
        print(f"conf {key} = {value}")
    # The environment's root configuration: the local executor builds the mini-cluster from it.
    settings = EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(conf).build()
    t_env = TableEnvironment.create(settings)
    *ddl, insert = job["statements"]
    for statement in ddl:
        t_env.execute_sql(statement)
    print(f"plan:\n{t_env.explain_sql(insert)}")
    result = t_env.execute_sql(insert)
    client = result.get_job_client()
    job_id = client.get_job_id() if client is not None else None
    print(f"submitted job {job_id} after {time.monotonic() - t0:.1f} s")
    if client is not None:
        while True:
            status = client.get_job_status().result()
            if str(status) in ("RUNNING", "JobStatus.RUNNING") or getattr(status, "name", "") == "RUNNING":
                print(f"{READY_MARK} job {job_id} after {time.monotonic() - t0:.1f} s", flush=True)
                break
            if getattr(status, "name", str(status)).split(".")[-1] in ("FAILED", "CANCELED", "FINISHED"):
                print(f"job {job_id} is {status}")
                break
            time.sleep(0.2)
    result.wait()  # an unbounded source: until stopped (or the job fails: raises)
    return 0


def main(
    bootstrap: Annotated[str, typer.Option(help="the Kafka broker, host:port")],
    source: Annotated[str, typer.Option(help="input topic")],
    sink: Annotated[str, typer.Option(help="output topic")],
    partitions: Annotated[int, typer.Option(help="parallelism (one per input partition)")] = 2,
    workdir: Annotated[Path | None, typer.Option(help="logs and job.json (default: a new folder under /tmp)")] = None,
    checkpoint_interval_ms: Annotated[int | None, typer.Option(help="default: no checkpoints")] = None,
    install: Annotated[bool, typer.Option("--install", help=f"run {INSTALL_SCRIPT.name} first")] = False,
) -> None:
    """Run the peer by hand, until Ctrl-C."""
    raise typer.Exit(run_peer(bootstrap, source, sink, partitions, workdir, checkpoint_interval_ms, install=install))


def run_peer(
    bootstrap: str,
    source: str,
    sink: str,
    partitions: int,
    workdir: Path | None,
    checkpoint_interval_ms: int | None,
    *,
    install: bool,
) -> int:
    if install:
        subprocess.run(["bash", str(INSTALL_SCRIPT)], check=True)
    try:
        flink_python(), connector_jars()
    except FlinkNotInstalled as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if workdir is None:
        import tempfile

        workdir = Path(tempfile.mkdtemp(prefix="flink-peer-"))
    peer = FlinkPeer(bootstrap, source, sink, partitions, workdir, checkpoint_interval_ms=checkpoint_interval_ms)
    try:
        peer.start()
    except FlinkNotInstalled as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"flink peer pid {peer.pid}, logs in {peer.workdir}; Ctrl-C stops it", file=sys.stderr)
    try:
        if peer.wait_running(180):
            print(f"job RUNNING after {time.monotonic() - (peer.started_at or 0):.1f} s", file=sys.stderr)
        while peer.poll() is None:
            time.sleep(0.5)
        print(f"the Flink driver exited with {peer.poll()}:\n{peer.log()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        peer.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run-job"]:  # FlinkPeer.start: in the Flink venv, which has only the standard library
        sys.exit(run_job(sys.argv[2]))
    # Here, not at the top: the Flink venv runs this file too, and has no typer (nor bench).
    import typer

    from bench import cli

    cli.run(main, "bench.flink_peer", __doc__)
