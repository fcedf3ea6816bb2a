"""The tenant policy at apply time: the chart's ValidatingAdmissionPolicy on a real kube-apiserver.

The chart's template (charts/streamq/templates/admission-policy.yaml, written by
``python -m controller.admission``) is rendered with helm for a release serving the test's
namespace, applied next to the CRD, and queries are created through the API server:

- one that breaks a cap is refused by ``kubectl apply`` with check_policy's own message, one
  inside the caps is stored; the operator's metadata writes to a query stored before the policy
  tightened still pass;
- kube-controller-manager's type checker (only that controller runs) finds nothing to warn about
  in the CEL against the CRD's schema, and does warn about a field the schema lacks;
- a corpus (the hostile specs, the samples, one spec per rule) goes through both the API server
  (server-side dry run) and check_policy: the API server never refuses what the operator would
  run, its message is one check_policy gives, and every rule the policy holds refuses its spec.

The module has a kube-apiserver of its own. Kubernetes 1.33's CEL can crash the process when a
policy compiles while a request evaluates one over the same CRD (kubernetes/kubernetes#135757,
open: ``concurrent map read and map write`` in ``DeclTypeProvider.FindStructFieldType``); these
tests change policies and evaluate them hundreds of times, and a crash once took the session's
server, and 115 other tests, with it. Here a crashed server is started again on the same port
and etcd, the call is made once more, and the revival is printed. The type checker, whose status
writes recompile every policy, runs only in its own test.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError as ConnectionTrouble

from contract import GROUP, PLURAL, VERSION
from contract.policy import chart_fullname, check_policy, from_values
from contract.spec import QuerySpec
from controller.admission import NAME_SUFFIX, render_policy
from testbed.kube import KubeApiServer, KubectlError, kube_bin
from testbed.operator import install_streamq, unique
from testbed.specs import EXACTLY_ONCE, changed
from tests.hostile_specs import BASE, PVC, REFUSED_BY_POLICY
from tests.support.kube_fixtures import require_kube_binaries

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "streamq"
PROBE_IMAGE = "admission-probe.invalid/never:1"  # no policy of this file allows it
KAFKA_AUTH = {"secretRef": {"name": "streamq-kafka"}}
ON_A_CLAIM = {"checkpoint.volume": PVC}  # standby needs a checkpoint both drivers reach
S3_CREDENTIALS = {"credentials": {"secretRef": {"name": "streamq-s3"}}}

STRICT = {  # a platform's own values: every knob the admission policy reads, away from its default
    "maxExecutors": 4, "maxCores": 8, "maxMemory": "8Gi", "allowedImages": ["registry.example/team/*"],
    "allowedServiceAccounts": ["jobs-*"], "allowedSecrets": ["streamq-*", "kafka-*"],
    "checkpointSchemes": ["s3a", "gs"], "remoteCheckpointPrefixes": ["s3a://cp/${namespace}/", "gs://*/teams/${namespace}/"],
    "allowedVolumes": ["persistentVolumeClaim"], "allowedClaims": ["cp-*"], "minBackoff": "2s", "maxRestarts": 5,
    "minStableAfter": "5m", "allowSparkUI": False, "allowStandby": False, "allowExactlyOnce": False,
    "allowNodeIdentity": True,
}  # fmt: skip


class RevivedApiServer(KubeApiServer):
    """A kubectl that finds the server crashed under it (kubernetes#135757) revives it and runs again."""

    def kubectl(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        try:
            result = super().kubectl(*args, **kwargs)
        except KubectlError:
            if not revived(self):
                raise
            return super().kubectl(*args, **kwargs)
        return super().kubectl(*args, **kwargs) if result.returncode != 0 and revived(self) else result


def revived(server: KubeApiServer) -> bool:
    if not server.revive_apiserver():
        return False
    print("kube-apiserver crashed (kubernetes/kubernetes#135757) and was started again", file=sys.__stderr__)
    return True


@pytest.fixture(scope="module")
def kube_apiserver():
    require_kube_binaries()
    with RevivedApiServer() as server:
        yield server


@pytest.fixture(scope="module")
def streamq_installed(kube_apiserver: KubeApiServer):
    return install_streamq(kube_apiserver)


@pytest.fixture(scope="module")
def api_client(kube_apiserver: KubeApiServer):
    with kube_apiserver.api_client() as api:
        api.server = kube_apiserver  # dry_run revives it
        yield api


@pytest.fixture
def type_checker(kube_apiserver: KubeApiServer, tmp_path_factory):
    """kube-controller-manager with only the controller that type-checks admission policies
    against the schemas of what they match (status.typeChecking)."""
    log = tmp_path_factory.mktemp("kcm") / "kube-controller-manager.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(kube_bin("kube-controller-manager")), f"--kubeconfig={kube_apiserver.kubeconfig}",
             "--controllers=validatingadmissionpolicy-status-controller", "--leader-elect=false", "--secure-port=0"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    yield proc
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture
def release(kube_apiserver: KubeApiServer, streamq_installed):
    """Install the chart's admission policy for a release serving one namespace; removed at the end."""
    installed: list[dict] = []

    def install(namespace: str, policy: dict | None = None) -> dict:
        name = unique("adm")
        values = {"operator": {"watchNamespaces": [namespace]}, "policy": policy or {}}
        docs = render(name, namespace, values)
        kube_apiserver.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        installed.extend(docs)
        return {"release": name, "values": values, "docs": docs, "name": f"{chart_fullname(values, name)}{NAME_SUFFIX}"}

    yield install
    for doc in reversed(installed):
        kube_apiserver.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"], "--ignore-not-found")


def render(release: str, namespace: str, values: dict, only: str | None = "templates/admission-policy.yaml",
           *extra: str) -> list[dict]:  # fmt: skip
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as values_file:
        values_file.write(yaml.safe_dump(values))
        values_file.flush()
        out = subprocess.run(
            [str(kube_bin("helm")), "template", release, str(CHART), "--namespace", namespace,
             "--values", values_file.name, *(["--show-only", only] if only else []), *extra],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def body(name: str, spec: dict, namespace: str) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "StreamingQuery",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}  # fmt: skip


def dry_run(api_client, namespace: str, spec: dict) -> str | None:
    """None when the API server would store the query; its reason (the policy's message) when it
    refuses it. A spec the CRD's schema refuses is skipped (pytest.skip is not wanted here: '')."""
    api = client.CustomObjectsApi(api_client)

    def create() -> None:
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body(unique("q"), spec, namespace),
                                            dry_run="All")  # fmt: skip

    try:
        try:
            create()
        except ConnectionTrouble:
            if not revived(api_client.server):
                raise
            create()
    except ApiException as exc:
        message = json.loads(exc.body)["message"]
        if exc.status != 403:
            return f"SCHEMA: {message}"
        return message.split("denied request: ", 1)[1]
    return None


def wait_enforced(api_client, namespace: str, timeout: float = 30) -> None:
    """The API server's admission plugin reads policies from an informer: wait until it refuses."""
    deadline = time.monotonic() + timeout
    while dry_run(api_client, namespace, changed(BASE, {"runtime.image": PROBE_IMAGE})) is None:
        assert time.monotonic() < deadline, "the admission policy was never enforced"
        time.sleep(0.5)  # the poll interval of this wait (the plugin's policies load from an informer)


def python_problems(spec: dict, installed: dict, namespace: str) -> list[str] | None:
    """check_policy's problems as the API server would say them; None for a spec the model refuses."""
    policy, facts = from_values(installed["values"], installed["release"])
    facts = dataclasses.replace(facts, operator_namespace=namespace)
    try:
        model = QuerySpec.model_validate(spec)
    except ValueError:
        return None
    return [f"{p.path}: {p.message}" for p in check_policy(model, policy, namespace=namespace, facts=facts)]


def test_kubectl_apply_refuses_a_query_over_a_cap_with_the_policys_message(kube_apiserver, api_client, namespace, release):
    installed = release(namespace)
    wait_enforced(api_client, namespace)
    over = changed(BASE, {"runtime.executors": {"instances": 11}})
    within = changed(BASE, {"runtime.executors": {"instances": 10}})
    (expected,) = python_problems(over, installed, namespace)
    assert expected == "spec.runtime.executors.instances: policy.maxExecutors: 11 executors = 11 executors, at most 10 allowed"

    refused = kube_apiserver.kubectl("apply", "-f", "-", input=json.dumps(body("over", over, namespace)), check=False)
    assert refused.returncode != 0 and expected in refused.stderr, refused.stderr
    assert f"ValidatingAdmissionPolicy '{installed['name']}'" in refused.stderr
    kube_apiserver.kubectl("apply", "-f", "-", input=json.dumps(body("within", within, namespace)))
    kube_apiserver.kubectl("-n", namespace, "get", "sq", "within")

    # a change of the stored query is held to the policy too
    raised = kube_apiserver.kubectl("apply", "-f", "-", input=json.dumps(body("within", over, namespace)), check=False)
    assert raised.returncode != 0 and expected in raised.stderr, raised.stderr


def test_the_operators_writes_to_a_query_stored_before_the_policy_tightened_pass(kube_apiserver, api_client, namespace, release):
    kube_apiserver.kubectl(
        "apply", "-f", "-", input=json.dumps(body("stored", changed(BASE, {"runtime.executors": {"instances": 6}}), namespace))
    )
    release(namespace, {"maxExecutors": 4})
    wait_enforced(api_client, namespace)
    # finalizers and kopf's annotations: the operator must still be able to handle (and release) it
    kube_apiserver.kubectl("-n", namespace, "patch", "sq", "stored", "--type=merge", "-p",
                           json.dumps({"metadata": {"finalizers": ["streamq.io/test"], "annotations": {"a": "b"}}}))  # fmt: skip
    kube_apiserver.kubectl("-n", namespace, "patch", "sq", "stored", "--type=merge", "-p", '{"metadata": {"finalizers": null}}')
    changed_spec = kube_apiserver.kubectl("-n", namespace, "patch", "sq", "stored", "--type=merge", "-p",
                                          '{"spec": {"suspend": true}}', check=False)  # fmt: skip
    assert changed_spec.returncode != 0 and "policy.maxExecutors" in changed_spec.stderr, changed_spec.stderr


def test_the_cel_type_checks_against_the_crd_schema(kube_apiserver, api_client, namespace, release, type_checker):
    installed = release(namespace)

    def type_checking(name: str) -> dict:
        deadline = time.monotonic() + 60
        while True:
            doc = json.loads(kube_apiserver.kubectl("get", "validatingadmissionpolicy", name, "-o", "json").stdout)
            status = doc.get("status") or {}
            if status.get("observedGeneration") == doc["metadata"]["generation"]:
                return status.get("typeChecking") or {}
            assert time.monotonic() < deadline, f"no type checking of {name}: {status}"
            time.sleep(0.5)  # the poll interval of this wait (the type checker writes the status when it has run)

    assert type_checking(installed["name"]).get("expressionWarnings", []) == []

    # the check can fail: a field the CRD does not have is a warning
    broken = json.loads(json.dumps(next(d for d in installed["docs"] if d["kind"] == "ValidatingAdmissionPolicy")))
    broken["metadata"] = {"name": unique("adm-broken")}
    broken["spec"]["validations"].append({"expression": "object.spec.runtime.noSuchField == 1"})
    kube_apiserver.kubectl("apply", "-f", "-", input=json.dumps(broken))
    try:
        warnings = type_checking(broken["metadata"]["name"]).get("expressionWarnings", [])
        assert [w["fieldRef"] for w in warnings] == [f"spec.validations[{len(broken['spec']['validations']) - 1}].expression"]
    finally:
        kube_apiserver.kubectl("delete", "validatingadmissionpolicy", broken["metadata"]["name"])


def one_per_rule(ns: str) -> dict[str, dict]:
    """A spec breaking each rule the admission policy holds under the default policy (name: spec)."""
    rt = "runtime"
    return {
        "maxExecutors": changed(BASE, {f"{rt}.executors": {"instances": 11}}),
        "maxExecutors, standby": changed(BASE, {f"{rt}.executors": {"instances": 6}, f"{rt}.standby": True, **ON_A_CLAIM}),
        "maxCores": changed(BASE, {f"{rt}.driver": {"cores": 40}}),
        "maxCores, coreRequest": changed(BASE, {f"{rt}.driver": {"coreRequest": "32500m"}}),
        "maxMemory": changed(BASE, {f"{rt}.executors": {"instances": 4, "memory": "16Gi"}}),
        "maxMemory, warm upgrades": changed(BASE, {"checkpoint.volume": {"persistentVolumeClaim": {"claimName": "streamq-cp"}},
                                                   f"{rt}.driver": {"memory": "40Gi"}}),
        "allowedImages": changed(BASE, {f"{rt}.image": "evil.example/x:1"}),
        "allowedServiceAccounts": changed(BASE, {f"{rt}.serviceAccountName": "team-b-admin"}),
        "allowedServiceAccounts, lease": changed(BASE, {f"{rt}.serviceAccountName": "other-lease"}),
        "allowedServiceAccounts, driver": changed(BASE, {f"{rt}.serviceAccountName": "streamq-driver"}),
        "allowedSecrets": changed(BASE, {"source.kafka.auth": {"secretRef": {"name": "kafka-creds"}}}),
        "allowedSecrets, token": changed(BASE, {"sink.kafka.auth": {"secretRef": {"name": "streamq-x-token"}}}),
        "allowedSecrets, spark auth": changed(BASE, {"source.kafka.auth": {"secretRef": {"name": "streamq-q-spark-auth"}}}),
        "allowedSecrets, tls": changed(BASE, {"sink.kafka.tls": {"clientCertificate": {"name": "client-cert"}}}),
        "allowedSecrets, s3": changed(BASE, {"checkpoint": {"location": f"s3a://cp/{ns}/q", "s3": {"credentials": {"secretRef": {"name": "s3-keys"}}}}}),
        "allowedVolumes": changed(BASE, {"checkpoint.volume": {"hostPath": "/var/lib/streamq/q"}}),
        "allowedClaims": changed(BASE, {"checkpoint.volume": {"persistentVolumeClaim": {"claimName": "other-data"}}}),
        "remoteCheckpointPrefixes, scheme": changed(BASE, {"checkpoint.location": f"ftp://cp/{ns}/q"}),
        "remoteCheckpointPrefixes": changed(BASE, {"checkpoint": {"location": "s3a://cp/other-team/q", "s3": S3_CREDENTIALS}}),
        "allowNodeIdentity, s3a": changed(BASE, {"checkpoint.location": f"s3a://cp/{ns}/q"}),
        "allowNodeIdentity, gs": changed(BASE, {"checkpoint.location": f"gs://cp/{ns}/q"}),
        "restarts, maxRestarts": changed(BASE, {"restartPolicy": {"maxRestarts": -1}}),
        "restarts, backoff": changed(BASE, {"restartPolicy": {"backoff": {"initial": "100ms"}}}),
        "restarts, stableAfter": changed(BASE, {"restartPolicy": {"stableAfter": "10s"}}),
    }  # fmt: skip


def one_per_switch(ns: str) -> dict[str, dict]:
    """Specs the default policy runs and STRICT refuses (name: spec)."""
    rt = "runtime"
    return {
        "allowSparkUI": changed(BASE, {f"{rt}.sparkUI": True}),
        "allowStandby": changed(
            BASE, {f"{rt}.standby": True, "checkpoint.volume": {"persistentVolumeClaim": {"claimName": "cp-1"}}}
        ),
        "allowExactlyOnce": changed(BASE, EXACTLY_ONCE),
        "allowedVolumes, emptyDir": changed(BASE, {"checkpoint.volume": {"emptyDir": {}}}),
        "maxExecutors": changed(BASE, {f"{rt}.executors": {"instances": 5}}),
        "allowedImages": changed(BASE, {f"{rt}.image": "registry.example/other/x:1"}),
        "allowedServiceAccounts": changed(BASE, {f"{rt}.serviceAccountName": "streaming"}),
        "remoteCheckpointPrefixes, scheme": changed(BASE, {"checkpoint.location": f"hdfs://nn/teams/{ns}/q"}),
        "remoteCheckpointPrefixes": changed(BASE, {"checkpoint": {"location": f"s3a://other/{ns}/q", "s3": S3_CREDENTIALS}}),
        "restarts": changed(BASE, {"restartPolicy": {"maxRestarts": 6}}),
    }


def accepted(ns: str) -> dict[str, dict]:
    """Specs inside the default policy, at its edges."""
    rt = "runtime"
    return {
        "base": BASE,
        "10 executors": changed(BASE, {f"{rt}.executors": {"instances": 10}}),
        "standby with 5 executors": changed(BASE, {f"{rt}.executors": {"instances": 5}, f"{rt}.standby": True, **ON_A_CLAIM}),
        "32 cores": changed(BASE, {f"{rt}.driver": {"cores": 2}, f"{rt}.executors": {"instances": 10, "cores": 3}}),
        "s3a in the namespace's folder": changed(BASE, {"checkpoint": {"location": f"s3a://cp/{ns}/q/", "s3": S3_CREDENTIALS}}),
        "Secrets named for queries": changed(BASE, {"source.kafka.auth": KAFKA_AUTH, "sink.kafka.auth": KAFKA_AUTH}),
        "driver account with executors": changed(BASE, {f"{rt}.serviceAccountName": "streamq-driver", f"{rt}.executors": {"instances": 1}}),
        "restarts at the floor": changed(BASE, {"restartPolicy": {"maxRestarts": 100, "backoff": {"initial": "1s"}, "stableAfter": "1m"}}),
    }  # fmt: skip


def samples() -> list[dict]:
    found = []
    for path in sorted((ROOT / "manifests" / "samples").glob("*.yaml")) + sorted((ROOT / "examples").glob("*.yaml")):
        found += [d["spec"] for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "StreamingQuery"]
    return found


def agree(api_client, installed: dict, namespace: str, spec: dict) -> str | None:
    """The API server's verdict on ``spec``, held to check_policy's: never a refusal the operator would
    not make, and the message one check_policy gives."""
    said = dry_run(api_client, namespace, spec)
    problems = python_problems(spec, installed, namespace)
    if said is None or said.startswith("SCHEMA: ") or problems is None:
        return said
    assert said in problems, f"the API server refused with {said!r}; check_policy says {problems}"
    return said


def test_the_api_server_refuses_only_what_the_operator_refuses_with_its_message(api_client, namespace, release):
    installed = release(namespace)
    wait_enforced(api_client, namespace)
    for spec, _ns, _path, _rule in REFUSED_BY_POLICY.values():
        agree(api_client, installed, namespace, spec)
    for spec in samples():
        assert agree(api_client, installed, namespace, spec) is None
    for name, spec in accepted(namespace).items():
        assert python_problems(spec, installed, namespace) == [], name
        assert agree(api_client, installed, namespace, spec) is None, name
    for name, spec in one_per_rule(namespace).items():
        rule = "policy." + name.split(",")[0]
        said = agree(api_client, installed, namespace, spec)
        assert said is not None and f"{rule}: " in said, f"{name}: {said}"


def test_a_platforms_own_values_reach_the_api_server(api_client, namespace, release):
    installed = release(namespace, STRICT)
    wait_enforced(api_client, namespace)
    for name, spec in one_per_switch(namespace).items():
        said = agree(api_client, installed, namespace, spec)
        assert said is not None and f"policy.{name.split(',')[0]}: " in said, f"{name}: {said}"
    for spec, _ns, _path, _rule in REFUSED_BY_POLICY.values():
        agree(api_client, installed, namespace, spec)
    inside = changed(BASE, {"runtime.executors": {"instances": 4, "memory": "1Gi"}, "runtime.driver": {"cores": 2},
                            "checkpoint": {"location": f"s3a://cp/{namespace}/q", "s3": S3_CREDENTIALS},
                            "restartPolicy": {"maxRestarts": 5, "backoff": {"initial": "2s"}, "stableAfter": "5m"}})  # fmt: skip
    assert python_problems(inside, installed, namespace) == []
    assert agree(api_client, installed, namespace, inside) is None


def test_the_chart_renders_what_the_generator_writes_for_its_values():
    """The chart's template and ``render_policy`` are one source: the same CEL and the same values."""
    namespace = "team-a"
    for policy in ({}, STRICT):
        values = {"operator": {"watchNamespaces": [namespace]}, "policy": policy, "jobs": {"image": "registry.example/job:2"}}
        (vap, binding) = render("streamq", namespace, values)
        chart_policy, facts = from_values(values, "streamq")
        assert vap["spec"] == render_policy(chart_policy, dataclasses.replace(facts, operator_namespace=namespace))
        assert binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"] == [namespace]
        assert binding["spec"]["validationActions"] == ["Deny"]
    admission = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    for values, extra in (({"admissionPolicy": {"enabled": False}}, ()), ({}, ("--kube-version", "1.29.4"))):
        kinds = {d["kind"] for d in render("streamq", namespace, values, None, *extra)}
        assert not kinds & admission, f"{values} {extra}: {kinds & admission}"  # off, or a cluster without the API
    assert {d["kind"] for d in render("streamq", namespace, {}, None, "--kube-version", "1.30.0")} >= admission
