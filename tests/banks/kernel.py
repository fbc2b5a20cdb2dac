"""A chapter's student notebook in a real kernel, after Run All, to work exercises in.

:class:`ChapterKernel` builds the student copy of a chapter, starts a kernel in its folder
(as JupyterLab would), runs every cell in order and keeps the checkers' stub verdicts and
whether the chapter left torch's global modes (grad, inference, anomaly, default dtype) as
it found them.
:meth:`ChapterKernel.attempt` then works one exercise as a learner does: the answer's
source replaces the exercise cell(s) and runs, then the checker cell runs. It returns the
verdict, and what the checker call left changed in the kernel: torch's global settings,
the random state, and every tensor, module and optimizer the notebook's names hold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from queue import Empty
from typing import Any

import nbformat

from tests.banks import Answer
from tools.exercises import Exercise, exercises_of
from tools.kernels import kernel_env, kernel_manager
from tools.student import build_student_notebook

NOTEBOOKS = Path(__file__).resolve().parent.parent.parent / "notebooks"
CELL_TIMEOUT = 300  # seconds: a whole chapter's slowest cell on a busy 2-core machine

# Runs in the kernel after Run All: a chapter leaves torch's global modes as it found them
# (inference mode first: it turns grad mode off too, and is the mode to name).
STATE_CHECK = """\
import torch as _torch
assert not _torch.is_inference_mode_enabled(), "{name} left inference mode on"
assert _torch.is_grad_enabled(), "{name} left grad mode off"
assert _torch.get_default_dtype() == _torch.float32, "{name} changed the default dtype"
assert not _torch.is_anomaly_enabled(), "{name} left anomaly detection on"
"""

# Defined in the kernel after Run All: everything a checker call must leave as it found it.
FINGERPRINT = r"""
def __course_fingerprint():
    import hashlib, json, torch

    def digest(tensor):
        t = tensor.detach()
        if t.is_meta:  # a shape without values (a learner may write one)
            return "meta"
        if t.layout != torch.strided:
            t = t.to_dense()
        data = t.contiguous().cpu().reshape(-1).view(torch.uint8) if t.numel() else t
        return hashlib.sha1(bytes(data.numpy())).hexdigest()[:12] if t.numel() else "empty"

    def tensor(t):
        hooks = len(t._backward_hooks or {}) if t.requires_grad else 0
        grad = None if t.grad is None else digest(t.grad)
        return [list(t.shape), str(t.dtype), t.requires_grad, digest(t), hooks, grad]

    def module(m):
        flags = [[n, s.training, len(s._forward_hooks) + len(s._forward_pre_hooks)
                  + len(s._backward_hooks)] for n, s in m.named_modules()]
        params = {n: tensor(p) for n, p in m.named_parameters()}
        buffers = {n: digest(b) for n, b in m.named_buffers()}
        return {"flags": flags, "parameters": params, "buffers": buffers}

    state = {
        "grad mode": torch.is_grad_enabled(),
        "anomaly mode": torch.is_anomaly_enabled(),
        "default dtype": str(torch.get_default_dtype()),
        "threads": torch.get_num_threads(),
        "random state": digest(torch.get_rng_state()),
    }
    for name, value in list(globals().items()):
        if name.startswith("_"):
            continue
        if isinstance(value, torch.Tensor):
            state[f"tensor {name}"] = tensor(value)
        elif isinstance(value, torch.nn.Module):
            state[f"module {name}"] = module(value)
        elif isinstance(value, torch.optim.Optimizer):
            state[f"optimizer {name}"] = [
                {k: (digest(v) if isinstance(v, torch.Tensor) else repr(v))
                 for k, v in s.items()} for s in value.state.values()
            ]
        elif isinstance(value, (list, tuple)) and 0 < len(value) <= 64:
            items = [v for v in value if isinstance(v, (torch.Tensor, list, tuple))]
            flat = [t for v in items for t in (v if isinstance(v, (list, tuple)) else [v])]
            tensors = [tensor(t) for t in flat if isinstance(t, torch.Tensor)]
            if tensors:
                state[f"list {name}"] = tensors
    return state
