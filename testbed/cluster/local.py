"""Provider ``local``: a one-node cluster on this machine, from source-built binaries.

    etcd + kube-apiserver      testbed.kube.KubeApiServer, bound to the node address
    kube-controller-manager    garbage collector, ServiceAccount tokens, ReplicaSets...
    kube-scheduler
    containerd + runc          Debian's, with its own config, socket, root and state
    kubelet                    cgroupfs driver (cgroup v1, containerd 1.6 has no RuntimeConfig)
    kube-proxy                 iptables mode: Service IPs, e.g. kubernetes.default
    CoreDNS                    a Deployment in kube-system (see addons.py)

Networking stays on this machine: an empty bridge ``sq-node0`` (a dummy interface;
this kernel has no dummy driver) holds the node address, the CNI bridge ``sq-cni0`` holds the pods; a filter chain refuses any
forwarding between the pods and other interfaces, and CoreDNS forwards nothing
(no upstream resolver), so pods reach only each other, Services and the node.

Everything this adds to the host is undone by :meth:`LocalCluster.down` (also
after a crash: :func:`cleanup_leftovers` works from the state file alone):
processes, mounts, network namespaces, links, iptables rules (chains KUBE-*,
CNI-*, STREAMQ-*) and the sysctls kubelet and the cluster changed.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from testbed.cluster.base import CACHE, Cluster, kafka_home, log, run, streamq_image_archive
from testbed.kube import (
    SERVICE_CLUSTER_IP_RANGE,
    KubeApiServer,
    _die_with_parent,
    _tail,
    free_port,
    kube_bin,
    sign_cert,
    write_kubeconfig,
)
from testbed.wait import WaitTimeout, wait_for

NODE_NAME = "streamq-e2e-node"
NODE_IP = "10.245.0.1"
POD_CIDR = "10.244.0.0/24"
CLUSTER_DNS = "10.0.0.10"  # in SERVICE_CLUSTER_IP_RANGE (10.0.0.0/24)
BRIDGE = "sq-cni0"
DUMMY = "sq-node0"
CHAIN = "STREAMQ-E2E"
STATE_DIR = Path(os.environ.get("STREAMQ_E2E_STATE_DIR", "/run/streamq-e2e"))
DATA_DIR = Path(os.environ.get("STREAMQ_E2E_DATA_DIR", "/var/lib/streamq-e2e"))
CONTAINERD_ROOT = CACHE / "node" / "containerd"  # kept between runs: imported images stay
STATE_FILE = STATE_DIR / "state.json"
# One local cluster per machine (fixed names, addresses and dirs): held while one is up.
LOCK_FILE = Path(os.environ.get("STREAMQ_E2E_LOCK_FILE", "/run/streamq-e2e.lock"))
CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")
PAUSE_REF = "docker.io/streamq-e2e/pause:1.0"
# kubelet writes these when it starts (its "kernel tunables"); the cluster needs
# forwarding and bridged traffic through iptables. All are put back by down().
SYSCTLS = (
    "net/ipv4/ip_forward",
    "net/bridge/bridge-nf-call-iptables",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
OUR_CHAINS = re.compile(r"\b(KUBE-[A-Z0-9-]+|CNI-[A-Za-z0-9-]+|STREAMQ-E2E[A-Z0-9-]*)\b")


def _read_sysctl(key: str) -> str | None:
    try:
        return Path("/proc/sys", key).read_text().strip()
    except OSError:
        return None


def _write_sysctl(key: str, value: str) -> None:
    with contextlib.suppress(OSError):
        Path("/proc/sys", key).write_text(value + "\n")


def _cni_bin_dir() -> str:
    for d in CNI_BIN_DIRS:
        if Path(d, "bridge").exists():
            return d
    raise RuntimeError(f"no CNI plugins in {' or '.join(CNI_BIN_DIRS)}: run hack/install-node.sh")


def node_images() -> dict[str, Path]:
    """ref -> archive of the images hack/install-node.sh made for this provider."""
    images = CACHE / "node" / "images"
    pause = sorted(images.glob("pause-*.tar"), key=lambda p: p.stat().st_mtime)
    coredns = sorted(images.glob("coredns-*.tar"), key=lambda p: p.stat().st_mtime)
    if not pause or not coredns:
        raise FileNotFoundError(f"the pause and CoreDNS images are missing from {images}: run hack/install-node.sh")
    version = coredns[-1].name.removeprefix("coredns-").removesuffix(".tar")
    return {PAUSE_REF: pause[-1], f"docker.io/streamq-e2e/coredns:{version}": coredns[-1]}


class Daemon:
    """A component process with its log file; it dies with the test process."""

    def __init__(self, name: str, argv: list[str], logdir: Path, env: dict[str, str] | None = None):
        self.name, self.argv, self.log = name, argv, logdir / f"{name}.log"
        self.logdir, self.env = logdir, env
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=logdir,
                preexec_fn=_die_with_parent, close_fds=True, env=env,
            )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def check(self) -> None:
        if not self.alive():
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; last lines of {self.log}:\n{_tail(self.log)}")

    def stop(self, timeout: float = 20) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def again(self) -> Daemon:
        """The same process started again: same argv, environment and log (appended)."""
        return Daemon(self.name, self.argv, self.logdir, self.env)


class _NodeApiServer(KubeApiServer):
    """The apiserver of the cluster: it also reaches kubelets (logs, exec) as the admin."""

    argv: dict[str, list[str]]

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        # Kept so that the fault tests can stop the apiserver and start it again as it was.
        self.argv = {**getattr(self, "argv", {}), name: argv}
        return super()._spawn(name, argv)

    def _start_apiserver(self, apiserver: Path, deadline: float) -> None:
        self.extra_apiserver_args = [
            f"--kubelet-client-certificate={self.pki.admin_cert}",
            f"--kubelet-client-key={self.pki.admin_key}",
            "--kubelet-preferred-address-types=InternalIP",
        ]
        super()._start_apiserver(apiserver, deadline)


class ClusterBusy(RuntimeError):
    """Another local cluster is up on this machine."""


class MachineLock:
    """flock on LOCK_FILE: another test run on this machine waits instead of tearing
    down the cluster it would otherwise take for a crashed run's leftovers."""

    def __init__(self) -> None:
        self.fd: int | None = None

    def acquire(self, timeout: float) -> None:
        import fcntl

        LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        told: list[str] = []

        def locked() -> bool:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if not told:
                    told.append(os.pread(fd, 64, 0).decode(errors="replace").strip())
                    log(f"another local e2e cluster is up ({told[0]}); waiting up to {timeout:.0f}s for it to go down")
                return False

        try:
            wait_for(locked, timeout, f"the machine's e2e lock {LOCK_FILE}", interval=5)
        except WaitTimeout:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            raise ClusterBusy(f"another local e2e cluster is up on this machine ({LOCK_FILE}: {holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {time.strftime('%H:%M:%S')}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


class LocalCluster(Cluster):
    provider = "local"
    node_dir_root = str(DATA_DIR / "hostpath")

    def __init__(self) -> None:
        self.lock = MachineLock()
        self.kube: KubeApiServer | None = None
        self.daemons: dict[str, Daemon] = {}
        self.dir: Path | None = None
        self.state: dict[str, Any] = {}
        self.socket = STATE_DIR / "containerd.sock"

    # ------------------------------------------------------------------ up
    def up(self) -> LocalCluster:
        if os.geteuid() != 0:
            raise RuntimeError("the local provider needs root (containerd, kubelet, iptables)")
        self.lock.acquire(float(os.environ.get("STREAMQ_E2E_LOCK_TIMEOUT", "3600")))
        cleanup_leftovers()
        t0 = time.monotonic()
        try:
            self._prepare_host()
            self._start_control_plane()
            self._start_containerd()
            self._import_images()
            self._start_node()
            log(f"cluster up in {time.monotonic() - t0:.0f}s (apiserver {self.kube.server}, kubeconfig {self.kubeconfig})")
            return self
        except BaseException:
            log("cluster did not come up:\n" + self.diagnostics())
            self.down()
            raise

    def _save_state(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        STATE_FILE.write_text(json.dumps(self.state, indent=2))

    def _prepare_host(self) -> None:
        for d in (STATE_DIR, DATA_DIR):
            d.mkdir(parents=True, exist_ok=True)
        self.state = {"sysctls": {k: _read_sysctl(k) for k in SYSCTLS}, "links": [], "started": time.time()}
        self._save_state()
        _write_sysctl("net/ipv4/ip_forward", "1")
        _write_sysctl("net/bridge/bridge-nf-call-iptables", "1")
        if not Path("/sys/class/net", DUMMY).exists():
            # A bridge without ports, as a dummy interface: this kernel has no dummy driver.
            run(["ip", "link", "add", DUMMY, "type", "bridge"])
        self.state["links"] = [DUMMY, BRIDGE]
        self._save_state()
        run(["ip", "addr", "replace", f"{NODE_IP}/32", "dev", DUMMY])
        run(["ip", "link", "set", DUMMY, "up"])
        # Pods talk to each other, to Services and to the node; nothing is forwarded
        # between the pod bridge and any other interface.
        for argv in (
            ["iptables", "-w", "-N", CHAIN],
            ["iptables", "-w", "-A", CHAIN, "-i", BRIDGE, "-o", BRIDGE, "-j", "RETURN"],
            ["iptables", "-w", "-A", CHAIN, "-i", BRIDGE, "-j", "DROP"],
            ["iptables", "-w", "-A", CHAIN, "-o", BRIDGE, "-j", "DROP"],
            ["iptables", "-w", "-I", "FORWARD", "1", "-j", CHAIN],
        ):
            run(argv)
        (STATE_DIR / "resolv.conf").write_text("# pods with dnsPolicy Default get no resolver\n")

    def _start_control_plane(self) -> None:
        self.kube = _NodeApiServer(host=NODE_IP, service_accounts=True, start_timeout=120)
        self.kube.start()
        self.dir = self.kube.dir
        self.state["dir"] = str(self.dir)
        self._save_state()
        pki = self.kube.pki
        d = pki.ca_cert.parent
        self.kubeconfig = self.kube.kubeconfig
        certs = {
            "kubelet-client": sign_cert(d, "kubelet-client", f"/O=system:nodes/CN=system:node:{NODE_NAME}"),
            "controller-manager": sign_cert(d, "controller-manager", "/CN=system:kube-controller-manager"),
            "scheduler": sign_cert(d, "scheduler", "/CN=system:kube-scheduler"),
            "kube-proxy": sign_cert(d, "kube-proxy", "/CN=system:kube-proxy"),
        }
        self.kubelet_serving = sign_cert(
            d, "kubelet-serving", f"/CN={NODE_NAME}", client=False, server=True, sans_ips=(NODE_IP,), sans_dns=(NODE_NAME,)
        )
        self.component_kubeconfigs: dict[str, Path] = {}
        for name, (cert, key) in certs.items():
            path = write_kubeconfig(self.dir / f"{name}.kubeconfig", self.kube.server, pki, name=name)
            config = json.loads(path.read_text())
            config["users"][0]["user"] = {
                "client-certificate-data": base64.b64encode(cert.read_bytes()).decode(),
                "client-key-data": base64.b64encode(key.read_bytes()).decode(),
            }
            path.write_text(json.dumps(config, indent=2))
            self.component_kubeconfigs[name] = path
        self._start_component(
            "kube-controller-manager",
            *self._kubeconfig_flags("controller-manager"),
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_cert}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--use-service-account-credentials=true",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--controllers=*",
            "--concurrent-gc-syncs=5",
            "--v=1",
        )
        self._start_component(
            "kube-scheduler",
            *self._kubeconfig_flags("scheduler"),
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--v=1",
        )
        self._record_pids()

    def _start_component(self, binary: str, *flags: str) -> None:
        """One of Kubernetes' own binaries, run as the daemon of the same name."""
        self.daemons[binary] = Daemon(binary, [str(kube_bin(binary)), *flags], self.dir)

    def _kubeconfig_flags(self, component: str) -> tuple[str, ...]:
        """A control-plane component talks to the API server, and checks who calls it, as itself."""
        kubeconfig = self.component_kubeconfigs[component]
        return (
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
        )

    def _record_pids(self) -> None:
        self.state["pids"] = {name: d.pid for name, d in self.daemons.items()}
        self._save_state()

    def _start_containerd(self) -> None:
        CONTAINERD_ROOT.mkdir(parents=True, exist_ok=True)
        (STATE_DIR / "cni" / "net.d").mkdir(parents=True, exist_ok=True)
        (STATE_DIR / "certs.d").mkdir(parents=True, exist_ok=True)
        # Nothing is ever pulled: every image is imported. A pull of a name that is
        # missing goes to a closed port on loopback instead of the registry's host.
        for registry in ("docker.io", "registry.k8s.io", "localhost"):
            hosts = STATE_DIR / "certs.d" / registry
            hosts.mkdir(parents=True, exist_ok=True)
            (hosts / "hosts.toml").write_text(
                'server = "http://127.0.0.1:9"\n[host."http://127.0.0.1:9"]\n  capabilities = ["pull", "resolve"]\n'
            )
        cni = {
            "cniVersion": "0.4.0",
            "name": "streamq-e2e",
            "plugins": [
                {
                    "type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True,
                    "ipam": {
                        "type": "host-local", "ranges": [[{"subnet": POD_CIDR}]],
                        "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(STATE_DIR / "cni" / "ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }  # fmt: skip
        (STATE_DIR / "cni" / "net.d" / "10-streamq-e2e.conflist").write_text(json.dumps(cni, indent=2))
        config = f"""version = 2
root = "{CONTAINERD_ROOT}"
state = "{STATE_DIR / "containerd"}"
oom_score = 0
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{self.socket}.ttrpc"
[debug]
  level = "warn"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_REF}"
  # Negative oom_score_adj is refused here even for root (see shared/ENVIRONMENT.md).
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{_cni_bin_dir()}"
    conf_dir = "{STATE_DIR / "cni" / "net.d"}"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{STATE_DIR / "certs.d"}"
"""
        path = STATE_DIR / "containerd.toml"
        path.write_text(config)
        self.daemons["containerd"] = Daemon("containerd", ["containerd", "--config", str(path)], self.dir)
        self._record_pids()
        wait_for(
            lambda: (self.daemons["containerd"].check(), self.ctr("version", check=False).returncode == 0)[1],
            60,
            "containerd",
            interval=0.2,
            ignore=(Exception,),
        )

    def ctr(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        return run(["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args], check=check, timeout=timeout)

    def load_image(self, archive: Path) -> None:
        """Import an image archive into containerd's k8s.io namespace, unless this exact
        archive (size, mtime) was imported before and its images are still there."""
        marker_dir = CONTAINERD_ROOT / ".streamq-imports"
        marker_dir.mkdir(exist_ok=True)
        stat = archive.stat()
        key = f"{archive}:{stat.st_size}:{int(stat.st_mtime)}"
        marker = marker_dir / (archive.name + ".imported")
        if marker.exists():
            recorded = json.loads(marker.read_text())
            listed = self.ctr("images", "ls", "-q").stdout.split()
            if recorded.get("key") == key and all(ref in listed for ref in recorded.get("refs", [])):
                return
        t0 = time.monotonic()
        self.ctr("images", "import", str(archive))
        refs = _archive_refs(archive)
        marker.write_text(json.dumps({"key": key, "refs": refs}))
        log(f"imported {archive.name} ({stat.st_size >> 20} MiB) as {', '.join(refs)} in {time.monotonic() - t0:.0f}s")

    def _import_images(self) -> None:
        for archive in node_images().values():
            self.load_image(archive)
        archive = streamq_image_archive()
        if not archive.is_file():
            raise FileNotFoundError(f"no streamq image at {archive}: run hack/build-image.sh (or hack/install-node.sh)")
        self.load_image(archive)

    def _start_node(self) -> None:
        pki = self.kube.pki
        kubelet_dir = DATA_DIR / "kubelet"
        kubelet_dir.mkdir(parents=True, exist_ok=True)
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": NODE_IP,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 10248,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(pki.ca_cert)},
            },
            "authorization": {"mode": "Webhook"},
            "cgroupDriver": "cgroupfs",
            "clusterDNS": [CLUSTER_DNS],
            "clusterDomain": "cluster.local",
            "resolvConf": str(STATE_DIR / "resolv.conf"),
            "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "tlsCertFile": str(self.kubelet_serving[0]),
            "tlsPrivateKeyFile": str(self.kubelet_serving[1]),
            "rotateCertificates": False,
            "serializeImagePulls": False,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "maxPods": 110,
            "podPidsLimit": -1,
            "syncFrequency": "10s",
            "fileCheckFrequency": "20s",
            "nodeStatusReportFrequency": "10s",
            "registerNode": True,
            "logging": {"format": "text"},
        }  # fmt: skip
        path = self.dir / "kubelet-config.json"
        path.write_text(json.dumps(config, indent=2))
        self._start_component(
            "kubelet",
            f"--config={path}",
            f"--kubeconfig={self.component_kubeconfigs['kubelet-client']}",
            f"--root-dir={kubelet_dir}",
            f"--cert-dir={self.dir / 'kubelet-pki'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={NODE_IP}",
            "--v=1",
        )
        proxy = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.component_kubeconfigs["kube-proxy"])},
            "mode": "iptables",
            "hostnameOverride": NODE_NAME,
            "bindAddress": NODE_IP,
            "clusterCIDR": POD_CIDR,
            "healthzBindAddress": f"127.0.0.1:{free_port()}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            "nodePortAddresses": [f"{NODE_IP}/32"],
            # Leave the host's conntrack settings alone.
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            "iptables": {"syncPeriod": "30s", "minSyncPeriod": "0s"},
        }
        path = self.dir / "kube-proxy-config.json"
        path.write_text(json.dumps(proxy, indent=2))
        self._start_component("kube-proxy", f"--config={path}", "--v=1")
        self._record_pids()

        def node_ready() -> bool:
            for d in self.daemons.values():
                d.check()
            node = self.kubectl_json("get", "node", NODE_NAME)
            return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])

        wait_for(node_ready, 180, lambda: f"node {NODE_NAME} Ready" + "\n" + self.diagnostics(), interval=1, ignore=(Exception,))
        wait_for(
            lambda: self.kubectl("get", "serviceaccount", "default", check=False).returncode == 0,
            60,
            "the default ServiceAccount",
            ignore=(Exception,),
        )

    def cleanup_if_still_up(self) -> None:
        """At exit: this process's cluster, if down() never ran (the lock is still ours)."""
        if self.lock.fd is not None:
            cleanup_leftovers()
            self.lock.release()

    # ------------------------------------------------------------------ node operations
    def node_dir(self, name: str) -> str:
        path = Path(self.node_dir_root) / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        os.chown(path, 1000, 1000)
        return str(path)

    def node_kafka_home(self) -> str:
        return str(kafka_home())

    def node_weed_dir(self) -> str:
        from testbed.seaweedfs import weed_binary

        return str(weed_binary().parent)

    def kill_container(self, container_id: str) -> None:
        cid = container_id.split("://", 1)[-1]
        self.ctr("tasks", "kill", "--signal", "SIGKILL", "--all", cid)

    def kafka_external(self) -> tuple[str, int]:
        return ("", 9094)  # the broker's pod IP: the host routes to the pod bridge

    # ------------------------------------------------------------------ faults (tests/e2e/test_faults_*.py)
    def stop_apiserver(self) -> None:
        """SIGTERM to kube-apiserver (etcd keeps running); start_apiserver() brings it back."""
        proc = self.kube._apiserver
        if proc is None or proc.poll() is not None:
            raise RuntimeError("kube-apiserver is not running")
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log(f"kube-apiserver stopped (exit {proc.returncode})")

    def start_apiserver(self, timeout: float = 120) -> None:
        """kube-apiserver again with the flags it had (same port, certificates, etcd)."""
        kube = self.kube
        if kube._apiserver is not None and kube._apiserver.poll() is None:
            return
        kube._apiserver = kube._spawn("kube-apiserver", kube.argv["kube-apiserver"])

        def ready() -> bool:
            if kube._apiserver.poll() is not None:
                raise RuntimeError(
                    f"kube-apiserver exited {kube._apiserver.returncode}:\n{_tail(self.dir / 'kube-apiserver.log')}"
                )
            return self.kubectl("get", "--raw", "/readyz", check=False, timeout=10).stdout.strip() == "ok"

        wait_for(ready, timeout, "kube-apiserver ready again", interval=0.5, ignore=(subprocess.TimeoutExpired,))
        log("kube-apiserver started again")

    def restart_node_component(self, name: str, down_s: float = 0) -> None:
        """Stop ``kubelet`` or ``containerd`` (SIGTERM, as a service manager would), wait
        ``down_s``, start it again with the same flags; returns once it answers."""
        if name not in ("kubelet", "containerd"):
            raise ValueError(f"restart_node_component: {name} is neither kubelet nor containerd")
        old = self.daemons[name]
        old.stop(timeout=30)
        log(f"{name} stopped (exit {old.proc.returncode})")
        if down_s:
            time.sleep(down_s)  # the outage itself: its length is the point
        self.daemons[name] = old.again()
        self._record_pids()
        if name == "containerd":
            wait_for(lambda: (self.daemons[name].check(), self.ctr("version", check=False).returncode == 0)[1], 60,
                     "containerd answering again", interval=0.2, ignore=(subprocess.TimeoutExpired,))  # fmt: skip
        else:
            import urllib.request

            def healthy() -> bool:
                self.daemons[name].check()
                with urllib.request.urlopen("http://127.0.0.1:10248/healthz", timeout=2) as r:
                    return r.read().strip() == b"ok"

            wait_for(healthy, 120, "kubelet healthz again", interval=0.5, ignore=(OSError,))
        log(f"{name} started again")

    def diagnostics(self) -> str:
        out = []
        for name, d in list(self.daemons.items()) + ([("etcd", None), ("kube-apiserver", None)] if self.dir else []):
            logfile = d.log if d else self.dir / f"{name}.log"
            state = "" if d is None else (" (running)" if d.alive() else f" (exited {d.proc.returncode})")
            out.append(f"--- {name}{state}: {logfile}\n{_tail(logfile, 15)}")
        return "\n".join(out)

    # ------------------------------------------------------------------ down
    def down(self) -> None:
        t0 = time.monotonic()
        keep = os.environ.get("STREAMQ_E2E_KEEP_LOGS")
        if self.kube is not None and self.kube.running and "kubelet" in self.daemons and self.daemons["kubelet"].alive():
            # Let the kubelet stop the pods itself (the CNI releases their addresses).
            for name in ("kube-controller-manager", "kube-scheduler"):
                if name in self.daemons:
                    self.daemons[name].stop()
            with contextlib.suppress(Exception):
                self.kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=1", "--wait=false", timeout=30)
                wait_for(
                    lambda: not self.kubectl_json("get", "pods", "-A")["items"], 60, "pods gone", interval=1, ignore=(Exception,)
                )
        for name in ("kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler"):
            if name in self.daemons:
                self.daemons[name].stop()
        teardown_node(self.socket, self.daemons.get("containerd"))
        if self.kube is not None:
            if keep and self.dir is not None:
                self.kube.keep_dir = True
            self.kube.stop()
        self.daemons.clear()
        restore_host(self.state)
        self.lock.release()
        if keep and self.dir is not None:
            log(f"logs kept in {self.dir}")
        log(f"cluster down in {time.monotonic() - t0:.0f}s")


