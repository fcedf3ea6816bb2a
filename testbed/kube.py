"""A real kube-apiserver + etcd on loopback for integration tests (envtest-style).

Nothing here is mocked: ``KubeApiServer.start()`` generates a throw-away PKI
with the ``openssl`` CLI, starts ``etcd`` and ``kube-apiserver`` (built by
``hack/install-kube.sh``) on free 127.0.0.1 ports inside a temporary
directory, waits until ``/readyz`` answers ``ok`` and writes an admin
(``system:masters``) kubeconfig. ``stop()`` terminates both processes and
removes the directory.

    from testbed.kube import KubeApiServer

    with KubeApiServer() as kube:
        kube.kubectl("get", "namespaces")
        api = kube.api_client()          # kubernetes.client.ApiClient

There is no kube-controller-manager, scheduler or kubelet: objects are stored
and validated, but nothing reconciles them (namespaces stay ``Terminating``,
pods stay ``Pending``, no default ServiceAccount is created, which is why the
``ServiceAccount`` admission plugin is disabled as in controller-runtime's
envtest).
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.wait import WaitTimeout, wait_for

REPO_ROOT = Path(__file__).resolve().parents[1]
INSTALL_SCRIPT = REPO_ROOT / "hack" / "install-kube.sh"

# First address of the service range: the ClusterIP of the `kubernetes` Service.
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
KUBERNETES_SERVICE_IP = "10.0.0.1"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"


class KubeBinaryNotFound(FileNotFoundError):
    """A binary that ``hack/install-kube.sh`` builds is not in the cache."""


class KubeStartError(RuntimeError):
    """etcd or kube-apiserver did not come up; the message carries their log tails."""


class KubectlError(subprocess.CalledProcessError):
    """kubectl exited non-zero; ``str()`` includes its stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstderr: {(self.stderr or '').strip()}"


# --------------------------------------------------------------------------- binaries


def kube_version() -> str:
    """The Kubernetes version the tests use: ``$STREAMQ_KUBE_VERSION`` or the
    default of ``hack/install-kube.sh`` (the single source of truth)."""
    env = os.environ.get("STREAMQ_KUBE_VERSION")
    if env:
        return env
    text = INSTALL_SCRIPT.read_text()
    m = re.search(r"^KUBE_VERSION=\$\{STREAMQ_KUBE_VERSION:-(v[0-9][^}]*)\}", text, re.M)
    if not m:
        raise RuntimeError(f"cannot read the default KUBE_VERSION from {INSTALL_SCRIPT}")
    return m.group(1)


ESTABLISHED = '{.status.conditions[?(@.type=="Established")].status}'


def wait_established(kubectl: Any, *crds: str, timeout: float = 60) -> None:
    """Each CRD's Established condition True. Polled with `kubectl get`, not `kubectl wait`, which
    fails at once ("accessor error") on a CRD so new that its status has no conditions yet."""
    for crd in crds:
        wait_for(lambda crd=crd: kubectl("get", f"crd/{crd}", "-o", f"jsonpath={ESTABLISHED}").stdout.strip() == "True",
                 timeout, f"CRD {crd} Established", ignore=(RuntimeError, subprocess.CalledProcessError))  # fmt: skip


def kube_bin_dir() -> Path:
    """Where ``hack/install-kube.sh`` puts the binaries:
    ``$STREAMQ_KUBE_BIN_DIR`` if set, else
    ``${STREAMQ_CACHE:-~/.cache/streamq}/kube/<version>/bin``."""
    env = os.environ.get("STREAMQ_KUBE_BIN_DIR")
    if env:
        return Path(env)
    cache = os.environ.get("STREAMQ_CACHE") or str(Path.home() / ".cache" / "streamq")
    return Path(cache) / "kube" / kube_version() / "bin"


def kube_bin(name: str) -> Path:
    """Path of a cached binary (``etcd``, ``kube-apiserver``, ``kubectl``, ``kubelet``,
    ``helm``, ...); raises :class:`KubeBinaryNotFound` telling how to build it."""
    path = kube_bin_dir() / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise KubeBinaryNotFound(
            f"{name} not found at {path}; build it with `hack/install-kube.sh` "
            f"(or `hack/install-kube.sh e2e` for the node components and helm)"
        )
    return path


def missing_binaries(names: Iterable[str] = ("etcd", "kube-apiserver", "kubectl")) -> list[str]:
    missing = []
    for name in names:
        try:
            kube_bin(name)
        except KubeBinaryNotFound:
            missing.append(name)
    return missing


