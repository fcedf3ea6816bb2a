"""The tenant policy at apply time: a ValidatingAdmissionPolicy, generated from contract.policy.

The operator checks every rule of the policy (``check_policy``) and marks a refused query
``Invalid``; by then the spec is stored, and a GitOps sync of it has "succeeded". This module
writes the part of those rules that CEL can decide without guessing into a
ValidatingAdmissionPolicy the chart installs (``charts/streamq/templates/admission-policy.yaml``),
so the API server refuses such a spec in ``kubectl apply``, with the policy's own message:

    python -m controller.admission          # rewrite the chart's template
    python -m controller.admission --check  # exit 1 when it drifts

The CEL here is the logic; the policy's values reach it as literal variables
(``{{ .Values.policy.maxCores | toJson }}`` in the chart, ``json.dumps`` of the same value in
``render_policy``), so a platform's values change what is allowed without regenerating anything,
and tests/integration/test_admission_policy.py holds the chart's rendering to ``render_policy``.

Each rule below is sound, never complete: it refuses only what ``check_policy`` refuses too
(tests/integration/test_admission_policy.py runs a corpus through both), and leaves anything it
cannot read exactly as Python reads it to the operator. Left to the operator: hosts (IP
literals in every form the JVM reads, networks, names that resolve: contract.hosts), SQL,
sparkConf and Kafka options, local paths and roots, hostPath prefixes, derived locations, pod
placement and metadata, and what a Secret is (only the cluster knows). docs/security.md,
"Two layers".
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from contract import GROUP, PLURAL, VERSION
from contract import spec as spec_model
from contract.capacity import EXECUTOR_MIN_OVERHEAD, EXECUTOR_OVERHEAD_FACTOR
from contract.commands import file_generator
from contract.policy import (
    LEASE_ACCOUNT_SUFFIX,
    NAMESPACE_VARIABLE,
    OPERATOR_SECRET_SUFFIX,
    TOKEN_SECRET_NAME,
    OperatorFacts,
    Policy,
    VolumeKind,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = REPO_ROOT / "charts" / "streamq" / "templates" / "admission-policy.yaml"
NAME_SUFFIX = "-tenant-policy"  # <fullname>-tenant-policy: the policy and its binding (cluster-scoped)

# Floats compare the caps: the quantity library has no multiplication, and integers would
# overflow on the largest quantities the CRD allows. A total within a billionth of its cap is
# left to the operator (exact Decimal arithmetic, contract.capacity), so rounding never
# refuses a spec the operator accepts.
SLACK = "1.000000001"
GIB = 2**30


@dataclass(frozen=True)
class Literal:
    """A value of the chart's installation, a CEL literal in the policy: ``helm`` renders it from
    the values, ``python`` from the Policy and facts (the same JSON)."""

    helm: str  # a Helm expression whose value is JSON-encoded
    python: Callable[[Policy, OperatorFacts], Any]


def _policy_value(alias: str) -> Literal:
    return Literal(f".Values.policy.{alias}", lambda policy, facts: policy.model_dump(by_alias=True, mode="json")[alias])


LITERALS: dict[str, Literal] = {
    "jobImage": Literal('include "streamq.jobImage" .', lambda p, f: f.job_image),
    "driverAccount": Literal(".Values.driver.serviceAccount.name", lambda p, f: f.driver_service_account),
    "operatorAccount": Literal('include "streamq.serviceAccountName" .', lambda p, f: f.operator_service_account),
    "operatorNamespace": Literal(".Release.Namespace", lambda p, f: f.operator_namespace),
    **{
        alias: _policy_value(alias)
        for alias in (
            "allowedImages", "allowedServiceAccounts", "allowedVolumes", "allowedClaims", "allowedSecrets",
            "maxExecutors", "maxCores", "maxMemory", "checkpointSchemes", "remoteCheckpointPrefixes",
            "minBackoff", "maxRestarts", "minStableAfter", "allowSparkUI", "allowStandby", "allowExactlyOnce",
            "allowNodeIdentity",
        )
    },
}  # fmt: skip


def _cel(value: Any) -> str:
    """A JSON value as a CEL literal, spelled as Helm's toJson spells it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _str(text: str) -> str:
    """A Python string as a CEL string literal."""
    return json.dumps(text)


# --- CEL snippets ------------------------------------------------------------------------------

V = "variables."
SPEC = "object.spec"


