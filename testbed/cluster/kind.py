"""Provider ``kind``: a one-node kind cluster in a Docker engine.

    hack/kind-up.sh prepare   the engine (the user's Docker, or one of our own:
                              hack/kind-docker.sh), the kind CLI and the node image
                              (built here by hack/kind-image.sh, or
                              STREAMQ_KIND_NODE_IMAGE, e.g. a published kindest/node)
    kind create cluster       with the Kafka jars of the cache mounted into the node
                              (the broker pod mounts them with hostPath, as on the
                              local provider) and one port of this machine's loopback
                              mapped to the node's NodePort for Kafka's external listener
    kind load image-archive   the streamq image (hack/build-image.sh)

Clients on this machine reach the broker at 127.0.0.1:<port> -> NodePort 30094 ->
the broker's external listener (advertised as 127.0.0.1:<port>); a replaced broker
pod is behind the same address. Checkpoints and the broker's data are directories
of the node container (``node_dir``), made with ``docker exec``.

``python -m testbed.cluster.kind up|down|kubeconfig`` is what hack/kind-up.sh (the
README's "Try it on kind") runs: the same cluster and add-ons as the e2e tier, plus
the fraud-filter sample, left running.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from contract.cli_help import HelpCommand
from contract.commands import invoke
from contract.names import LABEL_CREDENTIALS
from testbed.cluster.base import CACHE, REPO_ROOT, Cluster, kafka_home, log, run, streamq_image_archive
from testbed.kube import free_port
from testbed.wait import wait_for

NODE_KAFKA_HOME = "/streamq/kafka"
NODE_WEED_DIR = "/streamq/weed"
NODE_HOSTPATH_DIR = "/streamq/hostpath"
KAFKA_NODE_PORT = 30094
KIND_UP = REPO_ROOT / "hack" / "kind-up.sh"
KUBEADM_PATCHES = REPO_ROOT / "hack" / "kind" / "kubeadm-patches"
NODE_KUBEADM_PATCHES = "/kind/streamq-patches"
STATE_DIR = CACHE / "kind" / "clusters"
# Not kind's default 10.244.0.0/16: the local provider's pods use 10.244.0.0/24 on this same
# machine, and the route to the kind node's pods (route_pod_network) would take their traffic.
POD_SUBNET = "10.246.0.0/16"
APISERVER_MANIFEST = "/etc/kubernetes/manifests/kube-apiserver.yaml"
APISERVER_PARKED = "/etc/kubernetes/kube-apiserver.yaml.stopped"  # outside the kubelet's manifest directory


CONTROL_PLANE_ROLE = "node-role.kubernetes.io/control-plane"


def _weed_mount() -> list[dict]:
    """The cached weed binary's directory, for the SeaweedFS pod; none when it was never built
    (then only the s3a:// scenarios fail, saying so: KindCluster.node_weed_dir)."""
    from testbed.seaweedfs import WeedMissing, weed_binary

    try:
        return [{"hostPath": str(weed_binary().parent), "containerPath": NODE_WEED_DIR, "readOnly": True}]
    except WeedMissing:
        return []


def kind_config(kafka_home_dir: Path | str, kafka_host_port: int, workers: int = 0) -> str:
    """The cluster's kind config: one control-plane node with the Kafka jars mounted,
    loopback:<kafka_host_port> mapped to the node's NodePort for Kafka, and kubeadm
    patches (hack/kind/kubeadm-patches) that take the control plane's CPU requests
    away: on a 2-core machine they would leave no room for a Spark driver (the local
    provider's control plane runs outside any pod and requests nothing either). Its pods
    get POD_SUBNET, apart from the local provider's, so both can run on one machine.
    ``workers``: that many worker nodes beside it (the multinode tier); the control-plane node
    keeps its NoSchedule taint then, so queries land on workers and the add-ons, placed on the
    control-plane node (``infra_placement``), survive a stopped worker."""
    return json.dumps({
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "networking": {"podSubnet": POD_SUBNET},
        "kubeadmConfigPatches": [json.dumps({
            "kind": "InitConfiguration", "patches": {"directory": NODE_KUBEADM_PATCHES}})],
        "nodes": [{
            "role": "control-plane",
            "extraMounts": [
                {"hostPath": str(kafka_home_dir), "containerPath": NODE_KAFKA_HOME, "readOnly": True},
                {"hostPath": str(KUBEADM_PATCHES), "containerPath": NODE_KUBEADM_PATCHES, "readOnly": True},
                *_weed_mount(),
            ],
            "extraPortMappings": [{"containerPort": KAFKA_NODE_PORT, "hostPort": kafka_host_port,
                                   "listenAddress": "127.0.0.1", "protocol": "TCP"}],
        }, *({"role": "worker"} for _ in range(workers))],
    }, indent=2)  # fmt: skip


def kafka_nodeport_service(namespace: str) -> str:
    """A NodePort Service in front of the broker's external listener (9094)."""
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kafka-external", "namespace": namespace},
        "spec": {
            "type": "NodePort",
            "selector": {"app": "kafka"},
            "ports": [{"name": "external", "port": 9094, "targetPort": 9094, "nodePort": KAFKA_NODE_PORT}],
        },
    })  # fmt: skip


