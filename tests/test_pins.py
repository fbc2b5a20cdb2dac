"""One pinned stack: pyproject.toml is the source, environment.yml and pre-commit repeat it."""

from __future__ import annotations

import re
import tomllib

import pytest
import yaml

from tools.course import REPO

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==(\S+)$")


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _pyproject_pins(*groups: str) -> dict[str, str]:
    project = _pyproject()["project"]
    requirements = list(project["dependencies"])
    for group in groups:
        requirements += project["optional-dependencies"][group]
    pins = {}
    for requirement in requirements:
        match = PIN.match(requirement)
        assert match, f"pyproject.toml: {requirement!r} is not pinned with =="
        pins[match.group(1).lower()] = match.group(2)
    return pins


def _environment_yml(path: str = "environment.yml") -> tuple[list, list[str]]:
    env = yaml.safe_load((REPO / path).read_text())
    deps = env["dependencies"]
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict))
    return deps, pip_section


def test_every_requirement_is_pinned_exactly():
    _pyproject_pins("lab", "test", "dev")  # asserts inside


def test_the_installed_torch_is_the_pinned_cpu_build():
    import torch

    assert _pyproject_pins()["torch"] == "2.13.0"
    assert torch.__version__.split("+")[0] == "2.13.0", torch.__version__
    assert torch.version.cuda is None, (
        f"torch {torch.__version__} is a CUDA build; the course runs on the CPU build: "
        'make setup PIP_ARGS="--extra-index-url https://download.pytorch.org/whl/cpu"'
    )


@pytest.mark.parametrize("path", ["environment.yml", ".binder/environment.yml"])
def test_environment_files_repeat_the_runtime_and_lab_pins(path):
    _, pip_section = _environment_yml(path)
    env_pins = {}
    for line in pip_section:
        match = PIN.match(line)
        if match:
            env_pins[match.group(1).lower()] = match.group(2)
    assert env_pins == _pyproject_pins("lab")


def test_environment_yml_installs_the_package_and_python_311():
    deps, pip_section = _environment_yml()
    assert "-e ." in pip_section
    assert "python=3.11" in deps
    assert _pyproject()["project"]["requires-python"] == ">=3.11"


def test_pre_commit_uses_the_pinned_ruff():
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    revs = {repo["repo"]: repo.get("rev") for repo in config["repos"]}
    ruff_rev = next(rev for url, rev in revs.items() if "ruff-pre-commit" in url)
    assert ruff_rev == "v" + _pyproject_pins("test")["ruff"]


def test_binder_installs_the_package_after_the_repository_is_there():
    deps, pip_section = _environment_yml(".binder/environment.yml")
    assert "-e ." not in pip_section and "python=3.11" in deps
    post_build = (REPO / ".binder" / "postBuild").read_text()
    assert "pip install --no-deps ." in post_build, "the package from its wheel, not editable"
    assert "-e ." not in post_build
    start = (REPO / ".binder" / "start").read_text()
    assert "deploy/course-start" in start, "the workspace is built at start, in the home"
    assert (REPO / ".binder" / "postBuild").stat().st_mode & 0o111, "postBuild must be executable"


def test_binder_kernels_get_the_quiet_native_logs_before_torch_is_imported():
    from autograd_helpers.notebook import QUIET_NATIVE_LOGS

    start = REPO / ".binder" / "start"
    assert start.stat().st_mode & 0o111, ".binder/start must be executable"
    text = start.read_text()
    for key, value in QUIET_NATIVE_LOGS.items():
        assert f"export {key}={value}" in text
    assert text.rstrip().endswith('exec "$@"')


def test_the_hub_requirements_repeat_the_hub_extra():
    hub = _pyproject_pins("hub")
    for line in (REPO / "deploy" / "requirements-hub.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = PIN.match(line.strip())
        assert match, f"deploy/requirements-hub.txt: {line!r} is not pinned with =="
        assert hub.get(match.group(1).lower()) == match.group(2), line


def test_the_proxy_is_pinned_and_locked():
    import json

    package = json.loads((REPO / "deploy" / "package.json").read_text())
    version = package["dependencies"]["configurable-http-proxy"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), "pin the proxy exactly"
    lock = json.loads((REPO / "deploy" / "package-lock.json").read_text())
    locked = lock["packages"]["node_modules/configurable-http-proxy"]
    assert locked["version"] == version and locked["integrity"].startswith("sha512-")


def test_importing_nbformat_builds_no_iri_parser():
    """jsonschema 4.25+ imports rfc3987_syntax, which builds an Earley parser on import: 2 to
    4 s in every process that reads a notebook or starts JupyterLab (pinned below it)."""
    import subprocess
    import sys

    code = "import sys, nbformat, jupyter_server.serverapp; print('rfc3987_syntax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr[-2000:]
