"""bench.chaos's pure parts: the fault schedule, the faults a cluster can take, the totals, the table."""

from __future__ import annotations

from itertools import pairwise

import pytest

from bench import chaos, report
from testbed.specs import flagged, payments

pytestmark = pytest.mark.unit

ALL = [*chaos.ANY_CLUSTER, *chaos.OWN_NODE]


def test_the_same_seed_plans_the_same_run_and_another_seed_another():
    plan = chaos.schedule(7, 180, 30, ALL)
    assert plan == chaos.schedule(7, 180, 30, ALL)
    assert plan != chaos.schedule(8, 180, 30, ALL)


@pytest.mark.parametrize("seed", range(20))
def test_faults_come_every_so_often_within_the_jitter_and_within_the_run(seed):
    plan = chaos.schedule(seed, 180, 30, ALL)
    times = [0.0] + [at for at, _ in plan]
    gaps = [b - a for a, b in pairwise(times)]
    assert all(180 * 0.8 - 0.1 <= g <= 180 * 1.2 + 0.1 for g in gaps), gaps
    assert 30 * 60 - 180 * 1.2 <= times[-1] < 30 * 60  # nothing planned after the end, and no fault left out before it
    assert 8 <= len(plan) <= 12  # 30 min / 3 min, give or take the jitter
    assert {f for _, f in plan} <= set(ALL)


def test_only_the_faults_given_are_drawn_and_a_run_too_short_has_none():
    assert {f for _, f in chaos.schedule(1, 60, 60, ["broker-pod-deleted"])} == {"broker-pod-deleted"}
    assert chaos.schedule(1, 180, 2, ALL) == []  # the first fault would come after 144 s at the earliest
    assert chaos.schedule(1, 60, 10, []) == []


def test_the_node_faults_need_a_cluster_this_run_brought_up():
    assert chaos.allowed_faults(own_node=True) == ALL
    assert chaos.allowed_faults(own_node=False) == list(chaos.ANY_CLUSTER)


def test_faults_asked_for_are_checked_against_what_the_cluster_can_take():
    named = chaos.allowed_faults(own_node=False)
    assert chaos.pick_faults(None, named) == named
    assert chaos.pick_faults(" broker-pod-deleted,driver-pod-deleted ", named) == ["broker-pod-deleted", "driver-pod-deleted"]
    with pytest.raises(ValueError, match="STREAMQ_E2E_KUBECONFIG"):
        chaos.pick_faults("driver-pod-deleted,kubelet-restarted", named)
    with pytest.raises(ValueError, match="unknown fault.*broker-down"):
        chaos.pick_faults("broker-down", ALL)


def test_running_again_means_running_not_degraded_and_after_a_driver_fault_a_later_attempt():
    degraded = {"type": "Degraded", "status": "True", "reason": "BrokerUnavailable"}
    assert chaos.running_again({"phase": "Running", "attempt": 3})
    assert not chaos.running_again({"phase": "Restarting", "attempt": 4}, since_attempt=3)
    assert not chaos.running_again({"phase": "Running", "attempt": 3}, since_attempt=3)
    assert chaos.running_again({"phase": "Running", "attempt": 4}, since_attempt=3)
    assert not chaos.running_again({"phase": "Running", "attempt": 4, "conditions": [degraded]})


def test_the_truth_is_what_the_source_holds():
    produced = payments(30)  # p0, p3, ... p27 are flagged: 10
    source = [r for r in produced if r[0] != "p3"]  # p3 never reached the broker
    want = flagged(source)
    sink = [*want[:-1], want[0], ("p999", '{"id": 999, "amount": 5000}')]  # the last one lost, p0 twice, one from nowhere
    assert chaos.summarize(len(produced), 1, source, sink) == {
        "recordsProduced": 30, "recordsInSource": 29, "expectedFlagged": 9, "recordsOut": 10, "uniqueReceived": 9,
        "lost": 1, "duplicates": 1, "unexpected": 1, "undelivered": 1,
    }  # fmt: skip


def test_the_report_renders_a_row_per_fault_and_the_totals():
    machine = {"cores": 2, "cpuModel": "x", "memoryGiB": 8.0, "java": "openjdk 17", "loadAverageAtStart": [1.0, 1.0, 1.0]}
    r = {"bench": "chaos", "provider": "local", "machine": machine, "commit": "abc", "started": "s", "finished": "f",
         "settings": {"minutes": 30.0, "rate": 30.0, "seed": 7, "standby": True}, "load": {"load1Mean": 2.0},
         "faults": [{"n": 1, "fault": "driver-pod-deleted", "atS": 150.0, "runningAgainS": 41.5, "outputGrowingS": 44.0, "note": ""},
                    {"n": 2, "fault": "broker-pod-deleted", "atS": 330.0, "runningAgainS": None, "outputGrowingS": None,
                     "note": "timed out: Running and output"}],
         "summary": chaos.summarize(3, 0, payments(3), flagged(payments(3)))}  # fmt: skip
    text = report.RENDER["chaos"](r)
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines()[2:4]]
    assert cells == [["1", "2.5", "driver-pod-deleted", "41.5", "44.0", ""],
                     ["2", "5.5", "broker-pod-deleted", "-", "-", "timed out: Running and output"]]  # fmt: skip
    assert "2 faults in 30 min (local provider, seed 7, standby) at 30 payments/s" in text and "**lost 0**" in text


def test_a_note_stays_on_one_line_of_the_table():
    assert chaos.one_line("kubectl exited 1:\nError | from server\n") == "kubectl exited 1: Error / from server"


def test_output_growing_counts_only_payments_produced_once_the_fault_is_in_place(monkeypatch):
    """A driver fault's kubectl calls take a second on a busy node; the old driver flags what is produced meanwhile."""
    from types import SimpleNamespace

    run = SimpleNamespace(feed=SimpleNamespace(next_id=100))

    def slow_injection(r):
        r.feed.next_id += 30  # payments produced while the fault was being injected
        return chaos.Injected("driver x")

    seen = {}

    def recover(run, injected, t0, first_new_id, timeout):
        seen["first_new_id"] = first_new_id
        return 5.0, 12.0

    monkeypatch.setitem(chaos.FAULTS, "driver-pod-deleted", slow_injection)
    monkeypatch.setattr(chaos, "recover", recover)
    row = chaos.one_fault(run, 1, "driver-pod-deleted", t_start=0.0, timeout=60)
    assert seen["first_new_id"] == 130
    assert (row["runningAgainS"], row["outputGrowingS"]) == (5.0, 12.0)
