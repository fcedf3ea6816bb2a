"""Which account a driver runs as, and the objects that let it reach its query's Lease (pure; no I/O).

A driver gets an API token only when it needs one:

    executors                 the platform's driver account (spec.runtime.serviceAccountName
                              when the policy allows one): Spark starts executor pods with it
    Lease, no executors       ``<query>-lease``, an account made for the query that can do one
                              thing: get and update the query's own Lease (app.driver.lease_holder);
                              every query of the Pod backend with warm upgrades (the default, unless
                              the policy says allowStandby: false), and every standby query
    neither                   no account, no token (automountServiceAccountToken: false)

A spec naming the driver account without executors is refused by the policy
(policy.allowedServiceAccounts); should one get here, the name is ignored and the table applies.

For a query whose drivers take a Lease the operator makes, before its driver (``objects``):

    ServiceAccount  <query>-lease   only when the driver runs as it (standby without executors)
    Role            <query>-lease   leases get, update; resourceNames [<query>-driver]
    RoleBinding     <query>-lease   that Role, to the account the driver runs as (whichever of the
                                    three above): the driver account of a query with executors
                                    reaches its own query's Lease this way, not every Lease
    Lease           <query>-driver  made free (no holder), so no driver needs ``create``, which
                                    RBAC cannot narrow to one name

All are owned by the StreamingQuery (``kopf.adopt`` in the reconcile path) and go with it.
The operator can grant the Role because it holds leases get/update itself (RBAC's
escalation check); it never grants anything else.
"""

from __future__ import annotations

from typing import Any

from contract.lease import DURATION_S, lease_name
from contract.policy import Policy, warm_upgrades
from controller import names
from controller.config import Settings
from controller.render.meta import child
from controller.run import Run

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
LEASE_API_VERSION = "coordination.k8s.io/v1"
LEASE_VERBS = ("get", "update")  # app/driver/lease_holder.py: read, and the conditional replace of renew, take over, release


def needs_lease(run: Run, policy: Policy | None) -> bool:
    """A standby query, or one whose changes are warm upgrades under ``policy`` (the platform's;
    None: none applies): the driver of the new spec waits on the Lease beside the running one
    (controller.decide.upgrade). With allowStandby false, neither: no query holds a Lease token."""
    return bool(run.spec.runtime.standby) or warm_upgrades(run.spec, policy)


def service_account(run: Run, settings: Settings) -> str | None:
    """The account of the driver, None for no account and no token (see the module's table)."""
    named = run.spec.runtime.service_account_name
    if named and (named != settings.driver_service_account or run.uses_executors):
        return named
    if run.uses_executors:
        return settings.driver_service_account
    if needs_lease(run, settings.policy):
        return names.lease_access_name(run.query)
    return None


def lease_account(run: Run) -> dict[str, Any]:
    return child("v1", "ServiceAccount", names.lease_access_name(run.query), run, names.COMPONENT_LEASE)


def lease_role(run: Run) -> dict[str, Any]:
    rules = [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
              "resourceNames": [lease_name(run.query)], "verbs": list(LEASE_VERBS)}]  # fmt: skip
    return child(RBAC_API_VERSION, "Role", names.lease_access_name(run.query), run, names.COMPONENT_LEASE, rules=rules)


def lease_role_binding(run: Run, account: str) -> dict[str, Any]:
    """The Role to ``account``. The subject follows the spec (executors on or off): the
    reconcile path creates it, or patches its subjects to the newest driver's account."""
    name = names.lease_access_name(run.query)
    return child(
        RBAC_API_VERSION,
        "RoleBinding",
        name,
        run,
        names.COMPONENT_LEASE,
        roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        subjects=[{"kind": "ServiceAccount", "name": account, "namespace": run.namespace}],
    )


def lease(run: Run) -> dict[str, Any]:
    """The query's Lease, free: the first driver takes it with ``update`` (app.driver.lease_holder.Candidate: no holder)."""
    spec = {"leaseDurationSeconds": int(DURATION_S)}
    return child(LEASE_API_VERSION, "Lease", lease_name(run.query), run, names.COMPONENT_LEASE, spec=spec)


def objects(run: Run, settings: Settings) -> list[dict[str, Any]]:
    """What a standby query's driver needs before it starts, in creation order; [] without standby."""
    if not needs_lease(run, settings.policy):
        return []
    account = service_account(run, settings)
    assert account is not None
    objs = []
    if account == names.lease_access_name(run.query):
        objs.append(lease_account(run))
    objs += [lease_role(run), lease_role_binding(run, account), lease(run)]
    return objs