"""

# Runs in the kernel after Run All: torch's settings then, put back after every attempt, so
# that an answer cell that changes them at the top level cannot spoil the answers after it.
SETTINGS = r"""
import copy as __course_copy
import torch as __course_torch
__course_settings = (
    __course_torch.is_grad_enabled(),
    __course_torch.is_anomaly_enabled(),
    __course_torch.get_default_dtype(),
    __course_torch.get_num_threads(),
    __course_torch.get_rng_state(),
)
# The notebook's models, optimizers and tensors as Run All left them: a cell that runs
# between an exercise's cells (06's table cell trains `net` with `sgd`) changes them.
__course_objects = {
    __name: (__value, __course_copy.deepcopy(__value.state_dict()), [
        __m.training for __m in __value.modules()] if isinstance(__value, __course_torch.nn.Module)
        else __course_copy.deepcopy(__value.defaults))
    for __name, __value in list(globals().items())
    if not __name.startswith("_")
    and isinstance(__value, (__course_torch.nn.Module, __course_torch.optim.Optimizer))
}
__course_tensors = [
    (__value, __value.detach().clone(), __value.requires_grad)
    for __name, __value in list(globals().items())
    if not __name.startswith("_") and isinstance(__value, __course_torch.Tensor)
    and __value.is_leaf
]
def __course_put_back():
    grad, anomaly, dtype, threads, rng = __course_settings
    __course_torch.set_grad_enabled(grad)
    __course_torch.set_anomaly_enabled(anomaly)
    __course_torch.set_default_dtype(dtype)
    __course_torch.set_num_threads(threads)
    __course_torch.set_rng_state(rng)
    __course_torch.set_flush_denormal(False)
    for value, data, requires_grad in __course_tensors:
        try:  # an inference tensor, a shape changed: left as it is
            with __course_torch.no_grad():
                value.copy_(data)
            value.requires_grad_(requires_grad)
            value.grad = None
        except Exception:
            pass
    for value, state, flags in __course_objects.values():
        try:
            value.load_state_dict(__course_copy.deepcopy(state))
        except Exception:
            pass
        if isinstance(flags, dict):  # an optimizer's defaults
            value.defaults.clear()
            value.defaults.update(__course_copy.deepcopy(flags))
            continue
        for module, training in zip(value.modules(), flags):
            module.training = training
"""

# Runs in the kernel: the checker cell as a cell of its own between two fingerprints, then
# its verdict and the fingerprints, as JSON (one round trip to the kernel per answer).
VERDICT = r"""
__course_before = __course_fingerprint()
__course_run = get_ipython().run_cell({source!r})
__course_after = __course_fingerprint()
__course_value = __course_run.result
import json as __course_json
print(__course_json.dumps({{
    "raised": None if __course_run.error_in_exec is None
    else f"{{type(__course_run.error_in_exec).__name__}}: {{__course_run.error_in_exec}}",
    "status": getattr(__course_value, "status", None),
    "message": getattr(__course_value, "message", repr(__course_value)),
    "before": __course_before,
    "after": __course_after,
}}))
"""


@dataclass(frozen=True)
class CellRun:
    """What one cell did: its printed text, its result's text and its error, if any."""

    stdout: str
    result: str
    error: str | None


@dataclass(frozen=True)
class Attempt:
    """One answer worked: the checker's verdict, and what the check left changed."""

    status: str | None
    message: str
    raised: str | None
    leaked: list[str]

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def exercises_in(nb: nbformat.NotebookNode, notebook: Path) -> dict[str, Exercise]:
    """The exercises of a notebook by id, as the course's registry reads them
    (``tools/exercises.py``): solution cells, checker cell and the cells between."""
    return {exercise.id: exercise for exercise in exercises_of(nb, notebook)}


