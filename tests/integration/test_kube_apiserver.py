"""The kube_apiserver fixture gives a real, working API server (etcd + kube-apiserver)."""

from __future__ import annotations

import json
import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from testbed.kube import KubeApiServer, KubectlError, kube_version
from testbed.operator import unique
from testbed.wait import wait_for

pytestmark = pytest.mark.integration

GROUP = "test.streamq.io"


@pytest.fixture(scope="module")
def api(kube_apiserver: KubeApiServer):
    with kube_apiserver.api_client() as api_client:
        yield api_client


def test_server_reports_the_built_version(kube_apiserver: KubeApiServer, api):
    info = client.VersionApi(api).get_code()
    assert info.git_version == kube_version()
    assert (info.major, info.minor) == tuple(kube_version().lstrip("v").split(".")[:2])
    assert kube_apiserver.server.startswith("https://127.0.0.1:")
    assert kube_apiserver.kubeconfig.is_file()


def test_namespace_roundtrip(api):
    core = client.CoreV1Api(api)
    name = unique("ns")
    created = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"app": "streamq"})))
    assert created.metadata.uid

    fetched = core.read_namespace(name)
    assert fetched.metadata.uid == created.metadata.uid
    assert fetched.metadata.labels["app"] == "streamq"
    assert fetched.metadata.labels["kubernetes.io/metadata.name"] == name  # set by the apiserver
    assert name in {ns.metadata.name for ns in core.list_namespace(label_selector="app=streamq").items}

    with pytest.raises(ApiException) as conflict:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    assert conflict.value.status == 409

    # Objects are persisted in etcd: a ConfigMap written in the namespace reads back.
    core.create_namespaced_config_map(name, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"), data={"k": "v"}))
    assert core.read_namespaced_config_map("cm", name).data == {"k": "v"}


def widget_crd(plural: str) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural[:-1], "kind": plural.capitalize()[:-1]},
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["size"],
                                    "properties": {"size": {"type": "integer", "minimum": 1}},
                                },
                                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            },
                        }
                    },
                }
            ],
        },
    }


def test_crd_registration_and_custom_objects(api):
    ext = client.ApiextensionsV1Api(api)
    custom = client.CustomObjectsApi(api)
    plural = f"widgets{uuid.uuid4().hex[:6]}s"
    crd = widget_crd(plural)
    kind = crd["spec"]["names"]["kind"]
    ext.create_custom_resource_definition(crd)

    def established():
        conditions = ext.read_custom_resource_definition(crd["metadata"]["name"]).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_for(established, message=f"CRD {crd['metadata']['name']} to be Established")

    body = {"apiVersion": f"{GROUP}/v1alpha1", "kind": kind, "metadata": {"name": "w1"}, "spec": {"size": 3}}
    # Discovery of a fresh CRD can lag its Established condition by a moment.
    created = wait_for(lambda: _try_create(custom, plural, body), message="the custom resource to be served")
    assert created["metadata"]["uid"]
    got = custom.get_namespaced_custom_object(GROUP, "v1alpha1", "default", plural, "w1")
    assert got["spec"] == {"size": 3}

    # The structural schema is enforced by the server.
    bad = {**body, "metadata": {"name": "w2"}, "spec": {"size": 0}}
    with pytest.raises(ApiException) as invalid:
        custom.create_namespaced_custom_object(GROUP, "v1alpha1", "default", plural, bad)
    assert invalid.value.status == 422
    assert "spec.size" in invalid.value.body

    # The status subresource works (the operator writes status this way).
    patched = custom.patch_namespaced_custom_object_status(
        GROUP, "v1alpha1", "default", plural, "w1", {"status": {"phase": "Running"}}
    )
    assert patched["status"] == {"phase": "Running"}
    assert patched["metadata"]["generation"] == created["metadata"]["generation"]

    names = [o["metadata"]["name"] for o in custom.list_namespaced_custom_object(GROUP, "v1alpha1", "default", plural)["items"]]
    assert names == ["w1"]