def _matches(value: str, patterns: str) -> str:
    """contract.policy.matches: exact names, or prefixes written with a trailing '*'."""
    return f"{patterns}.exists(p, p.endsWith('*') ? {value}.startsWith(p.substring(0, p.size() - 1)) : {value} == p)"


def _listed(patterns: str) -> str:
    """contract.policy._listed."""
    return f"({patterns}.size() == 0 ? 'none' : {patterns}.join(', '))"


def _explain(one: str, total: str) -> str:
    """contract.capacity.AtOnce.explain."""
    return (f"({V}drivers == 1 ? {one} + ' = ' + {total} : '2 drivers at once (' + {V}why + '): 2 x (' + {one} "
            f"+ ') = ' + {total})")  # fmt: skip


def _number(x: str) -> str:
    """A double as contract.policy._number writes a Decimal (2, 0.5)."""
    return f"string({x})"


def _gi(x: str) -> str:
    """A double of bytes as contract.policy._gi writes it (2.5Gi): tenths rounded half up."""
    tenths = f"int({x} / {GIB / 10!r} + 0.5)"
    return f"(string({tenths} / 10) + '.' + string({tenths} % 10) + 'Gi')"


def _pod_cores(cores: str, request: str) -> str:
    """contract.capacity.pod_cores: cores or the CPU the pod requests, the larger."""
    asked = f"quantity({request}.value()).asApproximateFloat()"
    return f"({request}.hasValue() && {asked} > double({cores}) ? {asked} : double({cores}))"


# --- variables: the spec with the model's defaults, and what the caps count ---------------------

_RUNTIME = spec_model.Runtime()
_RESTART = spec_model.RestartPolicy()
PLAIN_URI = r"^[a-z][a-z0-9+.-]*://[A-Za-z0-9][A-Za-z0-9._:-]*(/[A-Za-z0-9_=+,~-][A-Za-z0-9_.=+,~-]*)*/?$"
URI = r"^[A-Za-z][A-Za-z0-9+.-]*://"


def derived_variables() -> list[tuple[str, str]]:
    rt = f"{SPEC}.?runtime"
    return [
        ("ns", "request.namespace"),  # "namespace" is reserved in CEL
        ("instances", f"{rt}.?executors.?instances.orValue({_RUNTIME.executors.instances})"),
        ("standby", f"{rt}.?standby.orValue(false)"),
        ("backend", f"{rt}.?backend.orValue({_str(_RUNTIME.backend.value)})"),
        ("strategy", f"{SPEC}.?upgrade.?strategy.orValue({_str(spec_model.Upgrade().strategy.value)})"),
        ("location", f"{SPEC}.checkpoint.location"),
        # contract.spec.OBJECT_STORE (RE2 has no look-ahead) and Checkpoint.shared
        ("shared", f"{SPEC}.checkpoint.?volume.?persistentVolumeClaim.hasValue() || "
                   f"{SPEC}.checkpoint.?volume.?hostPath.hasValue() || "
                   f"({V}location.matches('^[a-z][a-z0-9+.-]*://') && !{V}location.startsWith('file:'))"),
        # QuerySpec.warm_upgrades and contract.capacity.second_driver
        ("warm", f"{V}strategy != {_str(spec_model.UpgradeStrategy.RESTART.value)} && "
                 f"{V}backend == {_str(spec_model.Backend.POD.value)} && ({V}instances == 0 || {V}standby) && {V}shared"),
        ("why", f"{V}standby ? 'runtime.standby' : !{V}warm ? '' : "
                f"{V}strategy == {_str(spec_model.UpgradeStrategy.BLUE_GREEN.value)} ? 'upgrade.strategy blueGreen' "
                ": 'warm upgrades'"),
        ("drivers", f"{V}why == '' ? 1 : 2"),
        ("driverCores", _pod_cores(f"{rt}.?driver.?cores.orValue({_RUNTIME.driver.cores})", f"{rt}.?driver.?coreRequest")),
        ("executorCores",
         _pod_cores(f"{rt}.?executors.?cores.orValue({_RUNTIME.executors.cores})", f"{rt}.?executors.?coreRequest")),
        ("cores", f"double({V}drivers) * ({V}driverCores + double({V}instances) * {V}executorCores)"),
        ("driverMemory", f"quantity({rt}.?driver.?memory.orValue({_str(_RUNTIME.driver.memory)})).asApproximateFloat()"),
        ("executorHeap",
         f"quantity({rt}.?executors.?memory.orValue({_str(_RUNTIME.executors.memory)})).asApproximateFloat()"),
        ("executorMemory", f"{V}executorHeap + ({V}executorHeap * {float(EXECUTOR_OVERHEAD_FACTOR)!r} > "
                           f"{float(EXECUTOR_MIN_OVERHEAD)!r} ? {V}executorHeap * {float(EXECUTOR_OVERHEAD_FACTOR)!r} "
                           f": {float(EXECUTOR_MIN_OVERHEAD)!r})"),
        ("memory", f"double({V}drivers) * ({V}driverMemory + double({V}instances) * {V}executorMemory)"),
        ("account", f"{rt}.?serviceAccountName"),
        ("isOperatorAccount", f"{V}account.hasValue() && {V}account.value() == {V}operatorAccount && "
                              f"{V}ns == {V}operatorNamespace"),
        ("images", f"[{V}jobImage] + {V}allowedImages"),
        ("accounts", f"[{V}driverAccount] + {V}allowedServiceAccounts"),
        # a remote location Python and CEL split alike: scheme://bucket/key, no userinfo, ., .., %, ? or #
        ("uri", f"{V}location.matches({_str(URI)}) && !{V}location.lowerAscii().startsWith('file:')"),
        ("scheme", f"{V}location.split('://')[0].lowerAscii()"),
        ("plain", f"{V}location.matches({_str(PLAIN_URI)})"),
        ("bucket", f"{V}location.substring({V}scheme.size() + 3).split('/')[0]"),
        ("key", f"{V}location.substring({V}scheme.size() + 3 + {V}bucket.size())"),
        ("path", f"{V}key == '' || {V}key == '/' ? '/' : {V}key.endsWith('/') ? "
                 f"{V}key.substring(0, {V}key.size() - 1) : {V}key"),
        ("prefixes", f"{V}remoteCheckpointPrefixes.map(p, p.replace({_str(NAMESPACE_VARIABLE)}, {V}ns))"),
    ]  # fmt: skip


