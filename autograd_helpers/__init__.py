"""Helper library for the course *PyTorch autograd, inside out*.

Every notebook starts with::

    import autograd_helpers as ah
    ah.setup_notebook()

Submodules are imported on first use (``ah.checks``, ``ah.graph``, ...), so that
``import autograd_helpers`` stays cheap on top of ``import torch`` and matplotlib
or ipywidgets load only in the notebooks that draw or interact.

The layout shows who may use what, as ``torch/autograd/`` does: the modules at the top are
the public ones, named by the idea a chapter teaches; ``checks/`` holds the exercise
checkers, one package per chapter (``checks/function/`` ... ``checks/profiler/``) and their
shared machinery in private packages (``checks/_core/``, ``checks/_contain/``); ``_common/``
is the private core they all stand on (validation, the learner-code runner, report boxes,
the graph's vocabulary), which imports nothing else of ours.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from autograd_helpers.notebook import setup_notebook, show_source

if TYPE_CHECKING:
    from autograd_helpers import anomaly as anomaly
    from autograd_helpers import checks as checks
    from autograd_helpers import engine as engine
    from autograd_helpers import environment as environment
    from autograd_helpers import finite_differences as finite_differences
    from autograd_helpers import functions as functions
    from autograd_helpers import graph as graph
    from autograd_helpers import guards as guards
    from autograd_helpers import jacobians as jacobians
    from autograd_helpers import memory as memory
    from autograd_helpers import modes as modes
    from autograd_helpers import modules as modules
    from autograd_helpers import notebook as notebook
    from autograd_helpers import plot as plot
    from autograd_helpers import profiling as profiling
    from autograd_helpers import widgets as widgets
    from autograd_helpers import wrap as wrap

__version__ = "0.1.0"

# The public submodules: every module of the package whose name has no leading underscore.
SUBMODULES = (
    "anomaly",
    "checks",
    "engine",
    "environment",
    "finite_differences",
    "functions",
    "graph",
    "guards",
    "jacobians",
    "memory",
    "modes",
    "modules",
    "notebook",
    "plot",
    "profiling",
    "widgets",
    "wrap",
)

__all__ = ["SUBMODULES", "__version__", "setup_notebook", "show_source", *SUBMODULES]


def __getattr__(name: str) -> Any:
    # Lazy submodules (PEP 562): `ah.checks` imports autograd_helpers.checks on first access.
    if name in SUBMODULES:
        return importlib.import_module(f"autograd_helpers.{name}")
    raise AttributeError(f"module 'autograd_helpers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