def _try_create(custom: client.CustomObjectsApi, plural: str, body: dict):
    try:
        return custom.create_namespaced_custom_object(GROUP, "v1alpha1", "default", plural, body)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  namespace: default
data:
  answer: "42"
"""


def test_kubectl_server_side_apply_dry_run(kube_apiserver: KubeApiServer):
    name = unique("cm")
    manifest = CONFIGMAP.format(name=name)

    out = kube_apiserver.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=manifest)
    assert f"configmap/{name} serverside-applied (server dry run)" in out.stdout

    # Server dry run stores nothing.
    missing = kube_apiserver.kubectl("get", "configmap", name, check=False)
    assert missing.returncode != 0
    assert "NotFound" in missing.stderr

    # A real server-side apply stores it, with kubectl as the field manager.
    out = kube_apiserver.kubectl("apply", "--server-side", "-f", "-", input=manifest)
    assert f"configmap/{name} serverside-applied" in out.stdout
    obj = json.loads(kube_apiserver.kubectl("get", "configmap", name, "-o", "json", "--show-managed-fields").stdout)
    assert obj["data"] == {"answer": "42"}
    assert {m["manager"] for m in obj["metadata"]["managedFields"]} == {"kubectl"}

    # Validation runs in dry run too: an invalid object is refused.
    bad = manifest.replace(f"name: {name}", "name: Not_A_Valid_Name")
    refused = kube_apiserver.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=bad, check=False)
    assert refused.returncode != 0
    assert "Invalid value" in refused.stderr


def test_rbac_is_enforced_for_service_account_tokens(kube_apiserver: KubeApiServer):
    """Authorization is RBAC and the service-account signing key works (TokenRequest)."""
    ns = unique("rbac")
    kube_apiserver.kubectl("create", "namespace", ns)
    kube_apiserver.kubectl("-n", ns, "create", "serviceaccount", "reader")
    kubeconfig = kube_apiserver.service_account_kubeconfig(ns, "reader")
    as_reader = (f"--kubeconfig={kubeconfig}", "-n", ns)  # the last --kubeconfig wins
    who = json.loads(kube_apiserver.kubectl("auth", "whoami", "-o", "json", *as_reader).stdout)
    assert who["status"]["userInfo"]["username"] == f"system:serviceaccount:{ns}:reader"

    denied = kube_apiserver.kubectl("get", "configmaps", *as_reader, check=False)
    assert denied.returncode != 0
    assert "Forbidden" in denied.stderr

    kube_apiserver.kubectl("-n", ns, "create", "role", "read-cm", "--verb=get,list", "--resource=configmaps")
    kube_apiserver.kubectl("-n", ns, "create", "rolebinding", "read-cm", "--role=read-cm", f"--serviceaccount={ns}:reader")
    # The RBAC authorizer reads bindings through an informer: allow it to catch up.
    wait_for(
        lambda: kube_apiserver.kubectl("get", "configmaps", *as_reader, check=False).returncode == 0,
        message="the RoleBinding to take effect",
    )
    still_denied = kube_apiserver.kubectl("get", "secrets", *as_reader, check=False)
    assert "Forbidden" in still_denied.stderr


def test_kubectl_errors_carry_stderr(kube_apiserver: KubeApiServer):
    with pytest.raises(KubectlError) as err:
        kube_apiserver.kubectl("get", "configmap", "does-not-exist")
    assert "NotFound" in str(err.value)


def test_a_second_server_starts_and_stops_cleanly(kube_apiserver: KubeApiServer):
    """Independent instances run side by side; stop() ends the processes and removes the dir."""
    other = KubeApiServer().start()
    try:
        assert other.server != kube_apiserver.server
        procs = [other._etcd, other._apiserver]
        other.kubectl("create", "namespace", "only-in-other")
        assert kube_apiserver.kubectl("get", "namespace", "only-in-other", check=False).returncode != 0
        directory = other.dir
    finally:
        other.stop()
    assert all(p.poll() is not None for p in procs)
    assert not directory.exists()
    assert not other.running
