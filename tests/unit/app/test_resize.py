"""Resizing a running micro-batch driver's executors in place (app.driver.resize, issue #40): what it
takes from the file the kubelet writes, and which executors go first."""

from __future__ import annotations

import pytest

from app.driver.resize import newest_first, wanted

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "most", "expected"),
    [
        ("4", 8, 4),
        ("8\n", 8, 8),
        ("1", 8, 1),
        ("9", 8, None),  # beyond what the spec admits: a hand on the pod's annotation gets no more
        ("0", 8, None),  # a running query keeps at least one executor; 0 is spec.runtime.executors.instances' to say
        ("-1", 8, None),
        ("", 8, None),  # the annotation removed: the kubelet writes an empty file
        ("4.5", 8, None),
        ("٤", 8, None),  # a digit, but not an ASCII one
        ("00004", 9999, None),
        (" 3 ", 8, 3),
    ],
)
def test_wanted_takes_a_whole_number_within_the_spec_only(text, most, expected):
    assert wanted(text, most) == expected


def test_newest_executors_go_first():
    assert newest_first(["1", "10", "2", "9"]) == ["10", "9", "2", "1"]
    assert newest_first(["3", "x"]) == ["x", "3"]  # a name Spark never gives: first, not a crash
