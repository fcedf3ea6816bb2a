"""What a new user reads before anything runs: the docs agree with the code and with each
other (exit codes, flags, commands), and a fresh clone's first command prints no warning block."""

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from contract.names import ExitCode

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
USER_GUIDE = (ROOT / "docs" / "user-guide.md").read_text()
# The operator never sees 130: that is ^C on a terminal (hack/run.sh), never a driver pod's end.
DRIVER_EXIT_CODES = {code.value for code in ExitCode} - {ExitCode.INTERRUPTED.value}


def exit_code_rows(text: str, header: str) -> dict[int, str]:
    """The rows of the Markdown table under ``header``: exit code -> the rest of the row."""
    table = text.split(header, 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines()[2:]:
        first, rest = line.strip("|").split("|", 1)
        rows[int(first.split()[0])] = first.strip() + " |" + rest
    return rows


def test_the_readme_and_the_user_guide_list_every_exit_code_the_job_has():
    readme = exit_code_rows(README, "| exit | meaning | the operator |")
    guide = exit_code_rows(USER_GUIDE, "| exit code | reason | phase | retried |")
    assert set(readme) == DRIVER_EXIT_CODES, sorted(set(readme) ^ DRIVER_EXIT_CODES)
    assert set(guide) == DRIVER_EXIT_CODES, sorted(set(guide) ^ DRIVER_EXIT_CODES)
    for code, row in readme.items():
        if code:  # the README names each code as the code does
            assert f"{code} `{ExitCode(code).name}`" in row, row


def test_the_readme_tells_the_dev_loop_its_mode_as_make_or_as_the_flag():
    # `MODE=realTime hack/run.sh --dev` was read as working: run.sh takes --mode, only make reads MODE
    assert re.search(r"^dev:\n\t@hack/run.sh --dev --mode \$\(MODE\)$", (ROOT / "Makefile").read_text(), re.M)
    for line in README.splitlines():
        if "MODE=" in line:
            assert "make dev" in line, line
            assert not re.search(r"run\.sh[^#\n]*;\s*MODE=", line), line


def test_releasing_finalizers_by_hand_keeps_each_querys_namespace():
    ops = (ROOT / "docs" / "operations.md").read_text()
    assert not re.search(r"-o name \| xargs[^\n]*kubectl patch", ops), "`-o name` drops the namespace"
    assert "{.metadata.namespace} {.metadata.name}" in ops and 'kubectl -n "$ns" patch sq "$name"' in ops


def test_latency_figures_in_the_readmes_prose_name_their_results_file():
    prose = re.sub(r"```.*?```", "", README, flags=re.S)  # console samples show what a run prints
    for line in prose.splitlines():
        if line.startswith("| `"):  # the trigger table's rows: its header cites the file (test_docs_agree)
            continue
        if re.search(r"p50 [\d.]+ ms|[\d.]+ / [\d.]+ ms", line):
            assert "bench/results/" in line or "trigger table" in line, line


def test_an_editable_install_of_a_fresh_clone_prints_no_warning(tmp_path):
    """setuptools picks a meta-path finder for a flat layout it cannot prove simple, and pip
    shows its warning block; with the root declared it writes a .pth and says nothing."""
    for name in ("contract", "app", "controller"):
        subprocess.run(["cp", "-r", str(ROOT / name), str(tmp_path / name)], check=True)
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    for stray in ("tests", "examples", "spark-warehouse", "bench"):  # what a working clone has beside them
        (tmp_path / stray).mkdir()
    out = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-W", "always", "-c",
         f"import setuptools.build_meta as b; print(b.build_editable({str(out)!r}))"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    assert "Please be careful" not in build.stderr + build.stdout, build.stderr[-3000:]
    wheel = out / build.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as z:
        pth = [n for n in z.namelist() if n.endswith(".pth")]
        assert [z.read(n).decode().strip() for n in pth] == [str(tmp_path)]


# ---------------------------------------------------------------- the cluster quick start

QUICKSTART = ROOT / "manifests" / "quickstart"


def readme_cluster_quickstart() -> list[str]:
    """The commands of README's "On your cluster: the fraud filter in four commands", comments dropped (the e2e test runs them)."""
    block = README.split("<!-- cluster-quickstart -->", 1)[1].split("<!-- /cluster-quickstart -->", 1)[0]
    body = re.search(r"```bash\n(.*?)```", block, re.S)[1]
    return [c for c in (line.split("#", 1)[0].strip() for line in body.splitlines()) if c]


def version() -> str:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_cluster_quick_start_builds_the_image_then_runs_the_sample_on_a_cluster():
    commands = readme_cluster_quickstart()
    assert commands[0] == "make image", "the image first: the e2e test builds it before the cluster loads it"
    assert "make quickstart" in commands and "hack/quickstart.sh watch" in commands
    assert "kubectl -n streamq get sq" in commands
    assert re.search(r"^quickstart:\n\t@hack/quickstart.sh$", (ROOT / "Makefile").read_text(), re.M)
    assert re.search(r"^image: jars\n\t@hack/build-image.sh\n", (ROOT / "Makefile").read_text(), re.M)
    script = (ROOT / "hack" / "quickstart.sh").read_text()
    # the sample itself, as it is in the repository: not a generated spec
    assert 'kn apply -f "$ROOT/manifests/samples/fraud-filter.yaml"' in script
    assert 'NS="${STREAMQ_QUICKSTART_NAMESPACE:-streamq}"' in script


def test_the_readme_shows_the_users_path_before_the_contributors_commands():
    """Issue #38: a user reads what streamq is, then how to run it on their cluster; the project's
    own two commands (`make run`, `make test`) come next. The heading must not start with
    "## Quick start": the project's quick start is found by splitting on its first occurrence."""
    sections = re.findall(r"^## (.+)$", README, re.M)
    first = README.split("\n## ", 2)[1]
    assert "<!-- cluster-quickstart -->" in first, f"README's first section is {sections[0]!r}, not the cluster quick start"
    assert not sections[0].startswith("Quick start"), "the cluster path's heading would hide the project's quick start"
    assert sections[1] == "Quick start", f"the project's quick start comes second, not {sections[1]!r}"
    assert "hack/kind-up.sh up --no-operator" in first.split("<!-- cluster-quickstart -->", 1)[0], (
        "before its commands the section says how to get a cluster without one"
    )


def test_the_quick_start_gives_the_sample_what_it_names():
    import yaml

    sample = yaml.safe_load((ROOT / "manifests" / "samples" / "fraud-filter.yaml").read_text())["spec"]
    kafka = list(yaml.safe_load_all((QUICKSTART / "kafka.yaml").read_text()))
    service = next(d for d in kafka if d["kind"] == "Service")
    host, port = sample["source"]["kafka"]["bootstrapServers"].split(":")
    assert service["metadata"]["name"] == host and service["spec"]["ports"][0]["port"] == int(port)
    assert sample["sink"]["kafka"]["bootstrapServers"] == f"{host}:{port}"
    assert sample["checkpoint"]["volume"]["persistentVolumeClaim"]["claimName"] == "streamq-checkpoints"
    assert "CLAIM=streamq-checkpoints" in (ROOT / "hack" / "quickstart.sh").read_text()
    payments = (QUICKSTART / "payments.py").read_text()
    topics = dict(
        re.findall(
            r'"?(\w[\w-]*)"?: (\d+)',
            re.search(r"PARTITIONS = \{(.*?)\}", payments)[1]
            .replace("SOURCE", '"payments"')
            .replace("SINK", '"payments-flagged"'),
        )
    )
    assert topics == {"payments": "2", "payments-flagged": "1"}
    # continuous mode holds a slot per source partition for the query's life: more slots than partitions
    assert sample["runtime"]["parallelism"] > int(topics["payments"])
    assert sample["source"]["kafka"]["topics"] == ["payments"] and sample["sink"]["kafka"]["topic"] == "payments-flagged"


def test_the_quick_starts_pods_run_the_image_the_chart_expects():
    import yaml

    for path in QUICKSTART.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            pod = (doc or {}).get("spec", {}).get("template", {}).get("spec")
            for container in (pod or {}).get("containers", []):
                assert container["image"] == f"streamq:{version()}", (path.name, container["image"])
                assert container["imagePullPolicy"] == "IfNotPresent"
    chart = (ROOT / "charts" / "streamq" / "Chart.yaml").read_text()
    assert re.search(rf'^appVersion: "{re.escape(version())}"$', chart, re.M)


def test_the_quick_start_payments_script_parses_its_commands():
    import importlib.util

    spec = importlib.util.spec_from_file_location("quickstart_payments", QUICKSTART / "payments.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit):
        module.main(["nonsense"])
    assert module.SOURCE == "payments" and module.SINK == "payments-flagged"


def test_the_dockerfile_carries_the_broker_the_quick_start_runs():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY jars/kafka/libs/*.jar /opt/kafka/libs/" in dockerfile
    kafka = (QUICKSTART / "kafka.yaml").read_text()
    assert '-cp "/opt/kafka/libs/*"' in kafka and "/opt/kafka/config/log4j2.properties" in kafka
    assert "docker build ." not in README.replace("A bare `docker build .` fails", "")


def test_the_upgrade_applies_the_charts_crds_before_helm_upgrade():
    """docs/operations.md's two commands (tests/e2e/test_helm_upgrade.py runs them): Helm never upgrades crds/."""
    from tests.e2e.test_helm_upgrade import documented_commands

    crds, upgrade = documented_commands()
    assert crds.startswith("kubectl apply --server-side") and crds.endswith(" -f charts/streamq/crds/")
    assert (ROOT / "charts" / "streamq" / "crds").is_dir()
    assert upgrade.startswith("helm upgrade streamq charts/streamq ") and "--reset-then-reuse-values" in upgrade