def _prefix_matches(q: str) -> str:
    """contract.policy._prefix_matches for a pattern ``q`` without '//' after its '://'."""
    scheme = f"{q}.split('://')[0]"
    rest = f"{q}.substring({scheme}.size() + 3)"
    bucket = f"{rest}.split('/')[0]"
    raw = f"{rest}.substring({bucket}.size())"  # '', '/', '/a/b' or '/a/b/'
    prefix = f"({raw}.endsWith('/') ? {raw}.substring(0, {raw}.size() - 1) : {raw})"
    return (f"({scheme} == '*' || {scheme} == {V}scheme) && ({bucket} == '*' || {bucket} == {V}bucket) && "
            f"({prefix} == '' || {V}path == {prefix} || {V}path.startsWith({prefix} + '/'))")  # fmt: skip


def _simple_pattern(q: str) -> str:
    return f"({q}.contains('://') && !{q}.substring({q}.indexOf('://') + 3).contains('//'))"


# --- validations: one per rule and field, as check_policy names them ------------------------------


@dataclass(frozen=True)
class Check:
    path: str  # below spec, as check_policy's problems name it
    rule: str  # policy.<knob>
    ok: str  # CEL: true when the spec keeps the rule
    why: str  # CEL string: check_policy's message without the path and rule

    def validation(self) -> dict[str, str]:
        head = f"spec{self.path}: {self.rule}: "
        return {
            "expression": self.ok,
            "messageExpression": f"{_str(head)} + ({self.why})",
            "message": f"{head}refused by the platform's policy",  # if the message itself fails
            "reason": "Forbidden",
        }


EXECUTORS = "' executors'"
OVERHEAD = " (executors with Spark's overhead), at most "
NO_CREDENTIALS = (
    ":// checkpoint has no credentials of its own (only s3a:// takes spec.checkpoint.s3.credentials): "
    "it would write with the node's identity, the platform's rights"
)
SECRET_PATHS = (  # contract.policy.secret_refs
    (".source.kafka.auth.secretRef.name", f"{SPEC}.source.?kafka.?auth.?secretRef.?name"),
    (".sink.kafka.auth.secretRef.name", f"{SPEC}.sink.?kafka.?auth.?secretRef.?name"),
    *(
        (f".{end}.kafka.tls.{ref}.name", f"{SPEC}.{end}.?kafka.?tls.?{ref}.?name")
        for end in ("source", "sink")
        for ref in ("caSecretRef", "clientCertificate")
    ),
    (".checkpoint.s3.credentials.secretRef.name", f"{SPEC}.checkpoint.?s3.?credentials.?secretRef.?name"),
)


