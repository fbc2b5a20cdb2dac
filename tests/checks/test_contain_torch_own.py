"""What torch does by itself is never judged as the learner's, nor undone by a checker.

The first ``torch.func`` call of a process imports ``torch._dynamo`` (2 to 9 s), which
rebinds ``torch.manual_seed``. A checker that snapshots ``torch``'s attributes around
learner code once blamed that on a right answer ("backward set `torch.manual_seed`").
The first import can happen only once in a process, and the answer banks run after Run
All (when it may have happened already): so each of these scenarios runs in a process of
its own that has not imported ``torch._dynamo``. One fresh interpreter imports torch and
the scenario's modules once, then forks a child per scenario (``os.fork``): each child
makes the first ``torch.func`` call of its process, as a fresh interpreter would.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from autograd_helpers.checks._contain.writers import set_by_learner, writes_watched

# Runs each scenario's imports in this process, then its body in a forked child; prints
# {name: [exit code, stdout, stderr]} as JSON. Scenarios run in the order given.
FORKING_DRIVER = """
import json, os, sys, tempfile, traceback

namespace = {"__name__": "__main__"}
results = {}
for name, (imports, body) in json.load(sys.stdin).items():
    exec(compile(imports, "<string>", "exec"), namespace)  # as `python -c` names its code
    assert "torch._dynamo" not in sys.modules, "the children must reproduce the first import"
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            code = 0
            try:
                exec(compile(body, "<string>", "exec"), namespace)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        texts = []
        for file in (out, err):
            file.seek(0)
            texts.append(file.read().decode("utf-8", "replace"))
    results[name] = [os.waitstatus_to_exitcode(status), *texts]
print(json.dumps(results))
"""

CUBE_IMPORTS = """
import sys
import torch
from autograd_helpers.checks import check_function
from tests.learner_code import saved, variant
"""

CUBE_BY_TORCH_FUNC = """
assert "torch._dynamo" not in sys.modules, "the test must reproduce the first import"


def backward(ctx, grad_output):
    x = saved(ctx)
    d = torch.func.vmap(torch.func.grad(lambda t: t**3))(x.reshape(-1)).reshape(x.shape)
    return grad_output * d


Cube = variant(backward=backward)
"""

# name: (imports, run once in the parent; body, run in the child that makes the first call)
SCENARIOS = {
    # first: its process holds only its own imports, not the checkers'
    "seeding_watch": (
        """
import sys
import torch
from autograd_helpers._common.runner import run_learner_code
from autograd_helpers.checks._contain.global_calls import GlobalCalls
""",
        """
assert "torch._dynamo" not in sys.modules
calls = GlobalCalls()
outcome = run_learner_code(calls.around(lambda: torch.func.grad(torch.sin)(torch.tensor(1.0))))
wrapped = getattr(torch.manual_seed, "__wrapped__", None)
print(outcome.error, calls.said(), torch.manual_seed is not torch.random.manual_seed)
print(getattr(wrapped, "__wrapped__", wrapped) is torch.random.manual_seed)
calls = GlobalCalls()
run_learner_code(calls.around(lambda: torch.manual_seed(3)))
print(calls.reseeded)
""",
    ),
    "first_call_in_backward": (
        CUBE_IMPORTS,
        CUBE_BY_TORCH_FUNC
        + """
result = check_function(Cube, torch.linspace(-2, 2, 6), reference=lambda x: x**3, probes="edges")
assert "torch._dynamo" in sys.modules  # the learner's backward imported it
print(result.passed)
print(result.title)
# torch's own rebinding is kept (not put back by the checker), and torch is a plain module
print(torch.manual_seed is not torch.random.manual_seed, type(torch).__name__)
""",
    ),
    "attribute_set_on_torch": (
        CUBE_IMPORTS,
        CUBE_BY_TORCH_FUNC.replace("x = saved(ctx)", "x = saved(ctx)\n    torch._last_x = x")
        + """
result = check_function(Cube, torch.linspace(-2, 2, 6), reference=lambda x: x**3)
print(result.passed, hasattr(torch, "_last_x"))
print(result.title)
""",
    ),
}


@pytest.fixture(scope="module")
def first_imports() -> dict[str, list[object]]:
    """Every scenario's exit code, stdout and stderr, each from its own forked process."""
    scenarios = {
        name: (textwrap.dedent(imports), textwrap.dedent(body))
        for name, (imports, body) in SCENARIOS.items()
    }
    out = subprocess.run(
        [sys.executable, "-c", FORKING_DRIVER],
        input=json.dumps(scenarios),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.returncode == 0, out.stderr[-3000:]
    results: dict[str, list[object]] = json.loads(out.stdout.strip().splitlines()[-1])
    return results


def _run(first_imports: dict[str, list[object]], name: str) -> str:
    code, stdout, stderr = first_imports[name]
    assert code == 0, str(stderr)[-3000:]
    return str(stdout)


def test_the_first_torch_func_call_inside_backward_is_not_the_learners(first_imports):
    out = _run(first_imports, "first_call_in_backward")
    passed, title, kept = out.strip().splitlines()[-3:]
    assert passed == "True", out
    assert "Cube passed" in title
    assert kept == "True module"


def test_an_attribute_the_learner_sets_on_torch_is_still_judged_while_torch_imports(
    first_imports,
):
    out = _run(first_imports, "attribute_set_on_torch")
    verdict, title = out.strip().splitlines()[-2:]
    assert verdict == "False False", out
    assert "backward set `torch._last_x`" in title
    assert "manual_seed" not in out


def test_a_watch_on_torchs_seeding_keeps_what_torchs_first_import_rebinds(first_imports):
    out = _run(first_imports, "seeding_watch")
    assert out.strip().splitlines()[-3:] == ["None [] True", "True", "True"], out


def test_a_write_by_library_code_is_not_the_learners():
    module = types.ModuleType("notebook_helpers")
    watch = writes_watched([module])
    try:
        module.cache = [1]  # this file is the learner's code here: not the library's
        functools.update_wrapper(module, len)  # functools (the library) sets __doc__...
        assert set_by_learner(module, "cache")
        assert not set_by_learner(module, "__doc__")
        del module.cache
        assert set_by_learner(module, "cache")
    finally:
        watch.release()
    assert type(module) is types.ModuleType
    assert set_by_learner(module, "__doc__")  # unwatched: the cautious answer


def test_a_learners_rebinding_of_a_watched_function_is_still_put_back():
    import torch

    from autograd_helpers._common.runner import run_learner_code
    from autograd_helpers.checks._contain.global_calls import GlobalCalls

    original = torch.manual_seed

    def rebinds() -> None:
        torch.manual_seed = lambda seed: None  # this file is the learner's code here

    calls = GlobalCalls()
    run_learner_code(calls.around(rebinds))
    assert torch.manual_seed is original
    assert type(torch) is types.ModuleType
