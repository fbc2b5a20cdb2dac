"""tools.bench: every teaching Function is measured; the report says which targets are met.

The measurements run here at tiny sizes only; `make bench` runs them for real.
"""

from __future__ import annotations

import pytest
import torch

from autograd_helpers import functions
from tools import bench

FUNCTION_CLASSES = [
    name
    for name in functions.__all__
    if isinstance(getattr(functions, name), type)
    and issubclass(getattr(functions, name), torch.autograd.Function)
]


def test_every_teaching_function_has_a_bench_case():
    assert sorted(case.name for case in bench.CASES) == sorted(FUNCTION_CLASSES)


def test_function_rows_have_every_figure_and_match_the_builtin():
    rows = bench.measure_functions((64,), seconds=0.01)
    assert len(rows) == len(bench.CASES)
    for row in rows:
        keys = {"name", "numel", "median_s", "builtin_median_s", "ratio_vs_builtin"}
        assert keys | {"saved_bytes", "builtin_saved_bytes"} <= set(row)
        assert row["median_s"] > 0 and row["builtin_median_s"] > 0
    sigmoid = next(r for r in rows if r["name"] == "Sigmoid")
    assert sigmoid["saved_bytes"] < sigmoid["builtin_saved_bytes"]  # saves its output only


@pytest.mark.parametrize("case", bench.CASES, ids=lambda c: c.name)
def test_each_case_computes_the_same_values_as_its_builtin(case):
    inputs = case.make_inputs(256)
    torch.testing.assert_close(case.mine(*inputs), case.builtin(*inputs))
    if case.fused is not None:
        torch.testing.assert_close(case.mine(*inputs), case.fused(*inputs))


def test_jacobian_rows_cover_every_method_and_size():
    rows = bench.measure_jacobians((4, 8), seconds=0.01)
    assert {(r["method"], r["n"]) for r in rows} == {
        (method, n) for method in {r["method"] for r in rows} for n in (4, 8)
    }
    assert len({r["method"] for r in rows}) == 4


def test_import_probe_reports_lazy_heavy_modules():
    figures = bench.measure_import(repeats=1)
    assert figures["heavy_modules_loaded_lazily"] is True
    assert figures["import_overhead_s"] >= 0


def _results(ratio: float, over_floor: float) -> dict:
    return {
        "machine": {"date": "d", "python": "3.11", "torch": "2.13.0", "cpus": 2, "threads": 1},
        "notebooks": [{"name": "00.ipynb", "wall_s": 5.0, "peak_rss_mb": 300.0}],
        "floor_s": 2.0,
        "floor_peak_rss_mb": 250.0,
        "course_over_floor": over_floor,
        "import_overhead_s": 0.01,
        "functions": [
            {
                "name": "Exp",
                "numel": 1_000_000,
                "median_s": 0.002,
                "builtin_median_s": 0.001,
                "ratio_vs_builtin": ratio,
                "saved_bytes": 4,
                "builtin_saved_bytes": 4,
            }
        ],
        "jacobian": [{"method": "torch.func.jacrev", "n": 16, "median_s": 0.001}],
        "make_test_s": 120.0,
    }


def test_targets_are_reported_as_met_or_not():
    good = _results(ratio=1.2, over_floor=2.0)
    good.update(bench._targets(good))
    assert all(good["met"].values())
    bad = _results(ratio=2.0, over_floor=4.0)
    bad.update(bench._targets(bad))
    assert bad["met"] == {
        "course_over_floor": False,
        "import_overhead_s": True,
        "ratio_vs_builtin_at_1e6": False,
        "make_test_s": True,
    }
    assert bad["worst_function_at_1e6"] == "Exp"
    text = bench.to_markdown(bad)
    assert "| course / (floor × notebooks) | 4.0 | < 3 ✗ |" in text
    assert "| `make test`, installed | 120.0 s | < 300 s ✓ |" in text
    assert "| 00.ipynb | 5.0 s | 300.0 MB |" in text
    bad["make_test_passed"] = False
    bad.update(bench._targets(bad))
    assert bad["met"]["make_test_s"] is False
    assert "| `make test`, installed | 120.0 s (FAILED) | < 300 s ✗ |" in bench.to_markdown(bad)
