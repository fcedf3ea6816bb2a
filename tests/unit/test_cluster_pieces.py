"""Pure pieces of the e2e cluster code (no cluster, no root): provider choice, the
image packer, image names as containerd records them, the iptables filter."""

from __future__ import annotations

import json
import tarfile

import pytest

from testbed.cluster import choose_provider
from testbed.cluster.images.pack import docker_archive
from testbed.cluster.local import OUR_CHAINS, _archive_refs

pytestmark = pytest.mark.unit


def test_provider_forced_by_env(monkeypatch):
    monkeypatch.setenv("STREAMQ_E2E_PROVIDER", "local")
    assert choose_provider() == "local"
    monkeypatch.setenv("STREAMQ_E2E_PROVIDER", "kind")
    assert choose_provider() == "kind"
    monkeypatch.setenv("STREAMQ_E2E_PROVIDER", "minikube")
    with pytest.raises(ValueError, match="kind, local"):
        choose_provider()


def test_auto_provider_is_kind_only_when_docker_answers(monkeypatch):
    monkeypatch.delenv("STREAMQ_E2E_PROVIDER", raising=False)
    monkeypatch.setattr("testbed.cluster.docker_works", lambda: False)
    assert choose_provider() == "local"
    monkeypatch.setattr("testbed.cluster.docker_works", lambda: True)
    assert choose_provider() == "kind"


def test_docker_archive_is_reproducible_and_loadable(tmp_path):
    binary = tmp_path / "pause"
    binary.write_bytes(b"\x7fELF not really")
    first = docker_archive(
        tmp_path / "a.tar", "streamq-e2e/pause:1.0", [("/pause", binary, 0o755)], ["/pause"], user="65535:65535"
    )
    second = docker_archive(
        tmp_path / "b.tar", "streamq-e2e/pause:1.0", [("/pause", binary, 0o755)], ["/pause"], user="65535:65535"
    )
    assert first == second
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    with tarfile.open(tmp_path / "a.tar") as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
        assert manifest[0]["RepoTags"] == ["streamq-e2e/pause:1.0"]
        config = json.load(tar.extractfile(manifest[0]["Config"]))
        assert config["config"]["Entrypoint"] == ["/pause"] and config["config"]["User"] == "65535:65535"
        layer = tarfile.open(fileobj=tar.extractfile(manifest[0]["Layers"][0]))
        member = layer.getmember("pause")
        assert member.mode == 0o755 and member.uid == 0 and layer.extractfile(member).read() == binary.read_bytes()
    assert _archive_refs(tmp_path / "a.tar") == ["docker.io/streamq-e2e/pause:1.0"]


@pytest.mark.parametrize(
    ("tag", "ref"),
    [
        ("streamq:0.1.0", "docker.io/library/streamq:0.1.0"),
        ("team/streamq:1", "docker.io/team/streamq:1"),
        ("localhost/streamq:1", "localhost/streamq:1"),
        ("registry.example:5000/streamq:1", "registry.example:5000/streamq:1"),
    ],
)
def test_archive_names_as_containerd_records_them(tmp_path, tag, ref):
    binary = tmp_path / "f"
    binary.write_bytes(b"x")
    docker_archive(tmp_path / "i.tar", tag, [("/f", binary, 0o644)], ["/f"])
    assert _archive_refs(tmp_path / "i.tar") == [ref]


def test_teardown_removes_only_cluster_rules():
    dump = [
        ":KUBE-SERVICES - [0:0]",
        '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
        "-A FORWARD -j STREAMQ-E2E",
        "-A POSTROUTING -s 10.244.0.2/32 -j CNI-abc123",
        "-A INPUT -p tcp --dport 22 -j ACCEPT",
        ":DOCKER-USER - [0:0]",
    ]
    kept = [line for line in dump if not OUR_CHAINS.search(line)]
    assert kept == ["-A INPUT -p tcp --dport 22 -j ACCEPT", ":DOCKER-USER - [0:0]"]


