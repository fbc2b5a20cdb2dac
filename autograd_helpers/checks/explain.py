"""``explain_gradcheck`` at the path notebooks import it from: it lives in chapter 03's package.

:mod:`autograd_helpers.checks.gradcheck.explain` is the module; this name keeps
``autograd_helpers.checks.explain`` importable.
"""

from __future__ import annotations

from autograd_helpers.checks.gradcheck.explain import GradcheckReport, explain_gradcheck

__all__ = ["GradcheckReport", "explain_gradcheck"]
