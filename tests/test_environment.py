"""autograd_helpers.environment: the pins come from the package metadata."""

from __future__ import annotations

import tomllib

import pytest

from autograd_helpers import environment
from tools.course import REPO


def test_course_pins_match_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    expected = [r for r in project["dependencies"] + project["optional-dependencies"]["lab"]]
    pins = environment.course_pins()
    assert sorted(f"{k}=={v}" for k, v in pins.items()) == sorted(expected)
    assert "pytest" in environment.course_pins(("test",))
    assert "pytest" not in pins


def test_check_environment_passes_in_the_course_venv():
    report = environment.check_environment()
    assert report.ok, str(report)
    text = str(report)
    assert "torch       2.13.0    2.13.0 ✓" in text
    assert f"All {len(environment.course_pins())} pinned packages match" in text
    assert repr(report) == text


def test_check_environment_reports_a_mismatch(monkeypatch):
    real = environment._installed_version
    monkeypatch.setattr(
        environment, "_installed_version", lambda name: "0.0" if name == "numpy" else real(name)
    )
    report = environment.check_environment()
    assert not report.ok and report.mismatched == ["numpy"]
    assert "numpy       2.4.6     0.0 ✗" in str(report)
    assert "Differs from the course's stack: numpy" in str(report)


def test_a_missing_package_and_an_old_python_are_reported():
    report = environment.EnvironmentReport((3, 10), (("torch", "2.13.0", None),))
    assert not report.ok
    assert "Python 3.10 ✗" in str(report) and "torch    2.13.0    missing ✗" in str(report)


def test_bad_extras():
    with pytest.raises(TypeError, match="extras"):
        environment.course_pins("lab")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError,
        match=r"unknown extras \['labs'\]; the course has \['dev', 'hub', 'lab', 'site', 'test'\]",
    ):
        environment.course_pins(("labs",))