def _archive_refs(archive: Path) -> list[str]:
    import tarfile

    with tarfile.open(archive) as tar:
        try:
            manifest = json.load(tar.extractfile("manifest.json"))
        except KeyError:
            return []
    refs = []
    for entry in manifest:
        for tag in entry.get("RepoTags") or []:
            first = tag.split("/", 1)[0]
            if "/" not in tag:
                tag = f"docker.io/library/{tag}"
            elif "." not in first and ":" not in first and first != "localhost":
                tag = f"docker.io/{tag}"
            refs.append(tag)
    return refs


# ---------------------------------------------------------------------- teardown


def _mounts_under(prefixes: list[Path]) -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if any(point == str(p) or point.startswith(str(p) + "/") for p in prefixes):
                points.append(point)
    return sorted(set(points), key=lambda p: p.count("/"), reverse=True)


def teardown_node(socket: Path, containerd: Daemon | None) -> None:
    """Kill every container of the cluster's containerd, then stop containerd.
    Works on a leftover state too (starts containerd again if needed)."""
    config = STATE_DIR / "containerd.toml"
    started_here = None
    if not socket.exists() or run(["ctr", "--address", str(socket), "version"], check=False, timeout=10).returncode != 0:
        if (
            config.exists()
            and (CONTAINERD_ROOT / "io.containerd.runtime.v2.task").exists()
            or (STATE_DIR / "containerd").exists()
        ):
            logdir = STATE_DIR
            logdir.mkdir(parents=True, exist_ok=True)
            if config.exists():
                started_here = Daemon("containerd-cleanup", ["containerd", "--config", str(config)], logdir)
                with contextlib.suppress(TimeoutError):
                    wait_for(
                        lambda: run(["ctr", "--address", str(socket), "version"], check=False).returncode == 0,
                        30,
                        "containerd (cleanup)",
                        interval=0.2,
                        ignore=(Exception,),
                    )
    ctr = ["ctr", "--address", str(socket), "--namespace", "k8s.io"]
    if socket.exists() and run([*ctr, "version"], check=False, timeout=10).returncode == 0:
        tasks = [line.split()[0] for line in run([*ctr, "tasks", "ls", "-q"], check=False).stdout.splitlines() if line.strip()]
        for task in tasks:
            run([*ctr, "tasks", "kill", "--signal", "SIGKILL", "--all", task], check=False, timeout=30)
        for task in tasks:
            with contextlib.suppress(WaitTimeout):  # best effort, as the rest of the cleanup
                wait_for(lambda: run([*ctr, "tasks", "delete", task], check=False, timeout=30).returncode == 0, 5,  # noqa: B023
                         f"task {task} deleted", interval=0.25)  # fmt: skip
        for container in run([*ctr, "containers", "ls", "-q"], check=False).stdout.split():
            run([*ctr, "containers", "delete", container], check=False, timeout=60)
    for d in (containerd, started_here):
        if d is not None:
            d.stop(timeout=30)


