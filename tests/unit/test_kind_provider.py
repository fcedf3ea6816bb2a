"""Pure pieces of the kind e2e provider (testbed/cluster/kind.py): its kind config,
the Kafka NodePort, and how it reads what hack/kind-up.sh prepare prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.cluster.kind import (
    KAFKA_NODE_PORT,
    NODE_KAFKA_HOME,
    NODE_WEED_DIR,
    kafka_nodeport_service,
    kind_config,
    parse_env_lines,
)

pytestmark = pytest.mark.unit


def test_kind_config_mounts_the_jars_and_maps_kafka_to_loopback():
    config = json.loads(kind_config("/cache/kafka/4.3.1", 40123))  # kind reads YAML: JSON is YAML
    assert config["kind"] == "Cluster" and config["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    (node,) = config["nodes"]
    assert node["role"] == "control-plane"
    assert node["extraMounts"][0] == {"hostPath": "/cache/kafka/4.3.1", "containerPath": NODE_KAFKA_HOME, "readOnly": True}
    patches = node["extraMounts"][1]
    assert Path(patches["hostPath"]).is_dir() and sorted(p.name for p in Path(patches["hostPath"]).iterdir()) == [
        f"{c}+json.json" for c in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
    ]
    (init,) = [json.loads(p) for p in config["kubeadmConfigPatches"]]
    assert init == {"kind": "InitConfiguration", "patches": {"directory": patches["containerPath"]}}
    assert node["extraPortMappings"] == [
        {"containerPort": KAFKA_NODE_PORT, "hostPort": 40123, "listenAddress": "127.0.0.1", "protocol": "TCP"}
    ]


def test_kind_config_mounts_the_weed_binary_when_it_was_built(tmp_path, monkeypatch):
    """The SeaweedFS pod (s3a:// scenarios) runs the cached static weed binary from the node."""
    weed = tmp_path / "bin" / "weed"
    weed.parent.mkdir()
    weed.write_text("#!/bin/sh\n")
    weed.chmod(0o755)
    monkeypatch.setenv("STREAMQ_WEED", str(weed))
    mounts = json.loads(kind_config("/k", 1))["nodes"][0]["extraMounts"]
    assert {"hostPath": str(weed.parent), "containerPath": NODE_WEED_DIR, "readOnly": True} in mounts
    monkeypatch.setenv("STREAMQ_WEED", str(tmp_path / "missing"))
    assert NODE_WEED_DIR not in [m["containerPath"] for m in json.loads(kind_config("/k", 1))["nodes"][0]["extraMounts"]]


def test_kind_pods_get_a_subnet_apart_from_the_local_providers():
    """Both providers run on one machine (CI's local e2e beside a kind try): the route to the
    kind node's pods must never cover the local node's pods."""
    import ipaddress

    from testbed.cluster.local import NODE_IP, POD_CIDR

    kind_pods = ipaddress.ip_network(json.loads(kind_config("/k", 1))["networking"]["podSubnet"])
    assert not kind_pods.overlaps(ipaddress.ip_network(POD_CIDR)) and ipaddress.ip_address(NODE_IP) not in kind_pods


def test_kafka_nodeport_targets_the_external_listener():
    svc = json.loads(kafka_nodeport_service("ns"))
    assert svc["metadata"] == {"name": "kafka-external", "namespace": "ns"}
    assert svc["spec"]["type"] == "NodePort" and svc["spec"]["selector"] == {"app": "kafka"}
    (port,) = svc["spec"]["ports"]
    assert (port["targetPort"], port["nodePort"]) == (9094, KAFKA_NODE_PORT)
    assert 30000 <= KAFKA_NODE_PORT <= 32767  # the default NodePort range


def test_parse_env_lines_keeps_only_assignments():
    out = "[kind-docker 10:00:00] starting\nDOCKER_HOST=unix:///run/x.sock\nKIND=/c/kind\nNODE_IMAGE=streamq-kind/node:v1-abc\nnoise = 1\n"
    assert parse_env_lines(out) == {
        "DOCKER_HOST": "unix:///run/x.sock",
        "KIND": "/c/kind",
        "NODE_IMAGE": "streamq-kind/node:v1-abc",
    }
    assert parse_env_lines("DOCKER_HOST=\n") == {"DOCKER_HOST": ""}  # the user's engine: no override


def test_the_readme_try_it_on_kind_commands_are_kind_up_commands():
    """README "Try it on kind" runs hack/kind-up.sh, whose `up` runs the kind provider's
    own cluster and add-ons code (python -m testbed.cluster.kind), and its
    subcommands are ones the script has."""
    import re

    root = Path(__file__).resolve().parents[2]
    section = (root / "README.md").read_text().split("## Try it on kind", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, re.S)
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]
    assert commands[0] == "hack/kind-up.sh" and commands[-1] == "hack/kind-up.sh down"
    script = (root / "hack" / "kind-up.sh").read_text()
    used = set(re.findall(r"hack/kind-up\.sh(?: (\w+))?", block)) - {""}
    handled = set(re.findall(r"^  (\w+)(?: \| [\w-]+)*\)", script, re.M))
    assert used <= handled, (used, handled)
    assert "-m testbed.cluster.kind up" in script
