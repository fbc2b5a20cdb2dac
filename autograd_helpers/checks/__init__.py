"""Exercise checkers: run the learner's code and explain, in plain words, what is wrong.

Introduced in ``00_start_here.ipynb`` and used after every exercise. A checker never raises
because of the learner's code: a stub, an exception, a wrong shape or a wrong number all
become a :class:`CheckResult` that says what to fix. It does raise (``TypeError`` or
``ValueError``) when the *notebook* sets the check up wrong: bad options, or a reference
that fails on its own inputs. Then the message says that the check is at fault.

The checkers are the course's answer keys, one package per chapter's exercises, each
exporting its public checkers from its ``__init__`` and keeping its hints, probes and
attempts private inside it (``_*.py``):

- :mod:`~autograd_helpers.checks.function`, for any exercise: :func:`check_function` (a
  Function's forward, backward and gradients) and :func:`check_tensor` (a computed value);
- :mod:`~autograd_helpers.checks.jacobians` (chapter 02): :func:`check_jacobian_loop`,
  :func:`check_hvp`, :func:`check_jacobian_shapes` (with :func:`set_up_jacobian_shapes`);
- :mod:`~autograd_helpers.checks.gradcheck` (chapter 03): :func:`check_gradcheck_settings`,
  :func:`check_double_backward`, and :func:`explain_gradcheck` (gradcheck told in words,
  :mod:`~autograd_helpers.checks.gradcheck.explain`, also importable as
  ``autograd_helpers.checks.explain``);
- :mod:`~autograd_helpers.checks.anomaly` (chapter 04): :func:`check_finite_gradients`,
  :func:`check_training_step`, :func:`check_safe_backward`;
- :mod:`~autograd_helpers.checks.modes` (chapter 05): :func:`check_evaluate`,
  :func:`check_frozen`, :func:`check_mode_predictions`;
- :mod:`~autograd_helpers.checks.profiler` (chapter 06): :func:`check_regions`,
  :func:`check_saved_bytes`, :func:`check_dominant_op`.

Each keeps the rules of the course's checkers: probe beyond the example, contain and judge
side effects, check the mechanism the exercise teaches, never crash or reject a right answer
for its spelling, give no verdict on timing, and judge only what the learner did. What
several chapters share lives in two private packages, by idea: ``_core/`` (the attempt and
its verdict: :class:`CheckResult`, the trial, numbers, hints, probes, the problem tables,
the progress log) and ``_contain/`` (what learner code changed or ran, judged and put back;
the watcher). A chapter's package stands on those two and on another chapter's public
checkers only (``gradcheck``, ``anomaly`` and ``profiler`` reuse :func:`check_function`);
``tests/test_layering.py`` guards the direction.

When the environment variable ``COURSE_PROGRESS_LOG`` names a file, every checker verdict in
a learner's own notebook is also appended to it as one JSON line (the exercise, the notebook,
the verdict and the time), which ``python -m tools.progress`` turns into a table.
"""

from __future__ import annotations

from autograd_helpers.checks import anomaly as _anomaly
from autograd_helpers.checks import function as _function
from autograd_helpers.checks import gradcheck as _gradcheck
from autograd_helpers.checks import jacobians as _jacobians
from autograd_helpers.checks import modes as _modes
from autograd_helpers.checks import profiler as _profiler
from autograd_helpers.checks._core.feedback import CheckResult
from autograd_helpers.checks._core.progress import recorded as _recorded
from autograd_helpers.checks.gradcheck.explain import GradcheckReport, explain_gradcheck

# Every exercise checker logs its verdict when COURSE_PROGRESS_LOG is set (a workshop's hub
# sets it; see _core.progress). explain_gradcheck is a teaching tool, not a checker: not logged.
check_function = _recorded(_function.check_function)
check_tensor = _recorded(_function.check_tensor)
check_jacobian_loop = _recorded(_jacobians.check_jacobian_loop)
check_hvp = _recorded(_jacobians.check_hvp)
check_jacobian_shapes = _recorded(_jacobians.check_jacobian_shapes)
check_gradcheck_settings = _recorded(_gradcheck.check_gradcheck_settings)
check_double_backward = _recorded(_gradcheck.check_double_backward)
check_finite_gradients = _recorded(_anomaly.check_finite_gradients)
check_training_step = _recorded(_anomaly.check_training_step)
check_safe_backward = _recorded(_anomaly.check_safe_backward)
check_evaluate = _recorded(_modes.check_evaluate)
check_frozen = _recorded(_modes.check_frozen)
check_mode_predictions = _recorded(_modes.check_mode_predictions)
check_regions = _recorded(_profiler.check_regions)
check_saved_bytes = _recorded(_profiler.check_saved_bytes)
check_dominant_op = _recorded(_profiler.check_dominant_op)
set_up_jacobian_shapes = _jacobians.set_up_jacobian_shapes

__all__ = [
    "CheckResult",
    "GradcheckReport",
    "check_dominant_op",
    "check_double_backward",
    "check_evaluate",
    "check_finite_gradients",
    "check_frozen",
    "check_function",
    "check_gradcheck_settings",
    "check_hvp",
    "check_jacobian_loop",
    "check_jacobian_shapes",
    "check_mode_predictions",
    "check_regions",
    "check_safe_backward",
    "check_saved_bytes",
    "check_tensor",
    "check_training_step",
    "explain_gradcheck",
    "set_up_jacobian_shapes",
]