def _clean_iptables(save: str, restore: str) -> None:
    if shutil.which(save) is None:
        return
    dump = run([save], check=False).stdout
    if not OUR_CHAINS.search(dump):
        return
    kept = [line for line in dump.splitlines() if not OUR_CHAINS.search(line)]
    run([restore, "-w"], input="\n".join(kept) + "\n", check=False)


def restore_host(state: dict[str, Any]) -> None:
    """Undo what up() did to the host: mounts, netns, links, iptables, sysctls, dirs."""
    for point in _mounts_under([STATE_DIR, DATA_DIR, CONTAINERD_ROOT]):
        if run(["umount", point], check=False).returncode != 0:
            run(["umount", "-l", point], check=False)
    for link in state.get("links") or [DUMMY, BRIDGE]:
        if Path("/sys/class/net", link).exists():
            run(["ip", "link", "delete", link], check=False)
    # veth ends left on the host by pods whose sandbox was never torn down
    for iface in Path("/sys/class/net").iterdir():
        master = iface / "master"
        if master.exists() and master.resolve().name == BRIDGE:
            run(["ip", "link", "delete", iface.name], check=False)
    for save, restore in (
        ("iptables-save", "iptables-restore"),
        ("ip6tables-save", "ip6tables-restore"),
        ("iptables-legacy-save", "iptables-legacy-restore"),
        ("ip6tables-legacy-save", "ip6tables-legacy-restore"),
    ):
        _clean_iptables(save, restore)
    for key, value in (state.get("sysctls") or {}).items():
        if value is not None and _read_sysctl(key) != value:
            _write_sysctl(key, value)
    for d in (STATE_DIR, DATA_DIR):
        shutil.rmtree(d, ignore_errors=True)
    # containers' leftovers in the kept containerd root (images stay)
    shutil.rmtree(CONTAINERD_ROOT / "io.containerd.runtime.v2.task", ignore_errors=True)


def cleanup_leftovers() -> None:
    """A crashed run's cluster: its processes died with it (PDEATHSIG), but containers,
    mounts, links and rules may remain. Undo them from the state file."""
    if not STATE_FILE.exists() and not Path("/sys/class/net", DUMMY).exists() and not _mounts_under([STATE_DIR, DATA_DIR]):
        return
    log("cleaning up a previous cluster's leftovers")
    state = {}
    with contextlib.suppress(OSError, ValueError):
        state = json.loads(STATE_FILE.read_text())
    for pid in (state.get("pids") or {}).values():
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
            if Path(cmdline).name in {"containerd", "kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler"}:
                os.kill(pid, signal.SIGKILL)
    teardown_node(STATE_DIR / "containerd.sock", None)
    restore_host(state)
    if state.get("dir"):
        shutil.rmtree(state["dir"], ignore_errors=True)