def _secret(path: str, ref: str) -> Check:
    name = f"{ref}.value()"
    own = f"{name}.endsWith({_str(OPERATOR_SECRET_SUFFIX)})"
    token = (f"({name}.matches({_str(TOKEN_SECRET_NAME.pattern)}) || {name}.startsWith({V}driverAccount + '-') || "
             f"{name}.startsWith({V}operatorAccount + '-') || {name}.contains({_str(LEASE_ACCOUNT_SUFFIX + '-')}) || "
             f"{name}.endsWith({_str(LEASE_ACCOUNT_SUFFIX)}))")  # fmt: skip
    operator_secret = " is one the operator makes for a query's Spark authentication"
    is_token = (" is named like a service account's token (or after the driver, operator or a Lease account): "
                "credentials Secrets are Opaque Secrets the namespace's owners label "
                'streamq.io/credentials: "true", never an account\'s token')  # fmt: skip
    return Check(
        path, "policy.allowedSecrets",
        f"!{ref}.hasValue() || (!{own} && !{token} && {_matches(name, V + 'allowedSecrets')})",
        f"{own} ? 'Secret ' + {name} + {_str(operator_secret)} : "
        f"{token} ? 'Secret ' + {name} + {_str(is_token)} : "
        f"'Secret ' + {name} + ' is not allowed (allowed: ' + {_listed(V + 'allowedSecrets')} + ')'",
    )  # fmt: skip