def parse_env_lines(text: str) -> dict[str, str]:
    """KEY=VALUE lines (what hack/kind-up.sh prepare prints); other lines are ignored."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key and key.replace("_", "").isalnum() and key.upper() == key:
            out[key] = value
    return out


class KindCluster(Cluster):
    provider = "kind"
    node_dir_root = NODE_HOSTPATH_DIR

    def __init__(self, name: str | None = None, workers: int = 0) -> None:
        self.name = name or os.environ.get("STREAMQ_KIND_CLUSTER", "streamq-e2e")
        self.workers = workers
        self.node = f"{self.name}-control-plane"
        self.dir = STATE_DIR / self.name
        self.kubeconfig = self.dir / "kubeconfig"
        self.kafka_port = 0
        self.tools: dict[str, str] = {}
        self._port_forward = None  # helpers.reconnect_kafka looks for it (no port-forward here)
        self._load_state()

    # ------------------------------------------------------------------ tools
    def _prepare(self) -> None:
        """The engine, kind and the node image (hack/kind-up.sh prepare): built or found."""
        if self.tools:
            return
        t0 = time.monotonic()
        out = run([str(KIND_UP), "prepare"], timeout=7200).stdout
        self.tools = parse_env_lines(out)
        missing = {"KIND", "NODE_IMAGE", "DOCKER_HOST"} - set(self.tools)
        if missing:
            raise RuntimeError(f"hack/kind-up.sh prepare printed no {', '.join(sorted(missing))}:\n{out}")
        log(f"kind tools ready in {time.monotonic() - t0:.0f}s: node image {self.tools['NODE_IMAGE']}")

    def _docker_env(self) -> dict[str, str]:
        env = dict(os.environ)
        host = self.tools.get("DOCKER_HOST")
        if host:
            env["DOCKER_HOST"] = host
        return env

    def _kind(self, *args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
        self._prepare()
        return run([self.tools["KIND"], *args], timeout=timeout, env=self._docker_env(), check=check)

    def docker(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        self._prepare()
        return run(["docker", *args], timeout=timeout, env=self._docker_env(), check=check)

    # ------------------------------------------------------------------ state
    def _load_state(self) -> None:
        try:
            state = json.loads((self.dir / "state.json").read_text())
        except (OSError, ValueError):
            return
        self.kafka_port = int(state.get("kafka_port") or 0)
        self.tools = state.get("tools") or {}
        self.workers = int(state.get("workers") or self.workers)

    def _save_state(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "state.json").write_text(
            json.dumps({"kafka_port": self.kafka_port, "tools": self.tools, "workers": self.workers}, indent=2)
        )

    # ------------------------------------------------------------------ lifecycle
    def up(self) -> KindCluster:
        self.tools = {}
        self._prepare()
        if self.name in self._kind("get", "clusters").stdout.split():
            log(f"deleting the leftover kind cluster {self.name}")
            self._kind("delete", "cluster", "--name", self.name)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.kafka_port = free_port()
        self._save_state()
        (self.dir / "kind.yaml").write_text(kind_config(kafka_home(), self.kafka_port, self.workers))
        t0 = time.monotonic()
        try:
            self._kind("create", "cluster", "--name", self.name, "--image", self.tools["NODE_IMAGE"],
                       "--config", str(self.dir / "kind.yaml"), "--kubeconfig", str(self.kubeconfig),
                       "--wait", "300s", "--retain")  # fmt: skip
            log(f"kind cluster {self.name} created in {time.monotonic() - t0:.0f}s")
            self.load_image(streamq_image_archive())
            # One CoreDNS replica is enough for one node (each asks for 0.1 CPU of the 2).
            self.kubectl("-n", "kube-system", "scale", "deployment/coredns", "--replicas=1")
            if self.workers:  # DNS on the node no test stops (its manifest tolerates the control plane already)
                self.kubectl("-n", "kube-system", "patch", "deployment/coredns", "--type=merge", "-p", json.dumps(
                    {"spec": {"template": {"spec": {"nodeSelector": self.infra_placement()["nodeSelector"]}}}}))  # fmt: skip
            wait_for(lambda: self.kubectl("-n", "kube-system", "rollout", "status", "deployment/coredns",
                                          "--timeout=10s", check=False).returncode == 0, 240,
                     lambda: "CoreDNS\n" + self.diagnostics(), interval=2, ignore=(Exception,))  # fmt: skip
            wait_for(lambda: self.kubectl("get", "serviceaccount", "default", check=False).returncode == 0, 60,
                     "the default ServiceAccount", ignore=(Exception,))  # fmt: skip
            self.route_pod_network()
        except BaseException:
            log("kind cluster did not come up:\n" + self.diagnostics())
            self.down()
            raise
        log(f"kind cluster {self.name} up in {time.monotonic() - t0:.0f}s (kubeconfig {self.kubeconfig})")
        return self

    def pod_network_routes(self) -> list[list[str]]:
        """`ip route` arguments that send each node's pod subnet through that node's container: the
        e2e Prometheus on this machine scrapes pods by their IPs, as it does on the local node, and a
        pod's packets to a server on this machine (the multinode tier's object store) find their way back."""
        out = self.kubectl("get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.podCIDR}{'\\n'}{end}").stdout
        routes = []
        for node, subnet in (line.split() for line in out.splitlines() if len(line.split()) == 2):
            node_ip = self.docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                                  node).stdout.split()[0]  # fmt: skip
            routes.append([subnet, "via", node_ip])
        return routes

    def route_pod_network(self) -> None:
        for route in self.pod_network_routes():
            taken = run(["ip", "route", "show", "exact", route[0]], check=False).stdout.strip()
            if taken and f"via {route[2]} " not in f"{taken} ":  # another network's pods (a local cluster): never take them
                log(
                    f"pod network route {' '.join(route)}: not added, {route[0]} is routed already ({taken}); "
                    "Prometheus on this machine cannot scrape this cluster's pods"
                )
                continue
            done = run(["ip", "route", "replace", *route], check=False)
            log(f"pod network route {' '.join(route)}: " + ("added" if done.returncode == 0 else done.stderr.strip()))

    def down(self) -> None:
        """Deletes the cluster; stops our own Docker engine when nothing else runs in it."""
        t0 = time.monotonic()
        try:
            if not self.tools:  # a cluster of an earlier process: the tools it used, without building any
                kind = CACHE / "kind" / "bin" / "kind"
                engine = run([str(REPO_ROOT / "hack" / "kind-docker.sh"), "env"], check=False)
                if kind.exists() and engine.returncode == 0:
                    self.tools = {"KIND": str(kind), **parse_env_lines(engine.stdout.replace("export ", ""))}
            if self.tools:
                try:
                    for route in self.pod_network_routes():
                        run(["ip", "route", "del", *route], check=False)
                except Exception:  # noqa: BLE001 - no cluster, no route
                    pass
                self._kind("delete", "cluster", "--name", self.name, check=False)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            run([str(REPO_ROOT / "hack" / "kind-docker.sh"), "down", "--if-idle"], check=False, timeout=120)
        log(f"kind cluster {self.name} down in {time.monotonic() - t0:.0f}s")

    def load_image(self, archive: Path) -> None:
        t0 = time.monotonic()
        self._kind("load", "image-archive", str(archive), "--name", self.name)
        log(f"loaded {archive.name} ({archive.stat().st_size >> 20} MiB) into the node in {time.monotonic() - t0:.0f}s")

    # ------------------------------------------------------------------ node operations
    def infra_placement(self) -> dict:
        if not self.workers:
            return {}
        return {"nodeSelector": {CONTROL_PLANE_ROLE: ""},
                "tolerations": [{"key": CONTROL_PLANE_ROLE, "operator": "Exists", "effect": "NoSchedule"}]}  # fmt: skip

    def worker_nodes(self) -> list[str]:
        """kind's names for the workers: <name>-worker, <name>-worker2, ..."""
        return [f"{self.name}-worker{i if i > 1 else ''}" for i in range(1, self.workers + 1)]

    def pause_node(self, node: str) -> None:
        """Freeze a node's container (kubelet, containerd and every pod's processes) without warning:
        to the cluster, a node that stopped answering; to its processes, no time passes."""
        self.docker("pause", node)
        log(f"node {node} paused")

    def unpause_node(self, node: str) -> None:
        self.docker("unpause", node)
        log(f"node {node} unpaused")

    def host_object_store(self, workdir: Path, namespace: str, secret: str, bucket: str):
        """SeaweedFS on this machine at kind's network gateway, which pods on every node reach (a node's
        own disk dies with it), with ``bucket`` made and its key pair in the Secret ``secret`` of
        ``namespace``. The caller stops it (``.stop()``)."""
        from testbed.seaweedfs import SeaweedS3

        store = SeaweedS3(workdir=workdir, ip=self.network_gateway()).start()
        try:
            store.create_bucket(bucket)
            self.kubectl("-n", namespace, "delete", "secret", secret, "--ignore-not-found")
            self.kubectl("-n", namespace, "create", "secret", "generic", secret,
                         *(f"--from-literal={k}={v}" for k, v in store.keys().items()))  # fmt: skip
            # the namespace's owners mark which Secrets queries may mount (policy.credentialSecrets)
            self.kubectl("-n", namespace, "label", "secret", secret, f"{LABEL_CREDENTIALS}=true")
        except BaseException:
            store.stop()
            raise
        return store

    def network_gateway(self) -> str:
        """This machine's address on kind's Docker network: pods reach a server here through it."""
        out = self.docker("network", "inspect", "kind", "-f", "{{range .IPAM.Config}}{{.Gateway}} {{end}}").stdout
        return next(ip for ip in out.split() if ":" not in ip)  # the IPv4 one

    def node_dir(self, name: str) -> str:
        """The directory ``name`` for a hostPath checkpoint, made on every node (a driver may land on any
        worker; each node's is its own directory), owned by the image's user."""
        path = f"{NODE_HOSTPATH_DIR}/{name}"
        for node in (self.node, *self.worker_nodes()):
            self.docker("exec", node, "sh", "-c", f"rm -rf {path} && mkdir -p {path} && chown 1000:1000 {path}")
        return path

    def node_kafka_home(self) -> str:
        return NODE_KAFKA_HOME

    def node_weed_dir(self) -> str:
        from testbed.seaweedfs import INSTALL_HINT, WeedMissing

        if self.docker("exec", self.node, "test", "-x", f"{NODE_WEED_DIR}/weed", check=False).returncode != 0:
            raise WeedMissing(
                f"no weed binary in the kind node (mounted at its creation): {INSTALL_HINT}, then recreate the cluster"
            )
        return NODE_WEED_DIR

    def kill_container(self, container_id: str) -> None:
        cid = container_id.split("://", 1)[-1]
        self.docker("exec", self.node, "ctr", "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", "--all", cid)

    def kafka_external(self) -> tuple[str, int]:
        return ("127.0.0.1", self.kafka_port)

    # ------------------------------------------------------------------ faults (tests/e2e/test_faults_*.py)
    def _on_node(self, script: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        return self.docker("exec", self.node, "bash", "-c", script, timeout=timeout, check=check)

    def _apiserver_ready(self) -> bool:
        try:
            return self.kubectl("get", "--raw", "/readyz", check=False, timeout=10).stdout.strip() == "ok"
        except subprocess.TimeoutExpired:
            return False

    def stop_apiserver(self) -> None:
        """kube-apiserver is the kubelet's static pod here: its manifest moved out of the
        manifest directory, the kubelet stops it (etcd and everything else keep running)."""
        self._on_node(f"mv {APISERVER_MANIFEST} {APISERVER_PARKED}")
        wait_for(lambda: not self._apiserver_ready(), 120, "kube-apiserver stopped by the kubelet", interval=1)
        log("kube-apiserver stopped (its static pod's manifest parked)")

    def start_apiserver(self, timeout: float = 120) -> None:
        """The manifest back: the kubelet starts the same pod; returns when /readyz says ok."""
        self._on_node(f"if [ -e {APISERVER_PARKED} ]; then mv {APISERVER_PARKED} {APISERVER_MANIFEST}; fi")
        wait_for(self._apiserver_ready, timeout, "kube-apiserver ready again", interval=1)
        log("kube-apiserver started again")

    def restart_node_component(self, name: str, down_s: float = 0) -> None:
        """``systemctl stop`` of the node's kubelet or containerd (the node container's
        systemd runs them; containers outlive containerd, as on the local node), wait
        ``down_s``, start it again; returns once it answers."""
        if name not in ("kubelet", "containerd"):
            raise ValueError(f"restart_node_component: {name} is neither kubelet nor containerd")
        self._on_node(f"systemctl stop {name}")
        log(f"{name} stopped")
        if down_s:
            time.sleep(down_s)  # the outage itself: its length is the point
        self._on_node(f"systemctl start {name}")
        answers = (
            "ctr version >/dev/null"
            if name == "containerd"
            # the kubelet's healthz, with bash alone
            else "exec 3<>/dev/tcp/127.0.0.1/10248 && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && grep -qx ok <&3"
        )
        wait_for(lambda: self._on_node(answers, timeout=20, check=False).returncode == 0, 120, f"{name} answering again",
                 interval=1, ignore=(subprocess.TimeoutExpired,))  # fmt: skip
        log(f"{name} started again")

    def start_kafka_port_forward(self, namespace: str) -> None:
        """Called by the add-ons once the broker runs (and again after it was replaced):
        the NodePort Service that loopback:<kafka_port> is mapped to. No port-forward:
        the mapping survives the broker's pod."""
        self.apply(kafka_nodeport_service(namespace))

    def diagnostics(self) -> str:
        out = []
        for argv in (
            ["logs", "--tail", "30", self.node],
            ["exec", self.node, "journalctl", "--no-pager", "-n", "40", "-u", "kubelet", "-u", "containerd"],
        ):
            try:
                proc = self.docker(*argv, check=False, timeout=30)
                out.append(f"--- docker {' '.join(argv[:2])}\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
            except Exception as exc:  # noqa: BLE001 - diagnostics only
                out.append(f"--- docker {' '.join(argv[:2])}: {exc}")
        if self.kubeconfig.exists():
            out.append(self.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout)
        return "\n".join(out)


# ---------------------------------------------------------------------- try it (hack/kind-up.sh)


def try_it(cluster: KindCluster) -> None:
    """The fraud filter in continuous mode on the cluster's broker: payments in, the
    query Ready, the flagged payments read back from the output topic."""
    from testbed.cluster.addons import E2E_NAMESPACE
    from testbed.cluster.workload import Kafka, Queries, flagged, fraud_spec, payments, wait_output

    kafka = Kafka(cluster.kafka_bootstrap)
    source, sink = kafka.create_topic("payments", partitions=2), kafka.create_topic("payments-flagged", partitions=1)
    records = payments(90)
    kafka.produce(source, records)
    sq = Queries(cluster, "try-it", E2E_NAMESPACE)
    sq.apply("fraud-filter", fraud_spec(source, sink, cluster.node_dir("fraud-filter")))
    log("StreamingQuery fraud-filter applied; waiting for it to be Ready")
    sq.wait_running("fraud-filter", timeout=600)
    ready = wait_for(lambda: next((c for c in sq.status("fraud-filter").get("conditions") or []
                                   if c.get("type") == "Ready" and c.get("status") == "True"), None), 300,
                     lambda: "fraud-filter Ready\n" + sq.describe("fraud-filter"), interval=2, ignore=(Exception,))  # fmt: skip
    out = wait_output(kafka, sink, flagged(records), 300, lambda: sq.describe("fraud-filter"))
    print(cluster.kubectl("-n", E2E_NAMESPACE, "get", "sq", "-o", "wide").stdout, flush=True)
    print(f"Ready: {ready.get('reason', '')} {ready.get('message', '')}".strip())
    print(f"{len(records)} payments in topic {source}; {out.summary()} in topic {sink}, e.g.:")
    for key, value in out.records[:3]:
        print(f"  {key}: {value}")


class Command(StrEnum):
    UP = "up"
    DOWN = "down"
    KUBECONFIG = "kubeconfig"
    BOOTSTRAP = "bootstrap"


NO_OPERATOR_HELP = (
    "the cluster alone (DNS, the streamq image loaded): no Kafka, no operator, no sample, "
    "for the README's cluster quick start (make quickstart), which installs them"
)
cli = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})


