"""Failpoints: off unless STREAMQ_FAILPOINT names one, read when asked, unknown names refused."""

import pytest

from contract import failpoints
from contract.failpoints import Failpoint, UnknownFailpoint

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value", [None, "", "  "])
def test_off_unless_set(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(failpoints.ENV, raising=False)
    else:
        monkeypatch.setenv(failpoints.ENV, value)
    assert failpoints.armed() is None
    assert not any(failpoints.active(point) for point in Failpoint)


@pytest.mark.parametrize("point", list(Failpoint))
def test_a_named_point_is_active_alone(monkeypatch, point):
    monkeypatch.setenv("STREAMQ_FAILPOINT", point.value)
    assert [p for p in Failpoint if failpoints.active(p)] == [point]


def test_the_names_the_integration_tests_use():
    assert {p.value for p in Failpoint} == {
        "exit-after-create",
        "skip-slot-check",
        "fail-on-sigusr2",
        "kill-before-commit",
        "abandon-before-commit",
        "half-write",
    }


def test_read_when_asked_not_at_import(monkeypatch):
    monkeypatch.delenv(failpoints.ENV, raising=False)
    assert not failpoints.active(Failpoint.SKIP_SLOT_CHECK)
    monkeypatch.setenv(failpoints.ENV, "skip-slot-check")
    assert failpoints.active(Failpoint.SKIP_SLOT_CHECK)


def test_an_unknown_name_is_refused_with_the_known_ones(monkeypatch):
    monkeypatch.setenv(failpoints.ENV, "exit-after-crate")
    with pytest.raises(
        UnknownFailpoint,
        match=r"STREAMQ_FAILPOINT='exit-after-crate' is not a failpoint \(known: exit-after-create, skip-slot-check, fail-on-sigusr2, kill-before-commit, "
        r"abandon-before-commit, half-write\)",
    ):
        failpoints.active(Failpoint.EXIT_AFTER_CREATE)