def checks() -> list[Check]:
    account = f"{V}account.value()"
    found = [
        Check(".runtime.image", "policy.allowedImages",
              f"!{SPEC}.?runtime.?image.hasValue() || {_matches(SPEC + '.runtime.image', V + 'images')}",
              f"'image ' + {SPEC}.runtime.image + ' is not allowed (allowed: ' + {_listed(V + 'images')} + ')'"),
        Check(".runtime.serviceAccountName", "policy.operatorServiceAccount", f"!{V}isOperatorAccount",
              f"{account} + ' is the operator\\'s own account; a query never runs as it'"),
        Check(".runtime.serviceAccountName", "policy.allowedServiceAccounts",
              f"!{V}account.hasValue() || {V}isOperatorAccount || (!{account}.endsWith({_str(LEASE_ACCOUNT_SUFFIX)}) "
              f"&& ({account} != {V}driverAccount || ({V}instances > 0 && {V}maxExecutors > 0)) && "
              f"{_matches(account, V + 'accounts')})",
              f"{account}.endsWith({_str(LEASE_ACCOUNT_SUFFIX)}) ? {account} + "
              "' is an account the operator makes for a query\\'s Lease' : "
              f"{account} == {V}driverAccount ? {account} + ' is the driver account, which creates and deletes pods: "
              "only a query that runs executors (runtime.executors.instances > 0, where policy.maxExecutors > 0) may "
              f"run as it' : 'service account ' + {account} + ' is not allowed (allowed: ' + {_listed(V + 'accounts')} "
              "+ ')'"),
        *(_secret(path, ref) for path, ref in SECRET_PATHS),
        Check(".sink.kafka.delivery", "policy.allowExactlyOnce",
              f"{V}allowExactlyOnce || {SPEC}.sink.?kafka.?delivery.orValue('') != "
              f"{_str(spec_model.Delivery.EXACTLY_ONCE.value)}",
              "'exactlyOnce is not allowed on this platform'"),
        Check(".runtime.sparkUI", "policy.allowSparkUI", f"{V}allowSparkUI || !{SPEC}.?runtime.?sparkUI.orValue(false)",
              "'the Spark UI is turned off on this platform (policy.allowSparkUI)'"),
        Check(".runtime.standby", "policy.allowStandby", f"{V}allowStandby || !{V}standby",
              "'standby drivers are turned off on this platform (policy.allowStandby)'"),
        *(Check(f".checkpoint.volume.{kind}", "policy.allowedVolumes",
                f"!{SPEC}.checkpoint.?volume.?{kind}.hasValue() || {_str(kind.value)} in {V}allowedVolumes",
                f"{_str(kind.value + ' volumes are not allowed (allowed: ')} + {_listed(V + 'allowedVolumes')} + ')'")
          for kind in VolumeKind),
        Check(".checkpoint.volume.persistentVolumeClaim.claimName", "policy.allowedClaims",
              f"!{SPEC}.checkpoint.?volume.?persistentVolumeClaim.hasValue() || "
              f"{_matches(SPEC + '.checkpoint.volume.persistentVolumeClaim.claimName', V + 'allowedClaims')}",
              f"'claim ' + {SPEC}.checkpoint.volume.persistentVolumeClaim.claimName + ' is not allowed (allowed: ' + "
              f"{_listed(V + 'allowedClaims')} + ')'"),
        # only a scheme Python reads alike: lower case, '://'
        Check(".checkpoint.location", "policy.remoteCheckpointPrefixes",
              f"!{V}uri || !{V}location.matches('^[a-z][a-z0-9+.-]*://') || {V}scheme in {V}checkpointSchemes",
              f"{V}scheme + ':// checkpoints are not allowed (allowed: ' + {_listed(V + 'checkpointSchemes')} + ')'"),
        Check(".checkpoint.location", "policy.remoteCheckpointPrefixes",
              f"!{V}uri || !{V}plain || !({V}scheme in {V}checkpointSchemes) || "
              f"!{V}prefixes.all(q, {_simple_pattern('q')}) || {V}prefixes.exists(q, {_prefix_matches('q')})",
              f"{V}location + ' is outside this namespace\\'s checkpoint prefixes (allowed: ' + "
              f"{_listed(V + 'prefixes')} + ')'"),
        Check(".checkpoint.s3.credentials", "policy.allowNodeIdentity",
              f"{V}allowNodeIdentity || !{V}uri || {V}scheme != 's3a' || {SPEC}.checkpoint.?s3.?credentials.hasValue()",
              _str("an s3a:// checkpoint without credentials writes with the node's identity (S3A's default chain: "
                   "instance profile, IRSA), the platform's rights; set spec.checkpoint.s3.credentials.secretRef")),
        Check(".checkpoint.location", "policy.allowNodeIdentity",
              f"{V}allowNodeIdentity || !{V}uri || {V}scheme == 's3a'",
              f"'a ' + {V}scheme + {_str(NO_CREDENTIALS)}"),
        Check(".runtime.executors.instances", "policy.maxExecutors", f"{V}drivers * {V}instances <= {V}maxExecutors",
              f"{_explain(f'string({V}instances) + ' + EXECUTORS, f'string({V}drivers * {V}instances) + ' + EXECUTORS)} "
              f"+ ', at most ' + string({V}maxExecutors) + ' allowed'"),
        Check(".runtime", "policy.maxCores", f"{V}cores <= double({V}maxCores) * {SLACK}",
              f"{_explain(_one(_number, 'Cores'), _number(V + 'cores') + ' + ' + _str(' cores'))} + "
              f"' (per pod cores or coreRequest, the larger), at most ' + string({V}maxCores) + ' allowed'"),
        Check(".runtime", "policy.maxMemory",
              f"{V}memory <= quantity({V}maxMemory).asApproximateFloat() * {SLACK}",
              f"{_explain(_one(_gi, 'Memory'), _gi(V + 'memory') + ' + ' + _str(' of memory'))} + "
              f"{_str(OVERHEAD)} + {V}maxMemory + ' allowed'"),
        Check(".restartPolicy.backoff.initial", "policy.restarts",
              f"duration({SPEC}.?restartPolicy.?backoff.?initial.orValue({_str(_RESTART.backoff.initial)})) >= "
              f"duration({V}minBackoff)",
              f"'backoff ' + {SPEC}.?restartPolicy.?backoff.?initial.orValue({_str(_RESTART.backoff.initial)}) + "
              f"' is below the platform\\'s floor of ' + {V}minBackoff"),
        Check(".restartPolicy.stableAfter", "policy.restarts",
              f"duration({SPEC}.?restartPolicy.?stableAfter.orValue({_str(_RESTART.stable_after)})) >= "
              f"duration({V}minStableAfter)",
              f"'stableAfter ' + {SPEC}.?restartPolicy.?stableAfter.orValue({_str(_RESTART.stable_after)}) + "
              f"' is below the platform\\'s floor of ' + {V}minStableAfter"),
        Check(".restartPolicy.maxRestarts", "policy.restarts",
              f"{V}maxRestarts < 0 || ({V}restarts >= 0 && {V}restarts <= {V}maxRestarts)",
              f"({V}restarts < 0 ? 'unlimited' : string({V}restarts)) + ' restarts, at most ' + "
              f"string({V}maxRestarts) + ' allowed'"),
    ]  # fmt: skip
    return found


def _one(show: Callable[[str], str], unit: str) -> str:
    """One driver's worth as check_policy writes it (2 driver + 3 x 1.5Gi executor)."""
    return (f"{show(V + 'driver' + unit)} + ' driver' + ({V}instances == 0 ? '' : ' + ' + string({V}instances) + "
            f"' x ' + {show(V + 'executor' + unit)} + ' executor')")  # fmt: skip


