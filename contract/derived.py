"""Values derived from a spec that reach a pod, held to the spec's own location rules (pure).

What a driver writes is not always what the spec says. After an incompatible change with
``onIncompatibleChange: newCheckpoint``, or in a blue/green upgrade, it writes a fresh checkpoint
``<location>-reset-<n>`` (contract.compat.fresh_checkpoint_location: chosen by the operator,
controller.decide.gate, and by the job when it finds its checkpoint incompatible, app.driver.run),
and the operator mounts the checkpoint volume at that location's parent
(controller.render.volumes.checkpoint_mount_path). The policy read the spec, and a location it allowed can
derive one it would not: ``s3a://b/team-a`` (the namespace's folder itself) gives
``s3a://b/team-a-reset-1``, the folder of namespace ``team-a-reset-1``; ``/tmp`` gives
``/tmp-reset-1``, outside every root; a volume at ``/checkpoints`` is mounted at
``/checkpoints-reset-1``.

So a derived location goes through the location rules of ``check_policy`` on the spec with its
location replaced, in one place (``location_problems``), from two callers:

* the policy rule ``policy.derivedLocations`` (``reset_location_problems``): a spec that may reset
  is checked with its first reset location, so ``streamq validate`` and the operator refuse it
  before any change asks for one. Every reset location has the first one's parent, so the rules
  (folders, roots, the mount at the parent) answer alike for all of them;
* the controller (``derived_location_problems``), for the location it is about to render: its
  length grows with n, and the policy may have changed since the spec was accepted.
"""

from __future__ import annotations

from collections.abc import Iterator

from contract import locations
from contract.compat import fresh_checkpoint_location
from contract.policy import POLICY_RULES, OperatorFacts, Policy
from contract.problems import Problem
from contract.spec import MAX_VALUE, IncompatibleChange, QuerySpec, UpgradeStrategy

RULE = "policy.derivedLocations"
# The rules of check_policy that read checkpoint.location (and the volume mounted at its parent).
LOCATION_RULES = frozenset(
    {"policy.protectedPaths", "policy.checkpointRoots", "policy.remoteCheckpointPrefixes", "policy.allowNodeIdentity"}
)
AT = ".checkpoint.location"


def may_reset(spec: QuerySpec) -> bool:
    """The specs for which the gate (and the job, for newCheckpoint) makes a fresh checkpoint."""
    blue_green = spec.upgrade_policy.strategy is UpgradeStrategy.BLUE_GREEN and spec.warm_upgrades
    return spec.checkpoint.on_incompatible_change is IncompatibleChange.NEW_CHECKPOINT or blue_green


def location_problems(
    spec: QuerySpec, location: str, policy: Policy | None, facts: OperatorFacts, namespace: str | None, why: str
) -> Iterator[tuple[str, str]]:
    """(path below spec, message) for every location rule ``location`` breaks in ``spec``'s place;
    ``why`` says what derived it. Without a policy only the spec's static limit applies."""
    said = f"{why} derives {locations.redacted(location)} from spec.checkpoint.location"
    if len(location) > MAX_VALUE:
        yield AT, f"{said}: {len(location)} characters, at most {MAX_VALUE}"
    if policy is None:
        return
    derived = spec.model_copy(update={"checkpoint": spec.checkpoint.model_copy(update={"location": location})})
    for rule in POLICY_RULES:
        if rule.name not in LOCATION_RULES or any(rule.check(spec, policy, facts, namespace)):
            continue  # the spec's own location breaks it: said once, by the rule itself
        for path, message in rule.check(derived, policy, facts, namespace):
            yield path, f"{said}, which breaks {rule.name}: {message}"


def reset_location_problems(
    spec: QuerySpec, policy: Policy, facts: OperatorFacts, namespace: str | None
) -> Iterator[tuple[str, str]]:
    if not may_reset(spec):
        return
    why = ("onIncompatibleChange: newCheckpoint"
           if spec.checkpoint.on_incompatible_change is IncompatibleChange.NEW_CHECKPOINT
           else "upgrade.strategy: blueGreen")  # fmt: skip
    yield from location_problems(spec, fresh_checkpoint_location(spec.checkpoint.location, 1), policy, facts,
                                 namespace, f"{why} (a fresh checkpoint after an incompatible change)")  # fmt: skip


def derived_location_problems(
    spec: QuerySpec,
    location: str,
    *,
    policy: Policy | None,
    facts: OperatorFacts | None = None,
    namespace: str | None = None,
    why: str = "the operator",
) -> list[Problem]:
    """What the controller checks before it renders a driver on ``location`` (the effective checkpoint
    after resets, blue/green's fresh one): [] when it is the spec's own or keeps the same rules."""
    if location == spec.checkpoint.location:
        return []
    facts = OperatorFacts() if facts is None else facts
    return [
        Problem(f"spec{path}", f"{RULE}: {message}")
        for path, message in location_problems(spec, location, policy, facts, namespace, why)
    ]
