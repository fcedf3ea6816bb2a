"""Smoke test of the streamq image, run without Docker.

The image archive that ``hack/build-image.sh`` writes (the artifact that
``ctr images import`` / ``kind load image-archive`` take) becomes a buildah
container; its commands run through the image's own ENTRYPOINT, as its own
non-root USER, with buildah's chroot isolation:

* the image's config: non-root numeric user, tini + our entrypoint, the env the
  job reads (STREAMQ_JARS_DIR, STREAMQ_S3A_JARS_DIR, SPARK_HOME, JAVA_HOME), no compilers or pip;
* ``controller --help``;
* the rate-to-console sample in continuous mode: once rows appear it runs 40 s
  more and gets SIGTERM; the console sink's rows each have an even ``value`` and
  ``doubled == 2 * value``, and the job exits 0 (a clean stop);
* a Spark executor started the way Spark's Kubernetes scheduler starts one
  (``executor`` + SPARK_* env): the JVM loads KubernetesExecutorBackend with
  the pyspark + Kafka classpath and tries to reach the driver URL it was given;
* the archive imports into containerd (``ctr -n k8s.io images import``, a
  private containerd on a temporary socket) under the name the kubelet looks
  for when a pod says ``image: streamq:<tag>``.

Building the image from nothing takes minutes, so the test does not: it needs
an archive from ``hack/build-image.sh`` and fails naming it otherwise (skips
with STREAMQ_ALLOW_SKIP=1). An archive older than the sources
(``hack/build-image.sh --check``) is rebuilt on the cached layers first (about
a minute; STREAMQ_IMAGE_REBUILD=0 fails instead). STREAMQ_IMAGE_ARCHIVE=<path>
tests a given archive as it is. Needs root, buildah and containerd (apt-get
install buildah containerd).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from testbed.wait import wait_for

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build-image.sh"
EXAMPLES = REPO_ROOT / "examples"
RUN_SECONDS = 40
REBUILD_TIMEOUT = 420
# buildah names the container's host after the container, and its /etc/hosts does
# not list that name (a pod's does): Spark would fail to resolve its own host name.
HOST_ENV = {"SPARK_LOCAL_HOSTNAME": "localhost", "SPARK_LOCAL_IP": "127.0.0.1"}


def _unavailable(reason: str) -> None:
    message = f"{reason}. Build the image with `hack/build-image.sh` (several minutes cold)."
    if os.environ.get("STREAMQ_ALLOW_SKIP") == "1":
        pytest.skip(message + " Skipping because STREAMQ_ALLOW_SKIP=1.")
    pytest.fail(message + " Set STREAMQ_ALLOW_SKIP=1 to skip instead.", pytrace=False)


@pytest.fixture(scope="module")
def image_archive() -> Path:
    override = os.environ.get("STREAMQ_IMAGE_ARCHIVE")
    if override:
        path = Path(override)
        if not path.is_file():
            _unavailable(f"STREAMQ_IMAGE_ARCHIVE={override} does not exist")
        return path
    path = Path(subprocess.run([BUILD_SCRIPT, "--print-archive"], capture_output=True, text=True, check=True).stdout.strip())
    if not path.is_file():
        _unavailable(f"no image archive at {path}")
    check = subprocess.run([BUILD_SCRIPT, "--check"], capture_output=True, text=True, timeout=300)
    if check.returncode == 0:
        return path
    stale = f"the image archive {path} is stale: the sources changed since it was built ({check.stderr.strip()})"
    if os.environ.get("STREAMQ_IMAGE_REBUILD", "1") != "1":
        _unavailable(stale)
    # A rebuild on top of the cached layers takes about a minute (several when the
    # dependencies changed); building from nothing is left to hack/build-image.sh.
    try:
        rebuild = subprocess.run([BUILD_SCRIPT], capture_output=True, text=True, timeout=REBUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        _unavailable(f"{stale}; rebuilding it took more than {REBUILD_TIMEOUT} s")
    if rebuild.returncode != 0:
        pytest.fail(f"{stale}; hack/build-image.sh failed:\n{rebuild.stderr[-4000:]}", pytrace=False)
    return path


class Container:
    """A buildah working container made from an image archive."""

    def __init__(self, name: str, config: dict):
        self.name = name
        self.config = config

    @property
    def entrypoint(self) -> list[str]:
        return list(self.config.get("Entrypoint") or [])

    @property
    def env(self) -> dict[str, str]:
        return dict(item.split("=", 1) for item in self.config.get("Env") or [])

    def run(self, *argv: str, env: dict[str, str] | None = None, volumes=(), timeout: float = 120) -> subprocess.CompletedProcess:
        """Runs argv in the container as the image's USER, in its WORKDIR, with its env."""
        cmd = ["buildah", "run", "--isolation", "chroot", "--network", "host"]
        for key, value in {**HOST_ENV, **(env or {})}.items():
            cmd += ["--env", f"{key}={value}"]
        for volume in volumes:
            cmd += ["--volume", volume]
        cmd += [self.name, "--", *argv]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def run_image(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        """Runs the image's ENTRYPOINT with args, as `docker run IMAGE args` would."""
        return self.run(*self.entrypoint, *args, **kwargs)


@pytest.fixture(scope="module")
def container(image_archive: Path):
    if shutil.which("buildah") is None:
        _unavailable("buildah is not installed (apt-get install buildah)")
    if os.geteuid() != 0:
        _unavailable("running the image with buildah's chroot isolation needs root")
    name = f"streamq-smoke-{uuid.uuid4().hex[:8]}"
    made = subprocess.run(
        ["buildah", "from", "--pull-never", "--name", name, f"docker-archive:{image_archive}"]
        if not str(image_archive).endswith(".oci.tar")
        else ["buildah", "from", "--pull-never", "--name", name, f"oci-archive:{image_archive}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert made.returncode == 0, f"buildah from {image_archive} failed:\n{made.stderr}"
    try:
        inspect = subprocess.run(["buildah", "inspect", "--type", "container", name], capture_output=True, text=True, check=True)
        config = json.loads(inspect.stdout)["OCIv1"]["config"]
        yield Container(name, config)
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True)


def test_image_config_runs_as_non_root_through_tini_and_our_entrypoint(container):
    user = container.config.get("User", "")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, f"USER must be a numeric non-root uid (runAsNonRoot checks it), got {user!r}"
    assert container.entrypoint[:2] == ["/usr/bin/tini", "--"], container.entrypoint
    assert container.entrypoint[-1] == "/opt/streamq/bin/entrypoint", container.entrypoint
    assert container.config.get("Cmd") == ["job"]
    env = container.env
    assert env["STREAMQ_JARS_DIR"] == "/opt/streamq/jars/spark-kafka"
    assert env["STREAMQ_S3A_JARS_DIR"] == "/opt/streamq/jars/s3a"
    assert env["STREAMQ_FENCE_JARS_DIR"] == "/opt/streamq/jars/fence"
    assert env["STREAMQ_READER_JARS_DIR"] == "/opt/streamq/jars/reader"
    assert env["SPARK_HOME"] and env["JAVA_HOME"]

    whoami = container.run("id", "-u")
    assert whoami.returncode == 0 and whoami.stdout.strip() == uid, whoami


def test_image_has_java_17_python_and_no_build_tools(container):
    java = container.run("java", "-version")
    assert java.returncode == 0, java.stderr
    assert re.search(r'version "17\.', java.stderr), java.stderr
    tools = container.run("sh", "-c", "for t in gcc cc make pip pip3 g++; do command -v $t; done; true")
    assert tools.stdout.strip() == "", f"build tools in the runtime image: {tools.stdout}"


def test_job_finds_the_kafka_connector_s3a_fence_and_reader_jars(container):
    probe = container.run(
        "python", "-c", "import json; from app.pipeline.session import connector_jars; print(json.dumps(connector_jars()))"
    )
    assert probe.returncode == 0, probe.stderr
    paths = json.loads(probe.stdout)
    jars = [Path(p).name for p in paths]
    assert any(j.startswith("spark-sql-kafka-0-10_2.13-") for j in jars), jars
    assert any(j.startswith("kafka-clients-") for j in jars), jars
    assert any(j.startswith("hadoop-aws-") for j in jars) and any(j.startswith("s3-2.") for j in jars), jars
    assert not any(j.startswith("bundle-") for j in jars), jars  # the AWS SDK's 686 MB bundle stays out
    assert "streamq-fence.jar" in jars, jars  # the driver's write fence (jvm/fence)
    assert "streamq-reader.jar" in jars, jars  # the streamq-kafka continuous source (jvm/reader)
    assert all(p.startswith(("/opt/streamq/jars/spark-kafka/", "/opt/streamq/jars/s3a/", "/opt/streamq/jars/fence/",
                             "/opt/streamq/jars/reader/"))
               for p in paths), paths  # fmt: skip


def test_operator_help(container):
    result = container.run_image("controller", "--help", timeout=120)
    assert result.returncode == 0, f"controller --help failed:\n{result.stdout}\n{result.stderr}"
    assert "usage" in (result.stdout + result.stderr).lower()


def _console_rows(output: str) -> list[dict[str, str]]:
    """Rows of the console sink's tables (`|col|col|` lines under a `|value|...` header)."""
    rows, header = [], None
    for line in output.splitlines():
        line = line.strip()
        if not (line.startswith("|") and line.endswith("|")):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if "value" in cells and "doubled" in cells:
            header = cells
        elif header and len(cells) == len(header):
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


# Runs a command in the background inside the container, waits until the console
# sink has printed rows (a JVM start takes 10-20 s here, much more on a busy
# machine), lets it run RUN_SECONDS more, then sends SIGTERM as the kubelet would
# and waits for the exit. Prints the command's stdout, its stderr to stderr, and
# exits with its exit code.
RUN_UNTIL_ROWS = r"""
out=$(mktemp) err=$(mktemp)
"$@" >"$out" 2>"$err" &
pid=$!
deadline=$((SECONDS + START_TIMEOUT))
until grep -q '^|[0-9]' "$out" || ((SECONDS >= deadline)) || ! kill -0 "$pid" 2>/dev/null; do sleep 1; done
if kill -0 "$pid" 2>/dev/null && grep -q '^|[0-9]' "$out"; then sleep "$RUN_SECONDS"; fi
kill -TERM "$pid" 2>/dev/null
wait "$pid"; rc=$?
cat "$out"; cat "$err" >&2
exit "$rc"
"""
START_TIMEOUT = 240


def test_rate_to_console_sample_prints_rows_and_stops_cleanly(container):
    sample = EXAMPLES / "rate-to-console.yaml"
    assert sample.is_file(), sample
    result = container.run(
        "bash", "-c", RUN_UNTIL_ROWS, "run-until-rows",
        *container.entrypoint, "job", "run", "/examples/rate-to-console.yaml",
        env={"TINI_SUBREAPER": "1", "START_TIMEOUT": str(START_TIMEOUT), "RUN_SECONDS": str(RUN_SECONDS)},
        volumes=[f"{EXAMPLES}:/examples:ro"],
        timeout=START_TIMEOUT + RUN_SECONDS + 120,
    )  # fmt: skip
    output = result.stdout + result.stderr
    rows = _console_rows(result.stdout)
    assert rows, f"no console rows within {START_TIMEOUT} s (exit {result.returncode}):\n{output[-4000:]}"
    for row in rows:
        value, doubled = int(row["value"]), int(row["doubled"])
        assert value % 2 == 0, row  # where: value % 2 = 0
        assert doubled == 2 * value, row  # withColumn doubled = value * 2
    assert len(rows) >= 5, f"only {len(rows)} rows in {RUN_SECONDS} s of running:\n{output[-4000:]}"
    # SIGTERM through tini (the pod's PID 1) stops the query cleanly: exit 0.
    assert result.returncode == 0, f"the job did not stop cleanly on SIGTERM (exit {result.returncode}):\n{output[-4000:]}"


def test_the_job_checkpoints_to_an_s3_store_with_the_images_jars(container, s3_store, s3_bucket, tmp_path):
    """The rate-to-console sample with an s3a:// checkpoint on SeaweedFS (testbed/seaweedfs.py, on the
    host's loopback: the container shares its network), the Secret as files: the image's S3A jars write
    the checkpoint, its obstore reads it (the checkpoint gate), and no key shows in the output."""
    import yaml

    from app.checkpoints.reader import S3Options, configure_s3, read_checkpoint

    doc = yaml.safe_load((EXAMPLES / "rate-to-console.yaml").read_text())
    location = f"s3a://{s3_bucket}/image/rate-to-console"
    doc["spec"]["trigger"] = {"microBatch": {"interval": "1s"}}
    doc["spec"]["checkpoint"] = {"location": location, "s3": s3_store.s3_block("streamq-store")}
    work = tmp_path / "work"
    s3_store.write_secret(work / "secrets", "streamq-store")
    (work / "q.yaml").write_text(yaml.safe_dump(doc))
    for path in [work, *work.rglob("*")]:  # the job runs as uid 1000
        path.chmod(0o755 if path.is_dir() else 0o644)
    result = container.run(
        "bash", "-c", RUN_UNTIL_ROWS, "run-until-rows", *container.entrypoint, "job", "run", "/work/q.yaml",
        env={"TINI_SUBREAPER": "1", "START_TIMEOUT": str(START_TIMEOUT), "RUN_SECONDS": "8",
             "STREAMQ_SECRETS_DIR": "/work/secrets"},
        volumes=[f"{work}:/work:ro"], timeout=START_TIMEOUT + 120,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"exit {result.returncode}:\n{output[-4000:]}"
    assert s3_store.secret_key not in output and s3_store.access_key not in output
    configure_s3(S3Options(s3_store.endpoint, "us-east-1", True, s3_store.access_key, s3_store.secret_key))
    try:
        state = read_checkpoint(location)
    finally:
        configure_s3(S3Options())
    assert state.exists and state.query_id and state.last_committed is not None and state.last_committed >= 1, (
        state,
        output[-3000:],
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_executor_entrypoint_starts_spark_kubernetes_executor_backend(container):
    port = _free_port()  # nothing listens there: the executor must try it and give up
    env = {
        "SPARK_DRIVER_URL": f"spark://CoarseGrainedScheduler@127.0.0.1:{port}",
        "SPARK_EXECUTOR_ID": "1",
        "SPARK_EXECUTOR_CORES": "1",
        "SPARK_APPLICATION_ID": "spark-smoke",
        "SPARK_EXECUTOR_POD_IP": "127.0.0.1",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "smoke-exec-1",
        "SPARK_EXECUTOR_MEMORY": "512m",
        "SPARK_JAVA_OPT_0": "-Dspark.network.timeout=5s",
        "SPARK_JAVA_OPT_1": "-Dspark.rpc.numRetries=1",
        "TINI_SUBREAPER": "1",
    }
    dry = container.run_image("executor", env={**env, "STREAMQ_ENTRYPOINT_DRY_RUN": "1"})
    assert dry.returncode == 0, dry.stderr
    command = dry.stdout
    assert "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend" in command, f"{dry.stdout}\n{dry.stderr}"
    assert "/opt/streamq/jars/spark-kafka/\\*" in command, command  # the Kafka jars are on the classpath
    assert "/opt/streamq/jars/s3a/\\*" in command, command  # and S3A's: state stores write s3a:// checkpoints there
    for flag, value in [("--driver-url", env["SPARK_DRIVER_URL"]), ("--executor-id", "1"), ("--cores", "1"),
                        ("--app-id", "spark-smoke"), ("--hostname", "127.0.0.1"), ("--resourceProfileId", "0"),
                        ("--podName", "smoke-exec-1")]:  # fmt: skip
        assert f"{flag} {value}" in command, (flag, command)
    assert "-Xmx512m" in command and "-Dspark.network.timeout=5s" in command

    real = container.run_image("executor", env=env, timeout=180)
    output = real.stdout + real.stderr
    assert "KubernetesExecutorBackend" in output and "Started daemon" in output, output[-4000:]
    assert "ClassNotFoundException" not in output and "Usage" not in output, output[-4000:]
    assert f"127.0.0.1:{port}" in output, output[-4000:]  # it tried the driver it was given
    assert real.returncode != 0  # and gave up, since no driver answers


def test_archive_imports_into_containerd_under_the_name_pods_use(image_archive: Path):
    if shutil.which("containerd") is None or shutil.which("ctr") is None:
        _unavailable("containerd is not installed (apt-get install containerd)")
    if os.geteuid() != 0:
        _unavailable("a private containerd needs root")
    # hack/build-image.sh names the archive streamq-<tag>.tar (or .oci.tar)
    tag = image_archive.name.removeprefix("streamq-").removesuffix(".oci.tar").removesuffix(".tar")
    with tempfile.TemporaryDirectory(prefix="streamq-ctd-") as tmp:
        root = Path(tmp)
        (root / "config.toml").write_text('version = 2\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n')
        socket_path = root / "containerd.sock"
        log = (root / "containerd.log").open("w")
        daemon = subprocess.Popen(
            ["containerd", "--config", str(root / "config.toml"), "--root", str(root / "root"),
             "--state", str(root / "state"), "--address", str(socket_path)],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            ctr = ["ctr", "--address", str(socket_path), "--namespace", "k8s.io"]

            def serving() -> bool:
                assert daemon.poll() is None, (root / "containerd.log").read_text()
                return subprocess.run([*ctr, "version"], capture_output=True).returncode == 0

            wait_for(serving, 30, lambda: "containerd to serve\n" + (root / "containerd.log").read_text(), interval=0.2)
            imported = subprocess.run([*ctr, "images", "import", str(image_archive)], capture_output=True, text=True, timeout=600)
            assert imported.returncode == 0, imported.stderr
            listed = subprocess.run([*ctr, "images", "check"], capture_output=True, text=True, check=True).stdout
            # `image: streamq:<tag>` in a pod means docker.io/library/streamq:<tag> to the kubelet.
            line = next((row for row in listed.splitlines() if row.startswith(f"docker.io/library/streamq:{tag} ")), None)
            assert line, listed
            assert "complete" in line, line
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)
            log.close()