# --------------------------------------------------------------------------- helpers


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child between fork and exec
    # If the test process dies (SIGKILL, crash), take etcd/apiserver with it.
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    os.setpgrp()  # own process group: a ^C in the terminal does not reach it first


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"


@dataclass(frozen=True)
class Pki:
    """Files of the throw-away PKI (all PEM)."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise KubeStartError(f"openssl {' '.join(args)} failed:\n{proc.stderr}")


def _ec_key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path), cwd=path.parent)


def _sign(d: Path, name: str, subject: str, extensions: str, days: int) -> None:
    key, csr, ext = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.ext"
    _ec_key(key)
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr), cwd=d)
    ext.write_text(extensions)
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", "ca.crt", "-CAkey", "ca.key",
        "-set_serial", str(secrets.randbits(63)), "-days", str(days), "-sha256",
        "-extfile", str(ext), "-out", f"{name}.crt", cwd=d,
    )  # fmt: skip
    csr.unlink()
    ext.unlink()


def make_pki(d: Path, days: int = 7, sans_ips: Sequence[str] = ("127.0.0.1",), sans_dns: Sequence[str] = ()) -> Pki:
    """One CA; a serving cert for the apiserver (loopback + the in-cluster names);
    an admin client cert in ``system:masters``; an RSA service-account key pair."""
    if shutil.which("openssl") is None:
        raise KubeStartError("the openssl CLI is required to make the test PKI")
    d.mkdir(parents=True, exist_ok=True)
    _ec_key(d / "ca.key")
    _openssl(
        "req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=streamq-test-ca", "-days", str(days),
        "-sha256", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature", "-out", "ca.crt", cwd=d,
    )  # fmt: skip
    ips = ["127.0.0.1", KUBERNETES_SERVICE_IP, *sans_ips]
    dns = [
        "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local", *sans_dns,
    ]  # fmt: skip
    san = ",".join([f"IP:{ip}" for ip in dict.fromkeys(ips)] + [f"DNS:{n}" for n in dict.fromkeys(dns)])
    _sign(
        d, "apiserver", "/CN=kube-apiserver",
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage=serverAuth\nsubjectAltName={san}\n", days,
    )  # fmt: skip
    _sign(
        d, "admin", "/O=system:masters/CN=streamq-admin",
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\n", days,
    )  # fmt: skip
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "sa.key", cwd=d)
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    for key in d.glob("*.key"):
        key.chmod(0o600)
    return Pki(
        ca_cert=d / "ca.crt", ca_key=d / "ca.key",
        server_cert=d / "apiserver.crt", server_key=d / "apiserver.key",
        admin_cert=d / "admin.crt", admin_key=d / "admin.key",
        sa_key=d / "sa.key", sa_pub=d / "sa.pub",
    )  # fmt: skip


def sign_cert(
    d: Path,
    name: str,
    subject: str,
    *,
    client: bool = True,
    server: bool = False,
    sans_ips: Sequence[str] = (),
    sans_dns: Sequence[str] = (),
    days: int = 7,
) -> tuple[Path, Path]:
    """Another certificate from the CA in ``d`` (made by :func:`make_pki`): e.g. a
    kubelet's client (``/O=system:nodes/CN=system:node:NAME``) or serving certificate.
    Returns (cert, key)."""
    usages = ",".join(u for u, on in (("clientAuth", client), ("serverAuth", server)) if on)
    ext = f"basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage={usages}\n"
    san = [f"IP:{ip}" for ip in sans_ips] + [f"DNS:{n}" for n in sans_dns]
    if san:
        ext += f"subjectAltName={','.join(san)}\n"
    _sign(d, name, subject, ext, days)
    (d / f"{name}.key").chmod(0o600)
    return d / f"{name}.crt", d / f"{name}.key"


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(
    path: Path,
    server: str,
    pki: Pki,
    *,
    token: str | None = None,
    namespace: str = "default",
    name: str = "streamq-test",
) -> Path:
    """A self-contained kubeconfig (certificates embedded; JSON is valid YAML):
    the admin client certificate, or a bearer ``token`` (e.g. a ServiceAccount's)."""
    if token is None:
        user_name = "streamq-admin"
        user = {"client-certificate-data": _b64(pki.admin_cert), "client-key-data": _b64(pki.admin_key)}
    else:
        user_name, user = "token-user", {"token": token}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": _b64(pki.ca_cert)}}],
        "users": [{"name": user_name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user_name, "namespace": namespace}}],
        "current-context": name,
        "preferences": {},
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
    return path


