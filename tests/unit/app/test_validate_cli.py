"""`streamq validate` over what a CI job has: directories, multi-document files, other kinds (issue 38)."""

import json
import tomllib
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from app.cli.commands import NO_QUERY_FOUND, cli
from contract import ExitCode
from testbed.specs import query_spec, resource, with_change

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
K = query_spec()
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
KUSTOMIZATION = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["q.yaml"]}


def _named(name: str, spec: dict = K) -> dict:
    return resource(spec, name)


def _write(path: Path, *documents) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def _validate(*args) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, ["validate", *map(str, args)])
    return result.exit_code, result.output.splitlines()


def test_the_samples_folder_as_a_ci_job_globs_it():
    """`streamq validate manifests/samples/*`: the Kustomization, Namespace and RBAC are skipped, not invalid."""
    code, lines = _validate(*sorted((ROOT / "manifests" / "samples").iterdir()))
    assert code == 0, lines
    valid = [line for line in lines if line.startswith("valid ")]
    assert len(valid) == 4 and any("micro-batch.yaml (microBatch mode)" in line for line in valid)
    assert any(line.startswith("skipped ") and "kustomization.yaml" in line and "kind Kustomization" in line for line in lines)
    assert not any(line.startswith("invalid") for line in lines)


def test_a_directory_is_searched_and_every_document_checked(tmp_path):
    _write(tmp_path / "kustomization.yaml", KUSTOMIZATION)
    _write(tmp_path / "team-a" / "queries.yaml", NAMESPACE, _named("first"), _named("second"))
    _write(tmp_path / "team-b" / "deep" / "q.yml", _named("third"))
    (tmp_path / "team-b" / "q.json").write_text(json.dumps(_named("fourth")))
    (tmp_path / "notes.txt").write_text("not yaml: [")  # not a manifest's suffix: not read
    _write(tmp_path / ".git" / "config.yaml", _named("hidden", with_change(K, "sourc", {})))  # hidden: not read
    code, lines = _validate(tmp_path)
    assert code == 0, lines
    valid = sorted(line.split()[1] for line in lines if line.startswith("valid "))
    assert valid == sorted([f"{tmp_path}/team-a/queries.yaml#2", f"{tmp_path}/team-a/queries.yaml#3",
                            f"{tmp_path}/team-b/deep/q.yml", f"{tmp_path}/team-b/q.json"])  # fmt: skip
    skipped = [line for line in lines if line.startswith("skipped ")]
    assert len(skipped) == 2 and any("queries.yaml#1: not a StreamingQuery (kind Namespace" in line for line in skipped)


def test_an_invalid_query_among_others_is_the_one_reported_exit_64(tmp_path):
    path = _write(tmp_path / "all.yaml", NAMESPACE, _named("good"), _named("bad", with_change(K, "sourc", {})))
    code, lines = _validate(path)
    assert code == ExitCode.INVALID_SPEC, lines
    assert any(line.startswith(f"invalid {path}#3: 1 problem(s)") for line in lines)
    assert any("spec.sourc: unknown field" in line for line in lines)
    assert any(line.startswith(f"valid {path}#2") for line in lines)


@pytest.mark.parametrize("documents", [(NAMESPACE, KUSTOMIZATION), ()], ids=["other kinds only", "empty file"])
def test_no_query_at_all_is_an_error_66(tmp_path, documents):
    path = _write(tmp_path / "x.yaml", *documents)
    code, lines = _validate(path)
    assert code == NO_QUERY_FOUND == 66, lines
    assert lines[-1] == f"no StreamingQuery in {path}"


def test_a_path_that_does_not_exist_is_an_error_66_even_beside_a_valid_query(tmp_path):
    good = _write(tmp_path / "q.yaml", _named("good"))
    code, lines = _validate(good, tmp_path / "typo.yaml")
    assert code == NO_QUERY_FOUND, lines
    assert f"cannot read {tmp_path}/typo.yaml: no such file or directory" in lines


def test_a_list_as_kubectl_writes_it_and_a_bare_spec(tmp_path):
    listed = _write(tmp_path / "list.yaml", {"apiVersion": "v1", "kind": "List", "items": [_named("a"), NAMESPACE]})
    bare = _write(tmp_path / "bare.yaml", K)
    code, lines = _validate(listed, bare)
    assert code == 0, lines
    assert f"valid {listed} item 1 (continuous mode)" in lines and f"valid {bare} (continuous mode)" in lines
    assert any(line.startswith(f"skipped {listed} item 2") for line in lines)


def test_version_is_the_packages():
    result = CliRunner().invoke(cli, ["--version"])
    expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert result.exit_code == 0
    assert result.output.strip() == f"streamq {expected}", "stale metadata? pip install -e . again"


def test_a_helm_template_in_a_folder_is_skipped_a_broken_query_is_not(tmp_path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "deployment.yaml").write_text("{{- if .Values.enabled }}\nkind: Deployment\n{{- end }}\n")
    _write(tmp_path / "q.yaml", _named("good"))
    code, lines = _validate(tmp_path)
    assert code == 0, lines
    assert f"skipped {tmp_path}/templates/deployment.yaml: not a StreamingQuery (not YAML: a template?)" in lines
    # the same file named on the command line, or a broken file that says it is a StreamingQuery: invalid
    assert _validate(tmp_path / "templates" / "deployment.yaml")[0] == ExitCode.INVALID_SPEC
    (tmp_path / "broken.yaml").write_text("kind: StreamingQuery\nspec: [unclosed\n")
    code, lines = _validate(tmp_path)
    assert code == ExitCode.INVALID_SPEC and any("broken.yaml is not valid YAML/JSON" in line for line in lines)