def test_the_autoscaling_scenario_calibrates_on_warm_batches_not_the_best_one():
    from testbed.cluster.autoscale import warm_rate

    # JIT-cold batches first, then warm ones: the median of the second half, not the lucky best
    assert warm_rate({0: 210.0, 1: 480.0, 2: 600.0, 3: 640.0, 4: 655.0, 5: 771.0, 6: 650.0, 7: 660.0}) == 657.5
    assert warm_rate({7: 300.0, 9: 500.0}) == 500.0
    assert warm_rate({3: 420.0}) == 420.0


def test_the_autoscaling_scenario_sets_its_step_from_one_executors_batches_under_load():
    from testbed.cluster.autoscale import Sample, loaded_rate

    def at(t: float, batch: int | None, rate: float | None, pods: int = 1) -> Sample:
        return Sample(
            t=t, input_rate=None, processed_rate=rate, lag=0, executors=1, recommended=1, executor_pods=pods, batch=batch
        )

    series = [at(5, 3, 300.0), at(21, 4, 1400.0), at(22, 4, 1400.0), at(23, 4, 1400.0), at(30, 5, 1450.0),
              at(38, 6, 1500.0), at(40, None, None), at(45, 7, 2900.0, pods=2)]  # fmt: skip
    # each batch once however many seconds it was the newest record; before the warm-up and with two pods: not
    assert loaded_rate(series, since=20) == 1450.0
    assert loaded_rate(series, since=50) is None


def test_the_autoscaling_scenario_says_when_the_lag_is_back_for_good():
    from testbed.cluster.autoscale import Sample, _back_below

    def at(t: float, lag: int | None) -> Sample:
        return Sample(t=t, input_rate=None, processed_rate=None, lag=lag, executors=2, recommended=2, executor_pods=2)

    series = [at(30, 9000), at(40, 3000), at(50, 6000), at(60, None), at(70, 2000), at(80, 1000)]
    assert _back_below(series, 4000, since=30) == 40.0  # the dip at 40 s does not count: it rose again
    assert _back_below([*series, at(90, 5000)], 4000, since=30) is None


def _step_run(**changes):
    from testbed.cluster.autoscale import Sample, StepRun

    def at(t: float, pods: int, rate: float, lag: int) -> Sample:
        return Sample(t=t, input_rate=None, processed_rate=rate, lag=lag, executors=pods, recommended=pods, executor_pods=pods)

    run = StepRun(query="q", per_executor=700.0, calibrated=760.0, high_rate=770.0, low_rate=70.0,
                  samples=[at(5, 1, 300, 4000), at(15, 1, 640, 6000), at(25, 1, 650, 8000), at(40, 2, 930, 9000),
                           at(120, 2, 940, 2000), at(240, 1, 300, 100)],
                  scaled_up_after_s=28.0, lag_back_after_s=80.0, processed_by_size={1: 600.0, 2: 935.0},
                  stepped_down_at_s=210.0, scaled_down_after_s=30.0, output="9 records out, 0 missing, 0 unexpected, 0 duplicates",
                  resizes=[(28.0, 1, 2), (240.0, 2, 1)], attempt=1, restarts=0,
                  events=["driver q-driver-1: 1 -> 2 executors (lag)", "driver q-driver-1: 2 -> 1 executors"])  # fmt: skip
    for key, value in changes.items():
        setattr(run, key, value)
    return run


def test_the_autoscaling_scenario_says_what_an_e2e_run_fell_short_of():
    from testbed.cluster.autoscale import Settings, shortfalls

    s = Settings()
    assert shortfalls(_step_run(), s) == []
    slow = shortfalls(_step_run(lag_back_after_s=s.catch_up_s + 1.0), s)
    assert len(slow) == 1 and "within catchUpDuration" in slow[0]
    assert any(
        "after the step ended" in m or "while the step lasted" in m for m in shortfalls(_step_run(stepped_down_at_s=100.0), s)
    )
    assert any(
        "no flapping" in m for m in shortfalls(_step_run(resizes=[(28.0, 1, 2), (60.0, 2, 1), (90.0, 1, 2), (240.0, 2, 1)]), s)
    )
    kept_up = _step_run(high_rate=600.0)  # one executor did 640-650/s: it kept up, the scale-up was not needed
    assert any("falls behind" in m for m in shortfalls(kept_up, s))
    assert any("in place" in m for m in shortfalls(_step_run(restarts=1), s))
