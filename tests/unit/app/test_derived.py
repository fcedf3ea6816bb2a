"""Derived checkpoint locations keep the spec's location rules, and a remote checkpoint writes
with credentials of the namespace, never with the node's identity (contract.derived,
policy.derivedLocations, policy.allowNodeIdentity)."""

from __future__ import annotations

import pytest

from contract.compat import fresh_checkpoint_location
from contract.derived import derived_location_problems, may_reset
from contract.load import validate_spec
from contract.policy import Policy
from contract.problems import SpecError
from contract.spec import MAX_VALUE
from controller.render import checkpoint_mount_path
from testbed.specs import changed, query_spec

pytestmark = pytest.mark.unit

BASE = query_spec()
CREDENTIALS = {"credentials": {"secretRef": {"name": "streamq-store"}}}
PVC = {"persistentVolumeClaim": {"claimName": "streamq-checkpoints"}}
NEW = {"onIncompatibleChange": "newCheckpoint"}
BLUE_GREEN = {"upgrade": {"strategy": "blueGreen"}}


def problems(checkpoint: dict, namespace: str = "team-a", policy: Policy | None = None, **more) -> list[str]:
    try:
        validate_spec(changed(BASE, {"checkpoint": checkpoint, **more}), policy=policy or Policy(), namespace=namespace)
    except SpecError as exc:
        return [str(p) for p in exc.problems]
    return []


def rules(found: list[str]) -> set[str]:
    return {p.split(": ")[1] for p in found}


@pytest.mark.parametrize(("checkpoint", "more", "namespace", "refused"), [
    # local paths: the fresh checkpoint is a sibling, its volume mounted at the parent
    ({"location": "/checkpoints/q", **NEW}, {}, "team-a", None),
    ({"location": "/checkpoints/q", "volume": PVC, **NEW}, {}, "team-a", None),
    ({"location": "/tmp/q", **NEW}, {}, "team-a", None),
    ({"location": "/tmp", **NEW}, {}, "team-a", "policy.derivedLocations"),  # /tmp-reset-1: no root
    ({"location": "/tmp"}, {}, "team-a", None),  # never reset: stays in the scratch directory
    ({"location": "/checkpoints", **NEW}, {}, "team-a", "policy.derivedLocations"),
    ({"location": "/checkpoints", "volume": PVC, **NEW}, {}, "team-a", "policy.derivedLocations"),  # mounted at /checkpoints-reset-1
    ({"location": "/checkpoints/", "volume": PVC}, BLUE_GREEN, "team-a", "policy.derivedLocations"),
    ({"location": "/checkpoints/q", "volume": PVC}, BLUE_GREEN, "team-a", None),
    ({"location": "/checkpoints/" + "q" * (MAX_VALUE - 13), **NEW}, {}, "team-a", "policy.derivedLocations"),
    ({"location": "/checkpoints/" + "q" * (MAX_VALUE - 13)}, {}, "team-a", None),
    # remote: the folder named after the namespace, and the folder beside it
    ({"location": "s3a://bucket/team-a/q", "s3": CREDENTIALS, **NEW}, {}, "team-a", None),
    ({"location": "s3a://bucket/team-a", "s3": CREDENTIALS, **NEW}, {}, "team-a", "policy.derivedLocations"),
    ({"location": "s3a://bucket/team-a/", "s3": CREDENTIALS}, BLUE_GREEN, "team-a", "policy.derivedLocations"),
    ({"location": "s3a://bucket/team-a", "s3": CREDENTIALS}, {}, "team-a", None),
    # blue/green makes a fresh checkpoint only where warm upgrades run (pod backend, no executors, shared)
    ({"location": "/checkpoints", "volume": PVC},
     {**BLUE_GREEN, "runtime.executors": {"instances": 1}}, "team-a", None),
])  # fmt: skip
def test_a_spec_that_may_reset_is_checked_with_its_fresh_location(checkpoint, more, namespace, refused):
    found = problems(checkpoint, namespace, **more)
    if refused is None:
        assert found == []
    else:
        assert refused in rules(found), found
        assert all(p.startswith("spec.checkpoint.location: ") for p in found), found


def test_the_refusal_names_the_field_the_derived_value_and_the_rule_it_breaks():
    (found,) = problems({"location": "s3a://bucket/team-a", "s3": CREDENTIALS, **NEW})
    assert found.startswith("spec.checkpoint.location: policy.derivedLocations: onIncompatibleChange: newCheckpoint")
    assert "s3a://bucket/team-a-reset-1" in found and "policy.remoteCheckpointPrefixes" in found


