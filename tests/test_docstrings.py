"""Every docstring example in the library runs and prints what it shows.

Examples are documentation that must not rot: each module's examples run here, as
``python -m doctest`` would, with ``torch`` imported and every generator seeded, so that
printed tensors are reproducible. An example marked ``# doctest: +SKIP`` needs a notebook
(a widget, a live kernel) or a failing setup and is only read.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

import matplotlib
import pytest
import torch

import autograd_helpers

matplotlib.use("Agg")  # figures are made, never shown

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(autograd_helpers.__path__, prefix="autograd_helpers.")
)


def _examples(name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, name)
    return [test for test in tests if test.examples]


def test_every_public_function_has_an_example():
    # Classes are exempt: Functions are shown through their wrappers, result types through
    # the functions that build them.
    missing = [
        f"{module}.{name}"
        for module in autograd_helpers.SUBMODULES
        for name in importlib.import_module(f"autograd_helpers.{module}").__all__
        if inspect.isfunction(obj := getattr(autograd_helpers, module).__dict__[name])
        and ">>>" not in (inspect.getdoc(obj) or "")
    ]
    assert not missing, f"public functions without a docstring example: {missing}"


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    print_options = torch._tensor_str.PRINT_OPTS.__dict__.copy()
    for test in _examples(name):
        torch.manual_seed(0)
        test.globs = {**test.globs, "torch": torch}
        runner.run(test)
    torch.set_printoptions(**print_options)  # setup_notebook's example changes them
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