@cli.command(help="a kind cluster with Kafka, the operator and the fraud-filter sample", cls=HelpCommand)
def kind_cluster(
    ctx: typer.Context,
    command: Annotated[Command, typer.Argument(metavar="COMMAND", help="up, down, kubeconfig or bootstrap")],
    name: Annotated[str, typer.Option(metavar="NAME", envvar="STREAMQ_KIND_CLUSTER")] = "streamq",
    no_sample: Annotated[bool, typer.Option("--no-sample", help="no fraud-filter query")] = False,
    no_operator: Annotated[bool, typer.Option("--no-operator", help=NO_OPERATOR_HELP)] = False,
    workers: Annotated[int, typer.Option(metavar="WORKERS", help="worker nodes beside the control-plane node")] = 0,
) -> None:
    ctx.obj.result = _run(command, name, no_sample=no_sample, no_operator=no_operator, workers=workers)


def _run(command: Command, name: str, no_sample: bool, no_operator: bool, workers: int) -> int:
    cluster = KindCluster(name, workers=workers)
    if command == Command.DOWN:
        cluster.down()
        return 0
    if command in (Command.KUBECONFIG, Command.BOOTSTRAP):
        if not cluster.kubeconfig.exists():
            print(f"no kind cluster {name} (hack/kind-up.sh)", file=sys.stderr)
            return 1
        print(cluster.kubeconfig if command == Command.KUBECONFIG else f"127.0.0.1:{cluster.kafka_port}")
        return 0
    from testbed.cluster.addons import setup

    t0 = time.monotonic()
    cluster.up()
    if no_operator:
        from testbed.cluster.addons import check_dns

        check_dns(cluster)
        log(f"kind cluster {name} ready in {time.monotonic() - t0:.0f}s, without Kafka or streamq (--no-operator)")
        print(f"KUBECONFIG={cluster.kubeconfig}")
        return 0
    try:
        cluster.kafka_bootstrap = setup(cluster)
        if not no_sample:
            try_it(cluster)
    except BaseException:
        log(f"failed; the cluster stays up for a look (KUBECONFIG={cluster.kubeconfig}); hack/kind-up.sh down removes it")
        raise
    log(f"kind cluster {name} ready in {time.monotonic() - t0:.0f}s")
    print(f"KUBECONFIG={cluster.kubeconfig}")
    print(f"KAFKA_BOOTSTRAP={cluster.kafka_bootstrap}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return int(invoke(cli, argv, "python -m testbed.cluster.kind"))


if __name__ == "__main__":
    sys.exit(main())