def test_a_rule_the_spec_itself_breaks_is_said_once():
    found = problems({"location": "s3a://bucket/other/q", "s3": CREDENTIALS, **NEW})
    assert rules(found) == {"policy.remoteCheckpointPrefixes"}, found


def test_every_reset_location_has_the_first_ones_parent():
    """Why one fresh location stands for all of them in the static rule."""
    for location in ("/checkpoints/q", "/checkpoints/q/", "/tmp", "s3a://b/team-a/q", "s3a://b/team-a"):
        first, later = fresh_checkpoint_location(location, 1), fresh_checkpoint_location(location, 12345)
        assert first.rsplit("/", 1)[0] == later.rsplit("/", 1)[0]


def test_the_mount_the_policy_checks_is_the_one_the_operator_renders():
    assert checkpoint_mount_path(fresh_checkpoint_location("/checkpoints/q", 1)) == "/checkpoints"
    assert checkpoint_mount_path(fresh_checkpoint_location("/checkpoints", 1)) == "/checkpoints-reset-1"  # refused above


@pytest.mark.parametrize(("location", "policy", "says"), [
    ("/checkpoints/q", Policy(), None),  # the spec's own: checked as the spec
    ("/checkpoints/q-reset-3", Policy(), None),
    ("/tmp-reset-3", Policy(), "policy.checkpointRoots"),
    ("/checkpoints/q-reset-" + "9" * MAX_VALUE, Policy(), f"at most {MAX_VALUE}"),
    ("/checkpoints/q-reset-" + "9" * MAX_VALUE, None, f"at most {MAX_VALUE}"),  # no policy: the limit still holds
    ("/tmp-reset-3", None, None),
    ("/proc/self-reset-1", Policy(checkpoint_roots=["/"]), "policy.protectedPaths"),
])  # fmt: skip
def test_the_controller_checks_the_location_it_renders(location, policy, says):
    spec = validate_spec(changed(BASE, {"checkpoint.location": "/checkpoints/q"}))
    found = derived_location_problems(spec, location, policy=policy, namespace="team-a", why="checkpoint reset 3")
    if says is None:
        assert found == []
    else:
        (problem,) = found
        assert problem.path == "spec.checkpoint.location" and problem.message.startswith("policy.derivedLocations: ")
        assert says in problem.message and "checkpoint reset 3 derives" in problem.message
        assert location[:40] in problem.message


def test_which_specs_may_reset():
    assert not may_reset(validate_spec(BASE))
    assert may_reset(validate_spec(changed(BASE, {"checkpoint.onIncompatibleChange": "newCheckpoint"})))
    warm = changed(BASE, {"checkpoint": {"location": "/checkpoints/q", "volume": PVC}})
    assert may_reset(validate_spec(changed(warm, BLUE_GREEN)))
    assert not may_reset(validate_spec(changed(warm, {"upgrade": {"strategy": "warm"}})))


# --- node identity ---------------------------------------------------------------------------


@pytest.mark.parametrize(("checkpoint", "allow", "path"), [
    ({"location": "s3a://bucket/team-a/q"}, False, "spec.checkpoint.s3.credentials"),
    ({"location": "s3a://bucket/team-a/q", "s3": {"endpoint": "http://store:8333"}}, False, "spec.checkpoint.s3.credentials"),
    ({"location": "s3a://bucket/team-a/q", "s3": CREDENTIALS}, False, None),
    ({"location": "s3a://bucket/team-a/q"}, True, None),
    ({"location": "gs://bucket/team-a/q"}, False, "spec.checkpoint.location"),
    ({"location": "abfss://ck@account.dfs.core.windows.net/team-a/q"}, False, "spec.checkpoint.location"),
    ({"location": "hdfs://namenode:8020/team-a/q"}, False, "spec.checkpoint.location"),
    ({"location": "gs://bucket/team-a/q"}, True, None),
    ({"location": "/checkpoints/q"}, False, None),
    ({"location": "file:///checkpoints/q"}, False, None),
])  # fmt: skip
def test_a_remote_checkpoint_without_credentials_needs_the_platforms_leave(checkpoint, allow, path):
    found = problems(checkpoint, policy=Policy(allow_node_identity=allow))
    if path is None:
        assert found == []
    else:
        (problem,) = found
        assert problem.startswith(f"{path}: policy.allowNodeIdentity: ") and "node's identity" in problem
        assert "spec.checkpoint.s3.credentials" in problem
