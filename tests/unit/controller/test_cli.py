"""The operator's command lines (typer): the chart's and hack's invocations parse, errors exit as argparse did."""

import pytest

from controller import crd, uninstall
from controller.__main__ import main, parse_args

pytestmark = pytest.mark.unit


def test_usage_errors_exit_2(capsys):
    for argv in (["-n", "x", "-A"], ["--standalone", "--peering", "p"], ["--no-such-flag"], ["--priority", "high"]):
        with pytest.raises(SystemExit) as exc:
            parse_args(argv, env={})
        assert exc.value.code == 2, argv
    assert "use either --peering or --standalone" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["release-finalizers", "--deployment", "d"])  # --operator-namespace is required
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        crd.main(["--bogus"])
    assert exc.value.code == 2


def test_help_exits_0(capsys):
    for run in (lambda: parse_args(["--help"], env={}), lambda: crd.main(["--help"])):
        with pytest.raises(SystemExit) as exc:
            run()
        assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "Usage: python -m controller [OPTIONS]" in out and "STREAMQ_NAMESPACES" in out and "--check" in out


def test_the_charts_operator_arguments():
    args = parse_args(["--namespace=team-a", "--namespace=team-b", "--verbose"], env={"STREAMQ_STANDALONE": "1"})
    assert args.namespaces == ["team-a", "team-b"] and args.verbose and args.standalone and not args.all_namespaces
    args = parse_args(["--all-namespaces"], env={"STREAMQ_NAMESPACES": "a", "STREAMQ_STANDALONE": "true"})
    assert args.namespaces is None and args.all_namespaces and not args.standalone  # only "1" turns it on
    args = parse_args(["--peering", "p", "--liveness", "http://0.0.0.0:8080/healthz", "--metrics-port", "0", "-v"],
                      env={"STREAMQ_PEERING": "q", "STREAMQ_LIVENESS": "http://x", "STREAMQ_METRICS_PORT": "1"})  # fmt: skip
    assert (args.peering, args.liveness, args.metrics_port, args.verbose) == ("p", "http://0.0.0.0:8080/healthz", 0, True)
    assert parse_args([], env={"STREAMQ_PEERING": "", "STREAMQ_LIVENESS": ""}).peering is None


def test_the_charts_uninstall_hook_arguments(monkeypatch):
    calls = []

    class Fake:
        def __init__(self, _api):
            pass

        def stop_operator(self, namespace, deployment, timeout):
            calls.append(("stop", namespace, deployment, timeout))

        def release_queries(self, namespaces):
            calls.append(("release", namespaces))
            return uninstall.Released([], 0)

    monkeypatch.setattr(uninstall, "Uninstall", Fake)
    monkeypatch.setattr(uninstall.config, "load_incluster_config", lambda: None)
    assert main(["release-finalizers", "--operator-namespace=streamq-system", "--deployment=streamq-operator",
                 "--timeout=90", "--namespace=team-a", "--namespace=team-b"]) == 0  # fmt: skip
    assert main(["release-finalizers", "--operator-namespace", "ns", "--deployment", "d"]) == 0
    assert calls == [("stop", "streamq-system", "streamq-operator", 90.0), ("release", ["team-a", "team-b"]),
                     ("stop", "ns", "d", 120.0), ("release", None)]  # fmt: skip
