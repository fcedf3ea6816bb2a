"""A real S3-compatible store for s3a:// checkpoints: SeaweedFS's `weed server` on loopback.

``weed`` is built from the Go module proxy by hack/install-seaweedfs.sh into the cache
(hack/test.sh runs it). ``SeaweedS3`` starts master, volume server, filer and the S3 gateway
in one process on free loopback ports with a temporary data folder, with one identity (an
access key pair): requests without its signature are refused, so a test that reads or writes
proves the keys got where they had to. ``create_bucket`` signs a PUT Bucket itself (AWS SigV4,
stdlib only: the tests need no AWS SDK).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from testbed.kube import free_port

ROOT = Path(__file__).resolve().parents[1]
INSTALL_HINT = "run hack/install-seaweedfs.sh (builds weed from the Go module proxy into the cache, ~4 min cold)"
REGION = "us-east-1"


class WeedMissing(RuntimeError):
    pass


def weed_binary() -> Path:
    env = os.environ.get("STREAMQ_WEED")
    if env:
        path = Path(env)
    else:
        out = subprocess.run(
            [str(ROOT / "hack" / "install-seaweedfs.sh"), "--print-bin"], capture_output=True, text=True, check=True
        )
        path = Path(out.stdout.strip())
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise WeedMissing(f"no weed binary at {path}: {INSTALL_HINT}")
    return path


def _sign(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signed_request(
    method: str, url: str, access_key: str, secret_key: str, body: bytes = b"", region: str = REGION
) -> urllib.request.Request:
    """One AWS Signature Version 4 request (path-style URL, no query string)."""
    parsed = urllib.request.urlparse(url)
    now = datetime.datetime.now(datetime.UTC)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": parsed.netloc, "x-amz-content-sha256": payload, "x-amz-date": amz_date}
    signed = ";".join(sorted(headers))
    canonical = "\n".join([method, parsed.path or "/", "", *(f"{k}:{headers[k]}" for k in sorted(headers)), "", signed, payload])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _sign(_sign(_sign(_sign(f"AWS4{secret_key}".encode(), day), region), "s3"), "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={signed}, Signature={signature}"
    return urllib.request.Request(url, data=body if method in ("PUT", "POST") else None, method=method, headers=headers)


class SeaweedS3:
    """`weed server -s3` on 127.0.0.1 (or ``ip``: an address pods reach, e.g. kind's network
    gateway), data in a temporary folder removed by ``stop``."""

    def __init__(self, weed: Path | None = None, workdir: Path | None = None, ip: str = "127.0.0.1"):
        self.weed = weed or weed_binary()
        self.ip = ip
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="streamq-seaweedfs-"))
        self.access_key = "streamq" + secrets.token_hex(4)
        self.secret_key = secrets.token_urlsafe(24)
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = self.workdir / "weed.log"

    @property
    def endpoint(self) -> str:
        return f"http://{self.ip}:{self.port}"

    def start(self, timeout: float = 90.0) -> SeaweedS3:
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "streamq", "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }]}))  # fmt: skip
        ports = {name: free_port() for name in ("master", "volume", "filer", "s3")}
        grpc = {name: free_port() for name in ("master", "volume", "filer", "s3")}  # default: port + 10000, may be taken
        self.port = ports["s3"]
        args = [
            str(self.weed), "server", f"-dir={data}", f"-ip={self.ip}", f"-ip.bind={self.ip}",
            f"-master.port={ports['master']}", f"-master.port.grpc={grpc['master']}",
            f"-volume.port={ports['volume']}", f"-volume.port.grpc={grpc['volume']}",
            f"-filer.port={ports['filer']}", f"-filer.port.grpc={grpc['filer']}",
            "-s3", f"-s3.port={ports['s3']}", f"-s3.port.grpc={grpc['s3']}", f"-s3.config={config}",
            "-master.volumeSizeLimitMB=64", "-volume.max=8", "-metricsPort=0",
        ]  # fmt: skip
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.workdir)
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed server exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:  # a signed ListBuckets: answers once the gateway and the filer behind it are up
                with urllib.request.urlopen(
                    signed_request("GET", self.endpoint + "/", self.access_key, self.secret_key), timeout=5
                ) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                last = str(exc)
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(
            f"SeaweedFS S3 did not answer on {self.endpoint} within {timeout:.0f}s ({last}):\n{self.log()[-3000:]}"
        )

    def create_bucket(self, name: str, timeout: float = 60.0) -> str:
        """PUT Bucket, retried while the volume layout settles (SeaweedFS grows volumes lazily)."""
        deadline, last = time.monotonic() + timeout, ""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(
                    signed_request("PUT", f"{self.endpoint}/{name}", self.access_key, self.secret_key), timeout=10
                ):
                    return name
            except urllib.error.HTTPError as exc:
                if exc.code == 409:  # BucketAlreadyOwnedByYou
                    return name
                last = f"{exc.code} {exc.read()[:300]!r}"
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                last = str(exc)
            time.sleep(1)
        raise RuntimeError(f"could not create bucket {name}: {last}")

    def keys(self) -> dict[str, str]:
        """What a Secret with the default keys of spec.checkpoint.s3.credentials.secretRef holds."""
        return {"accessKeyId": self.access_key, "secretAccessKey": self.secret_key}

    def write_secret(self, secrets_dir: Path, name: str) -> Path:
        """The Secret as the driver pod sees it: one file per key under STREAMQ_SECRETS_DIR/<name>/."""
        folder = Path(secrets_dir) / name
        folder.mkdir(parents=True, exist_ok=True)
        for key, value in self.keys().items():
            (folder / key).write_text(value)
        return folder

    def s3_block(self, secret_name: str) -> dict:
        return {"endpoint": self.endpoint, "region": REGION, "pathStyleAccess": True,
                "credentials": {"secretRef": {"name": secret_name}}}  # fmt: skip

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if getattr(self, "_log", None) is not None:
            self._log.close()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)