class ChapterKernel:
    """The student copy of a chapter, run top to bottom in a kernel of its own."""

    def __init__(self, chapter: str, folder: Path) -> None:
        (reference,) = NOTEBOOKS.glob(f"{chapter}_*.ipynb")
        student = folder / reference.name
        build_student_notebook(reference, student)
        self.nb = nbformat.read(student, as_version=4)
        self.exercises = exercises_in(self.nb, student)
        self.manager = kernel_manager()
        self.manager.start_kernel(cwd=str(folder), env=kernel_env({"MPLBACKEND": "Agg"}))
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)
        self.outputs: dict[int, CellRun] = {}
        for index, cell in enumerate(self.nb.cells):
            if cell.cell_type != "code":
                continue
            run = self.run(cell.source)
            tagged = "raises-exception" in cell.metadata.get("tags", [])
            if run.error and not tagged:
                raise RuntimeError(f"{reference.name}, cell {index} raised: {run.error}")
            self.outputs[index] = run
        self.state_left = self.run(STATE_CHECK.format(name=reference.name)).error
        self.run(SETTINGS)
        self.run(FINGERPRINT)

    def run(self, code: str) -> CellRun:
        """Execute ``code`` as one cell; collect what it printed and displayed."""
        stdout: list[str] = []
        result: list[str] = []
        errors: list[str] = []

        def collect(message: dict[str, Any]) -> None:
            kind, content = message["msg_type"], message["content"]
            if kind == "stream" and content["name"] == "stdout":
                stdout.append(content["text"])
            elif kind in ("execute_result", "display_data"):
                result.append(content["data"].get("text/plain", ""))
            elif kind == "error":
                errors.append(f"{content['ename']}: {content['evalue']}")

        try:
            reply = self.client.execute_interactive(
                code, timeout=CELL_TIMEOUT, output_hook=collect, store_history=False
            )
        except (TimeoutError, Empty) as exc:
            raise RuntimeError(f"a cell ran longer than {CELL_TIMEOUT} s:\n{code}") from exc
        failed = reply["content"]["status"] != "ok"
        error = (errors[0] if errors else "error") if failed else None
        return CellRun("".join(stdout), "\n".join(result), error)

    def stub_verdict(self, exercise: str) -> str:
        """What the checker cell showed for the untouched stub, after Run All."""
        run = self.outputs[self.exercises[exercise].check]
        return f"{run.stdout}\n{run.result}\n{run.error or ''}"

    def attempt(self, exercise: str, answer: Answer) -> Attempt:
        """Work ``exercise`` with ``answer``; return the verdict and what leaked."""
        where = self.exercises[exercise]
        if len(answer.cells) != len(where.solutions):
            raise ValueError(
                f"{exercise} has {len(where.solutions)} solution cells; the answer "
                f"{answer.label!r} gives {len(answer.cells)}"
            )
        answers = iter(answer.cells)
        for index in sorted((*where.solutions, *where.between)):
            if index in where.between:  # the learner runs it, and reads on if it raises
                self.run(self.nb.cells[index].source)
                continue
            run = self.run(next(answers))
            if run.error:
                return Attempt(
                    None, run.error, f"(in the answer cell, not the checker) {run.error}", []
                )
        checker = self.nb.cells[where.check].source
        run = self.run(VERDICT.format(source=checker))
        if run.error:
            raise RuntimeError(f"the verdict snippet failed: {run.error}")
        verdict = json.loads(run.stdout.strip().splitlines()[-1])
        before, after = verdict["before"], verdict["after"]
        leaked = sorted(
            key for key in before.keys() | after.keys() if before.get(key) != after.get(key)
        )
        return Attempt(verdict["status"], verdict["message"], verdict["raised"], leaked)

    def restore(self, exercise: str) -> None:
        """Put torch's settings and the notebook's objects back, and run the exercise's
        student cells (and those between them) again."""
        self.run("__course_put_back()")
        where = self.exercises[exercise]
        for index in sorted((*where.solutions, *where.between)):
            self.run(self.nb.cells[index].source)

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)