# --------------------------------------------------------------------------- the server


class KubeApiServer:
    """etcd + kube-apiserver on loopback, envtest-style.

    Attributes after :meth:`start`:
      ``kubeconfig`` (Path, admin / system:masters), ``server`` (https URL),
      ``etcd_url``, ``pki`` (:class:`Pki`), ``dir`` (the temp dir), ``version``.
    """

    def __init__(
        self,
        *,
        extra_apiserver_args: Sequence[str] = (),
        extra_etcd_args: Sequence[str] = (),
        start_timeout: float = 90.0,
        keep_dir: bool | None = None,
        host: str = "127.0.0.1",
        service_accounts: bool = False,
    ) -> None:
        """``host``: the address the apiserver binds and advertises (a node's address
        for a whole cluster, so pods reach it through the ``kubernetes`` Service).
        ``service_accounts``: keep the ServiceAccount admission plugin (needs a
        kube-controller-manager to make the ``default`` accounts)."""
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.extra_etcd_args = list(extra_etcd_args)
        self.start_timeout = start_timeout
        self.keep_dir = os.environ.get("STREAMQ_KEEP_KUBE_DIR") == "1" if keep_dir is None else keep_dir
        self.host = host
        self.service_accounts = service_accounts
        self.dir: Path | None = None
        self.pki: Pki | None = None
        self.server: str | None = None
        self.etcd_url: str | None = None
        self.kubeconfig: Path | None = None
        self.version: dict[str, Any] | None = None
        self._etcd: subprocess.Popen | None = None
        self._apiserver: subprocess.Popen | None = None

    # -- lifecycle ------------------------------------------------------------------

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return any(p is not None and p.poll() is None for p in (self._etcd, self._apiserver))

    def exited(self) -> str | None:
        """None while etcd and the apiserver both run; else which one exited, how (a negative
        code is the signal that ended it) and the last lines of its log."""
        for name, proc in (("kube-apiserver", self._apiserver), ("etcd", self._etcd)):
            if proc is not None and proc.poll() is not None:
                how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
                return f"{name} exited ({how}); last lines of {self.dir / (name + '.log')}:\n{_tail(self.dir / (name + '.log'))}"
        return None

    def start(self) -> KubeApiServer:
        if self.running:
            raise RuntimeError("already started")
        etcd, apiserver, kubectl = kube_bin("etcd"), kube_bin("kube-apiserver"), kube_bin("kubectl")
        self._kubectl_path = kubectl
        self.dir = Path(tempfile.mkdtemp(prefix="streamq-kube-"))
        try:
            self.pki = make_pki(self.dir / "pki", sans_ips=(self.host,))
            deadline = time.monotonic() + self.start_timeout
            # Ports are picked free then handed over: another process can grab one
            # in between. A start that fails because a port is taken is retried.
            for attempt in range(3):
                try:
                    self._start_etcd(etcd, deadline)
                    self._start_apiserver(apiserver, deadline)
                    break
                except KubeStartError as e:
                    if attempt == 2 or "address already in use" not in str(e) or time.monotonic() > deadline:
                        raise
                    self._terminate_all()
            self.kubeconfig = write_kubeconfig(self.dir / "kubeconfig", self.server, self.pki)
            return self
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._terminate_all()
        if self.dir is not None and not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _terminate_all(self) -> None:
        # apiserver first (it holds etcd connections), then etcd.
        for attr in ("_apiserver", "_etcd"):
            proc = getattr(self, attr)
            if proc is None:
                continue
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
            setattr(self, attr, None)

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.dir / f"{name}.log", "ab")
        try:
            return subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.dir, preexec_fn=_die_with_parent, close_fds=True,
            )  # fmt: skip
        finally:
            log.close()

    def _fail(self, what: str, proc: subprocess.Popen, log: str) -> KubeStartError:
        state = f"exited with {proc.returncode}" if proc.poll() is not None else "still running"
        return KubeStartError(f"{what} did not become ready ({state}); last lines of {self.dir / log}:\n{_tail(self.dir / log)}")

    def _start_etcd(self, etcd: Path, deadline: float) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        data = self.dir / "etcd-data"
        shutil.rmtree(data, ignore_errors=True)
        self._etcd = self._spawn(
            "etcd",
            [
                str(etcd),
                "--name=streamq",
                f"--data-dir={data}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=streamq=http://127.0.0.1:{peer}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync=true",  # throw-away data: no fsync on every write
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
                *self.extra_etcd_args,
            ],
        )

        def healthy() -> bool:
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as r:
                return json.load(r).get("health") == "true"

        self._wait(healthy, self._etcd, "etcd", "etcd.log", deadline)

    def revive_apiserver(self) -> bool:
        """Start kube-apiserver again, on the same port with the same etcd, if it exited;
        True if it had. For a server an upstream bug can crash (see test_admission_policy)."""
        if self._apiserver is None or self._apiserver.poll() is None:
            return False
        port = int(self.server.rsplit(":", 1)[1])
        self._start_apiserver(kube_bin("kube-apiserver"), time.monotonic() + self.start_timeout, port)
        return True

    def _start_apiserver(self, apiserver: Path, deadline: float, port: int | None = None) -> None:
        port = port or free_port(self.host)
        self.server = f"https://{self.host}:{port}"
        pki = self.pki
        self._apiserver = self._spawn(
            "kube-apiserver",
            [
                str(apiserver),
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={self.host}",
                f"--advertise-address={self.host}",
                f"--secure-port={port}",
                f"--cert-dir={self.dir / 'apiserver-certs'}",
                f"--tls-cert-file={pki.server_cert}",
                f"--tls-private-key-file={pki.server_key}",
                f"--client-ca-file={pki.ca_cert}",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                "--authorization-mode=Node,RBAC",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--allow-privileged=true",
                # No controller-manager creates the `default` ServiceAccount (envtest does the same).
                *([] if self.service_accounts else ["--disable-admission-plugins=ServiceAccount"]),
                "--storage-backend=etcd3",
                "--profiling=false",
                "--v=1",
                *self.extra_apiserver_args,
            ],
        )
        ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
        ctx.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))

        def get(path: str) -> tuple[int, bytes]:
            try:
                with urllib.request.urlopen(f"{self.server}{path}", context=ctx, timeout=5) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as e:
                return e.code, e.read()

        def ready() -> bool:
            status, body = get("/readyz")
            if status != 200 or body.strip() != b"ok":
                return False
            # The `default` namespace is made by a bootstrap loop that /readyz does not wait for.
            return get("/api/v1/namespaces/default")[0] == 200

        self._wait(ready, self._apiserver, "kube-apiserver", "kube-apiserver.log", deadline)
        self.version = json.loads(get("/version")[1])

    def _wait(self, probe, proc: subprocess.Popen, what: str, log: str, deadline: float) -> None:
        def up() -> bool:
            if proc.poll() is not None:
                raise self._fail(what, proc, log)
            return probe()

        try:
            wait_for(up, deadline - time.monotonic(), what, ignore=(OSError, ValueError))
        except WaitTimeout:
            raise self._fail(f"{what} (timeout)", proc, log) from None

    # -- clients --------------------------------------------------------------------

    def kubectl(
        self, *args: str, input: str | bytes | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess:
        """Run the cached kubectl against this server; text output. Raises
        ``subprocess.CalledProcessError`` (with stderr in the message) if ``check``."""
        if self.kubeconfig is None:
            raise RuntimeError("not started")
        argv = [str(self._kubectl_path), f"--kubeconfig={self.kubeconfig}", *args]
        proc = subprocess.run(
            argv, input=input.encode() if isinstance(input, str) else input,
            capture_output=True, timeout=timeout,
        )  # fmt: skip
        result = subprocess.CompletedProcess(
            argv, proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
        )
        if check and result.returncode != 0:
            died = self.exited()  # a server gone mid-session: say so, not only "connection refused"
            raise KubectlError(result.returncode, argv, result.stdout, result.stderr + (f"\n{died}" if died else ""))
        return result

    def api_client(self):
        """A ``kubernetes.client.ApiClient`` for the admin user."""
        from kubernetes import config

        if self.kubeconfig is None:
            raise RuntimeError("not started")
        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def service_account_kubeconfig(self, namespace: str, name: str, path: Path | None = None, duration: str = "1h") -> Path:
        """A kubeconfig that authenticates as ServiceAccount ``namespace/name``
        (token from the TokenRequest API), e.g. to run the operator under its RBAC.
        The ServiceAccount must exist."""
        token = self.kubectl("-n", namespace, "create", "token", name, f"--duration={duration}").stdout.strip()
        path = path or self.dir / f"kubeconfig-{namespace}-{name}"
        return write_kubeconfig(path, self.server, self.pki, token=token, namespace=namespace)

    def env(self) -> dict[str, str]:
        """``os.environ`` plus ``KUBECONFIG`` pointing at this server (for subprocesses)."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
