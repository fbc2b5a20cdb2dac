"""``make bench``: measure how fast and lean the course is; write bench/results.{json,md}.

Figures, not assertions: the targets below are reported as met or not, never tested.

1. Notebooks: wall time of each, executed in a fresh kernel (start-up included), and the
   kernel's peak memory; the *floor* is a fresh kernel that only imports torch and the
   helpers. ``course_over_floor`` = total / (floor × number of notebooks).
2. Import cost of ``autograd_helpers`` on top of ``torch`` (median of fresh processes).
3. Every teaching Function, forward + backward, against the built-in composition it
   replaces (and the fused built-in, where one exists), at 1e3, 1e5 and 1e6 elements, with
   the bytes each saves for backward.
4. Jacobian strategies: a row loop, ``vectorize=True``, ``torch.func.jacrev``, ``jacfwd``.
5. ``make test``'s own duration (skip with ``--skip-tests``).

Timings are single-threaded (as the notebooks are) with ``torch.utils.benchmark`` medians.
Usage: ``python -m tools.bench [--out bench] [--skip-tests] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import torch
import torch.nn.functional as F
from torch.utils import benchmark

from autograd_helpers import functions as fns
from autograd_helpers.memory import saved_tensor_bytes
from tools.course import REPO, reference_notebooks
from tools.kernels import execute_notebook

TARGETS = {
    "course_over_floor": 3.0,
    "import_overhead_s": 0.3,
    "ratio_vs_builtin_at_1e6": 1.5,
    "make_test_s": 300.0,
}
PEAK_RSS_CELL = "import resource\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
FLOOR_CELL = "import torch\nimport autograd_helpers as ah\nah.setup_notebook()"


# --- 1. notebooks -------------------------------------------------------------------------------


def _run_with_peak_rss(path: Path) -> tuple[float, float]:
    """Execute a copy of ``path`` in a fresh kernel: (wall seconds, peak RSS in MB)."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PEAK_RSS_CELL))
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / path.name
        nbformat.write(nb, copy)
        start = time.perf_counter()
        executed = execute_notebook(copy)
        wall = time.perf_counter() - start
    kilobytes = int("".join(o.get("text", "") for o in executed.cells[-1].outputs).strip())
    return wall, kilobytes / 1024  # ru_maxrss is in KiB on Linux


def measure_notebooks(paths: list[Path]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        floor = Path(folder) / "floor.ipynb"
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(FLOOR_CELL)]
        nbformat.write(nb, floor)
        floor_s, floor_mb = _run_with_peak_rss(floor)
    rows = []
    for path in paths:
        wall, peak = _run_with_peak_rss(path)
        rows.append({"name": path.name, "wall_s": round(wall, 2), "peak_rss_mb": round(peak, 1)})
        print(f"  {path.name}: {wall:.1f} s, {peak:.0f} MB", flush=True)
    total = sum(r["wall_s"] for r in rows)
    return {
        "notebooks": rows,
        "floor_s": round(floor_s, 2),
        "floor_peak_rss_mb": round(floor_mb, 1),
        "course_over_floor": round(total / (floor_s * len(rows)), 2),
    }


# --- 2. import cost ------------------------------------------------------------------------------

IMPORT_PROBE = """
import sys, time
start = time.perf_counter(); import torch; middle = time.perf_counter()
import autograd_helpers; end = time.perf_counter()
print(middle - start, end - middle, 'matplotlib' in sys.modules or 'ipywidgets' in sys.modules)
"""


def measure_import(repeats: int = 7) -> dict[str, Any]:
    torch_s, helpers_s, eager = [], [], False
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True, check=True
        ).stdout.split()
        torch_s.append(float(out[0]))
        helpers_s.append(float(out[1]))
        eager = eager or out[2] == "True"
    return {
        "import_torch_s": round(statistics.median(torch_s), 3),
        "import_overhead_s": round(statistics.median(helpers_s), 4),
        "heavy_modules_loaded_lazily": not eager,
    }


