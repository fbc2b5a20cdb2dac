"""autograd_helpers.notebook: setup_notebook makes runs reproducible; show_source prints code."""

from __future__ import annotations

import random
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import autograd_helpers as ah


def _draws() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), torch.rand(()).item()


def test_same_seed_same_draws_from_every_generator():
    ah.setup_notebook(seed=3)
    first = _draws()
    ah.setup_notebook(seed=3)
    assert _draws() == first
    ah.setup_notebook(seed=4)
    assert _draws() != first


def test_print_options_and_threads():
    ah.setup_notebook(precision=2, threads=1)
    assert str(torch.tensor([1 / 3])) == "tensor([0.33])"
    assert torch.get_num_threads() == 1
    ah.setup_notebook()
    assert str(torch.tensor([1 / 3])) == "tensor([0.3333])"


def test_warnings_print_without_paths(monkeypatch):
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)  # restored after
    ah.setup_notebook()
    text = warnings.formatwarning("careful", UserWarning, "/some/machine/path.py", 3)
    assert text == "UserWarning: careful\n"


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"seed": True}, "seed"),
        ({"precision": 17}, "precision"),
        ({"threads": 0}, "threads"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ah.setup_notebook(**kwargs)


def test_show_source(capsys):
    ah.show_source(ah.setup_notebook)
    assert capsys.readouterr().out.startswith("def setup_notebook(")
    with pytest.raises(TypeError, match="obj"):
        ah.show_source(42)
    made_by_eval = eval("lambda x: x")
    with pytest.raises(ValueError, match="the source of <lambda> is not available"):
        ah.show_source(made_by_eval)


# One fresh interpreter for both import checks: the package's import first, then setup.
FRESH_IMPORT = """
import sys
import autograd_helpers as ah
print('matplotlib' in sys.modules, 'ipywidgets' in sys.modules)
import torch
before = 'sympy' in sys.modules
ah.setup_notebook()
after = 'sympy' in sys.modules
x = torch.ones(2, requires_grad=True)
torch.autograd.grad(x * 2, x, torch.ones(2))
print(before, after, 'sympy' in sys.modules)
"""


@pytest.fixture(scope="module")
def fresh_import() -> list[str]:
    """The lines a fresh interpreter prints while it imports and sets up the package."""
    out = subprocess.run(
        [sys.executable, "-c", FRESH_IMPORT], capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def test_import_is_lazy_about_heavy_optional_modules(fresh_import):
    assert fresh_import[0].split() == ["False", "False"]


def test_setup_takes_the_first_explicit_gradients_import_so_a_checker_does_not(fresh_import):
    """torch imports SymPy at the first autograd.grad(..., grad_outputs); setup does it."""
    assert fresh_import[1].split() == ["False", "True", "True"]


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_thing"):
        _ = ah.no_such_thing


def test_anomaly_modes_forward_traceback_is_cut_to_the_learners_lines(monkeypatch):
    import IPython

    from autograd_helpers.notebook import _format_warning_without_path

    shell = Path(IPython.__file__).parent / "core" / "interactiveshell.py"  # library code
    text = (
        "Error detected in SqrtBackward0. Traceback of forward call that caused the error:\n"
        f'  File "{shell}", line 3, in run_code\n    exec(code_obj)\n'
        '  File "/tmp/ipykernel_42/123.py", line 4, in loss\n    d = torch.sqrt(x)\n'
        " (Triggered internally at /build/torch/csrc/autograd/python_anomaly_mode.cpp:122.)"
    )
    shown = _format_warning_without_path(UserWarning(text), UserWarning, "f.py", 1)
    assert shown == (
        "UserWarning: Error detected in SqrtBackward0. Traceback of forward call that caused "
        "the error:\n  in loss, line 4: d = torch.sqrt(x)\n"
    )
