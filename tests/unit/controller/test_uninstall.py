"""The uninstall hook's decisions (controller/uninstall.py): only our finalizer goes, guarded."""

from __future__ import annotations

import pytest

from controller.__main__ import main
from controller.names import FINALIZER
from controller.uninstall import finalizers_without_ours, label_selector, release_patch

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("finalizers", "expected"),
    [
        ([FINALIZER], []),
        (["example.com/keep", FINALIZER], ["example.com/keep"]),
        ([FINALIZER, "example.com/keep", FINALIZER], ["example.com/keep"]),
        (["example.com/keep"], None),  # not ours: nothing to write
        ([], None),
        (None, None),
    ],
)
def test_only_our_finalizer_is_removed(finalizers, expected):
    metadata = {"name": "q", "resourceVersion": "7"} | ({"finalizers": finalizers} if finalizers is not None else {})
    assert finalizers_without_ours(metadata) == expected


def test_the_patch_is_guarded_by_the_version_it_was_read_at():
    patch = release_patch({"name": "q", "resourceVersion": "42", "finalizers": [FINALIZER, "other.io/x"]})
    assert patch == {"metadata": {"finalizers": ["other.io/x"], "resourceVersion": "42"}}
    assert release_patch({"name": "q", "resourceVersion": "42", "finalizers": ["other.io/x"]}) is None


def test_label_selector_is_stable():
    assert label_selector({"b": "2", "a": "1"}) == "a=1,b=2"


def test_the_subcommand_is_dispatched_before_the_operator_flags(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["release-finalizers", "--help"])
    assert exc.value.code == 0
    assert "--operator-namespace" in capsys.readouterr().out