# --- 3. teaching Functions ----------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A teaching Function, the built-ins it replaces, and inputs of about ``numel`` elements."""

    name: str
    mine: Callable[..., torch.Tensor]
    builtin: Callable[..., torch.Tensor]  # the composition of built-ins it is equivalent to
    make_inputs: Callable[[int], tuple[torch.Tensor, ...]]
    fused: Callable[..., torch.Tensor] | None = None  # one built-in doing it all, if any


def _vector(numel: int) -> tuple[torch.Tensor, ...]:
    return (torch.randn(numel),)


def _batch_of_64(numel: int) -> tuple[torch.Tensor, ...]:
    return torch.randn(max(1, numel // 64), 64), torch.randn(64, 64), torch.randn(64)


def _channels(numel: int) -> tuple[torch.Tensor, ...]:
    return (torch.randn(1, 8, max(3, numel // 8)),)


CASES = [
    Case("Exp", fns.exp, torch.exp, _vector),
    Case("Sigmoid", fns.sigmoid, lambda x: 1 / (1 + torch.exp(-x)), _vector, torch.sigmoid),
    Case("ReLU", fns.relu, lambda x: x.clamp(min=0), _vector, torch.relu),
    Case("MulConstant", lambda x: fns.mul_constant(x, 2.5), lambda x: x * 2.5, _vector),
    Case("LinearFunction", fns.linear, lambda x, w, b: x @ w.T + b, _batch_of_64, F.linear),
    Case(
        "ScaleGrad",
        lambda x: fns.scale_grad(x, -1.0),
        lambda x: x * -1.0 + (x * 2.0).detach(),  # value x, gradient -1: the detach trick
        _vector,
    ),
    Case(
        "SquareAndMaxPool1d",
        lambda x: fns.square_and_max_pool1d(x, 3, stride=2),
        lambda x: F.max_pool1d(x * x, 3, stride=2),
        _channels,
    ),
]


def _forward_backward_median(
    fn: Callable[..., torch.Tensor], inputs: tuple, seconds: float
) -> float:
    leaves = [t.clone().requires_grad_() for t in inputs]
    grad_output = torch.randn_like(fn(*leaves))

    def step() -> None:
        fn(*leaves).backward(grad_output)

    timer = benchmark.Timer("step()", globals={"step": step})
    return float(timer.blocked_autorange(min_run_time=seconds).median)


def measure_functions(sizes: tuple[int, ...], seconds: float) -> list[dict[str, Any]]:
    rows = []
    for case in CASES:
        for size in sizes:
            inputs = case.make_inputs(size)
            leaves = [t.clone().requires_grad_() for t in inputs]
            mine = _forward_backward_median(case.mine, inputs, seconds)
            builtin = _forward_backward_median(case.builtin, inputs, seconds)
            row = {
                "name": case.name,
                "numel": inputs[0].numel(),
                "median_s": mine,
                "builtin_median_s": builtin,
                "ratio_vs_builtin": round(mine / builtin, 2),
                "saved_bytes": saved_tensor_bytes(case.mine, *leaves),
                "builtin_saved_bytes": saved_tensor_bytes(case.builtin, *leaves),
            }
            if case.fused is not None:
                fused = _forward_backward_median(case.fused, inputs, seconds)
                row["fused_builtin_median_s"] = fused
                row["ratio_vs_fused"] = round(mine / fused, 2)
            rows.append(row)
            print(f"  {case.name} @ {row['numel']:.0e}: x{row['ratio_vs_builtin']}", flush=True)
    return rows


# --- 4. Jacobian strategies --------------------------------------------------------------------


def measure_jacobians(sizes: tuple[int, ...], seconds: float) -> list[dict[str, Any]]:
    jacobian = torch.autograd.functional.jacobian
    rows = []
    for n in sizes:
        gen = torch.Generator().manual_seed(0)
        weight, x = torch.randn(n, n, generator=gen) / n**0.5, torch.randn(n, generator=gen)

        def f(v: torch.Tensor, weight: torch.Tensor = weight) -> torch.Tensor:
            return torch.tanh(weight @ v)

        methods: dict[str, Callable[..., Any]] = {
            "autograd.functional.jacobian (row loop)": lambda g, v: jacobian(g, v),
            "autograd.functional.jacobian (vectorize=True)": lambda g, v: jacobian(
                g, v, vectorize=True
            ),
            "torch.func.jacrev": lambda g, v: torch.func.jacrev(g)(v),
            "torch.func.jacfwd": lambda g, v: torch.func.jacfwd(g)(v),
        }
        expected = torch.func.jacrev(f)(x)
        for method, run in methods.items():
            # the same Jacobian from every method, or comparing their times means nothing
            torch.testing.assert_close(run(f, x), expected)
            timer = benchmark.Timer("run(f, x)", globals={"run": run, "f": f, "x": x})
            median = float(timer.blocked_autorange(min_run_time=seconds).median)
            rows.append({"method": method, "n": n, "median_s": median})
    return rows


# --- 5. make test ---------------------------------------------------------------------------------


def measure_tests() -> dict[str, Any]:
    start = time.perf_counter()
    run = subprocess.run(["make", "test"], cwd=REPO, capture_output=True, text=True)
    seconds = round(time.perf_counter() - start, 1)
    if run.returncode != 0:  # say so and keep the other figures, rather than crash
        print("make test FAILED; its last lines:\n" + "\n".join(run.stdout.splitlines()[-30:]))
    return {"make_test_s": seconds, "make_test_passed": run.returncode == 0}


# --- report --------------------------------------------------------------------------------


def _targets(results: dict[str, Any]) -> dict[str, Any]:
    at_1e6 = [r for r in results["functions"] if r["numel"] >= 900_000]
    worst = max(at_1e6, key=lambda r: r["ratio_vs_builtin"]) if at_1e6 else None
    worst_ratio = 0.0 if worst is None else worst["ratio_vs_builtin"]
    met = {
        "course_over_floor": results["course_over_floor"] < TARGETS["course_over_floor"],
        "import_overhead_s": results["import_overhead_s"] < TARGETS["import_overhead_s"],
        "ratio_vs_builtin_at_1e6": worst_ratio <= TARGETS["ratio_vs_builtin_at_1e6"],
    }
    if "make_test_s" in results:
        passed = bool(results.get("make_test_passed", True))
        met["make_test_s"] = passed and results["make_test_s"] < TARGETS["make_test_s"]
    return {
        "targets": TARGETS,
        "met": met,
        "worst_function_at_1e6": None if worst is None else worst["name"],
        "worst_ratio_at_1e6": worst_ratio,
    }


def _seconds(value: float) -> str:
    return f"{value * 1e3:.3f} ms" if value < 1 else f"{value:.2f} s"


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(title: str, header: tuple[str, ...], rows: list[str]) -> list[str]:
    return ["", f"## {title}", "", _row(*header), _row(*["---"] * len(header)), *rows]


def _headline(results: dict[str, Any]) -> list[str]:
    met = results["met"]

    def target(text: str, key: str) -> str:
        return f"{text} {'✓' if met.get(key) else '✗'}"

    rows = [
        _row(
            "course / (floor × notebooks)",
            results["course_over_floor"],
            target("< 3", "course_over_floor"),
        ),
        _row(
            "`import autograd_helpers` on top of torch",
            _seconds(results["import_overhead_s"]),
            target("< 0.3 s", "import_overhead_s"),
        ),
        _row(
            "worst Function / built-in composition at 1e6",
            f"{results['worst_ratio_at_1e6']}× ({results['worst_function_at_1e6']})",
            target("≤ 1.5×", "ratio_vs_builtin_at_1e6"),
        ),
    ]
    if "make_test_s" in results:
        rows.append(
            _row(
                "`make test`, installed",
                f"{results['make_test_s']} s"
                + ("" if results.get("make_test_passed", True) else " (FAILED)"),
                target("< 300 s", "make_test_s"),
            )
        )
    return rows


FUNCTION_HEADER = (
    "Function",
    "elements",
    "ours",
    "built-in composition",
    "ratio",
    "fused built-in",
    "saved bytes (ours / composition)",
)


def _function_rows(results: dict[str, Any]) -> list[str]:
    rows = []
    for r in results["functions"]:
        fused = "–"
        if "ratio_vs_fused" in r:
            fused = f"{_seconds(r['fused_builtin_median_s'])} (×{r['ratio_vs_fused']})"
        rows.append(
            _row(
                r["name"],
                f"{r['numel']:,}",
                _seconds(r["median_s"]),
                _seconds(r["builtin_median_s"]),
                f"×{r['ratio_vs_builtin']}",
                fused,
                f"{r['saved_bytes']:,} / {r['builtin_saved_bytes']:,}",
            )
        )
    return rows


NOTES = """\
How to read the Function table: a backward written as several elementwise operations
allocates a temporary for each. At a million elements that allocation, not the arithmetic,
dominates, and a fused built-in does the same work in one kernel. On a virtual machine whose
first-touch page faults are expensive (the course's CI machine is one), allocation-heavy code
stalls well beyond its CPU time. Backward formulas write in place only into tensors they
created from `grad_output`: in place into anything else breaks vmap (batched gradients,
`jacrev`, `hessian`).
"""


def to_markdown(results: dict[str, Any]) -> str:
    machine = results["machine"]
    notebooks = [
        _row(r["name"], f"{r['wall_s']} s", f"{r['peak_rss_mb']} MB") for r in results["notebooks"]
    ]
    floor = f"{results['floor_s']} s", f"{results['floor_peak_rss_mb']} MB"
    notebooks.append(_row("*floor: import torch + autograd_helpers*", *floor))
    jacobians = [_row(r["method"], r["n"], _seconds(r["median_s"])) for r in results["jacobian"]]
    lines = [
        "# Benchmark results",
        "",
        f"{machine['date']} · Python {machine['python']} · torch {machine['torch']} · "
        f"{machine['cpus']} CPUs · {machine['threads']} torch thread",
        *_table("Headline figures", ("figure", "value", "target"), _headline(results)),
        *_table("Notebooks (each in a fresh kernel)", ("notebook", "wall", "peak RSS"), notebooks),
        *_table(
            "Teaching Functions, forward + backward (median)",
            FUNCTION_HEADER,
            _function_rows(results),
        ),
        *_table("Jacobian strategies (median)", ("method", "n", "time"), jacobians),
        "",
        NOTES,
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument("--skip-tests", action="store_true", help="do not time `make test`")
    parser.add_argument("--quick", action="store_true", help="short timings (for checking)")
    args = parser.parse_args(argv)
    seconds = 0.05 if args.quick else 0.3
    torch.set_num_threads(1)
    results: dict[str, Any] = {
        "machine": {
            "date": time.strftime("%Y-%m-%d"),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpus": os.cpu_count(),
            "threads": torch.get_num_threads(),
        }
    }
    print("notebooks…", flush=True)
    results.update(measure_notebooks(reference_notebooks()))
    print("import cost…", flush=True)
    results.update(measure_import(3 if args.quick else 7))
    print("teaching Functions…", flush=True)
    results["functions"] = measure_functions((1_000, 100_000, 1_000_000), seconds)
    print("Jacobians…", flush=True)
    results["jacobian"] = measure_jacobians((16, 64, 256), seconds)
    if not args.skip_tests:
        print("make test…", flush=True)
        results.update(measure_tests())
    results.update(_targets(results))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "results.md").write_text(to_markdown(results))
    print(f"wrote {args.out / 'results.json'} and {args.out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