def variables(literals: Mapping[str, str]) -> list[dict[str, str]]:
    """The policy's variables: ``literals`` (name -> CEL text) first, then what they derive."""
    derived = [*derived_variables(), ("restarts", f"{SPEC}.?restartPolicy.?maxRestarts.orValue({_RESTART.max_restarts})")]
    return [{"name": n, "expression": literals[n]} for n in LITERALS] + [{"name": n, "expression": e} for n, e in derived]


MATCH_CONDITIONS = [
    # Only a spec a tenant writes: the operator's own writes of metadata (finalizers, kopf's
    # annotations) to a query stored before the policy changed must never be refused, or a
    # refused query could not even be deleted.
    {"name": "spec-written", "expression": "request.operation == 'CREATE' || object.spec != oldObject.spec"},
]


def policy_spec(literals: Mapping[str, str]) -> dict[str, Any]:
    return {
        # The operator checks everything again: a CEL error (a bug here) lets the spec through to it
        # rather than blocking a spec the operator would run.
        "failurePolicy": "Ignore",
        # the version by name: with "*" the API server's type checking has no schema to check against
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [GROUP],
                    "apiVersions": [VERSION],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": [PLURAL],
                }
            ],
        },  # fmt: skip
        "matchConditions": MATCH_CONDITIONS,
        "variables": variables(literals),
        "validations": [c.validation() for c in checks()],
    }


def python_literals(policy: Policy, facts: OperatorFacts) -> dict[str, str]:
    return {name: _cel(lit.python(policy, facts)) for name, lit in LITERALS.items()}


def render_policy(policy: Policy, facts: OperatorFacts) -> dict[str, Any]:
    """The ``spec`` of the ValidatingAdmissionPolicy for ``policy`` (what the chart renders for the
    values ``policy`` came from; ``facts.operator_namespace`` is the release's namespace)."""
    return policy_spec(python_literals(policy, facts))


# --- the chart's template -------------------------------------------------------------------------

_PREAMBLE = """\
# Generated by `python -m controller.admission` from contract/policy.py. Do not edit.
# The part of the tenant policy CEL can decide, checked by the API server at apply time
# (docs/security.md, "Two layers"); the operator checks all of it again.
# admissionregistration.k8s.io/v1 has it from Kubernetes 1.30: left out on older clusters.
{{- if and .Values.admissionPolicy.enabled (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version) }}
"""
# The policy and its binding are the release's: named and labelled alike, up to their spec.
_OBJECT_HEAD = """\
apiVersion: admissionregistration.k8s.io/v1
kind: %(kind)s
metadata:
  name: {{ include "streamq.fullname" . }}%(suffix)s
  labels:
    {{- include "streamq.labels" . | nindent 4 }}
    app.kubernetes.io/component: operator
spec:
"""
_BINDING_SPEC = """\
  policyName: {{ include "streamq.fullname" . }}%(suffix)s
  validationActions: [Deny]
  {{- if not (include "streamq.clusterWide" .) }}
  # the namespaces this release's operator serves: another release's tenants keep their own policy
  matchResources:
    namespaceSelector:
      matchExpressions:
        - key: kubernetes.io/metadata.name
          operator: In
          values: {{ splitList "," (include "streamq.watchNamespaces" .) | uniq | toJson }}
  {{- end }}
{{- end }}
"""


def render_template() -> str:
    placeholders = {name: f"__LITERAL_{name}__" for name in LITERALS}
    body = yaml.safe_dump(policy_spec(placeholders), sort_keys=False, width=10_000)
    for name, literal in LITERALS.items():
        body = body.replace(placeholders[name], f"{{{{ {literal.helm} | toJson | quote }}}}")
    indented = "".join(f"  {line}\n" for line in body.splitlines())
    return (
        _PREAMBLE
        + _object_head("ValidatingAdmissionPolicy")
        + indented
        + "---\n"
        + _object_head("ValidatingAdmissionPolicyBinding")
        + _BINDING_SPEC % {"suffix": NAME_SUFFIX}
    )


def _object_head(kind: str) -> str:
    return _OBJECT_HEAD % {"kind": kind, "suffix": NAME_SUFFIX}


PROG = "python -m controller.admission"
main = file_generator(PROG, __doc__ or "", render_template, lambda: (TEMPLATE,), REPO_ROOT)


if __name__ == "__main__":
    sys.exit(main(None))
