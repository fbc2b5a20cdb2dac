"""autograd_helpers.checks._core.feedback: a CheckResult is a plain value with text and HTML
views."""

from __future__ import annotations

import pytest

from autograd_helpers.checks._core.feedback import CheckResult


def test_status_decides_passed_and_the_icon():
    assert CheckResult("passed", "ok").passed
    assert not CheckResult("failed", "no").passed
    assert not CheckResult("not implemented", "todo").passed
    assert CheckResult("not implemented", "todo").message == "📝 todo"


def test_details_are_indented_line_by_line():
    result = CheckResult("failed", "F: wrong.", ("one\ntwo", "three"))
    assert result.message == "❌ F: wrong.\n   one\n   two\n   three"
    assert repr(result) == result.message


def test_html_escapes_learner_text_and_renders_code_spans():
    result = CheckResult("failed", "F: `x` is <off>.", ("<script>",))
    html = result._repr_html_()
    assert "<code>x</code>" in html and "&lt;off&gt;" in html and "&lt;script&gt;" in html
    assert "<script>" not in html


def test_an_unknown_status_is_refused():
    with pytest.raises(ValueError, match="status"):
        CheckResult("maybe", "?")  # type: ignore[arg-type]
