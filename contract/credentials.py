"""Credentials Secrets by what they are, not by what they are called (pure).

``policy.allowedSecrets`` admits Secrets by name (``streamq-*``), and a name says nothing of what a
Secret holds: ``streamq-driver-token`` can be a service-account token of the driver account, which
creates and deletes pods. So a Secret a query mounts (``auth.secretRef``,
``checkpoint.s3.credentials.secretRef``) must also be one the namespace's owners made for queries'
credentials: of type ``Opaque`` and labelled ``streamq.io/credentials: "true"``. A token Secret,
or one of any other type, is refused whatever its name and labels.

Only the operator can check this: it reads the type and the labels of the Secrets a spec names
(``Kube.read_secret_meta``; never their data) before it decides. ``streamq validate`` does not see
the cluster. A Secret that does not exist is not refused here: the driver is created as before and
waits, its pod saying which Secret is missing, and starts once it exists; the next pass reads the
new Secret and refuses the query if it is not a credentials Secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from contract.names import CREDENTIALS_SECRET_TYPE, LABEL_CREDENTIALS
from contract.policy import secret_refs
from contract.problems import Problem
from contract.spec import QuerySpec

RULE = "policy.credentialSecrets"
TOKEN_TYPE = "kubernetes.io/service-account-token"
SecretMeta = Mapping[str, Any]  # {"type": ..., "labels": {...}}, as Kube.read_secret_meta returns it


def secret_names(raw_spec: Any) -> tuple[str, ...]:
    """The Secrets a stored spec names for credentials, each once: what the operator reads before
    deciding. () for a spec the model refuses (it goes Invalid without mounting anything)."""
    try:
        spec = QuerySpec.model_validate(raw_spec)
    except (ValidationError, TypeError, ValueError):
        return ()
    return tuple(dict.fromkeys(name for _, name in secret_refs(spec)))


def _why_not(name: str, meta: SecretMeta) -> str | None:
    kind = meta.get("type")
    if kind == TOKEN_TYPE:
        return (f"Secret {name} is a service-account token ({TOKEN_TYPE}): a query never mounts an account's "
                "token, whatever the Secret is called")  # fmt: skip
    if kind != CREDENTIALS_SECRET_TYPE:
        return f"Secret {name} is of type {kind}: credentials Secrets are of type {CREDENTIALS_SECRET_TYPE}"
    if (meta.get("labels") or {}).get(LABEL_CREDENTIALS) != "true":
        return (f'Secret {name} is not marked for queries: the namespace\'s owners label a credentials Secret '
                f'{LABEL_CREDENTIALS}: "true"')  # fmt: skip
    return None


def credential_secret_problems(
    spec: QuerySpec, secrets_meta: Mapping[str, SecretMeta | None] | None, prefix: str = "spec"
) -> list[Problem]:
    """Every Secret ``spec`` mounts that is not a credentials Secret, at the field naming it.
    ``secrets_meta``: name -> type and labels, None for a Secret that does not exist (not refused:
    see the module); a name it does not hold was not read and is not judged. None: nothing was read."""
    found = []
    for path, name in secret_refs(spec):
        meta = (secrets_meta or {}).get(name)
        why = _why_not(name, meta) if meta is not None else None
        if why is not None:
            found.append(Problem(f"{prefix}{path}", f"{RULE}: {why}"))
    return found


def refused_for_a_secret(message: str | None) -> bool:
    """Whether an Invalid query's status message holds this rule's refusal: its cause is a Secret,
    not the spec, so the operator looks again without waiting for the spec to change."""
    return f"{RULE}: " in (message or "")
