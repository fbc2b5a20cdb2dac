"""``python -m tools.bench [--out bench] [--skip-tests] [--skip-workshop] [--quick]``: the bench."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

from tools.bench import margins, measure
from tools.bench.containment import measure_containment
from tools.bench.report import to_markdown
from tools.bench.results import MILLION, Machine, Results
from tools.bench.targets import judge
from tools.bench.workshop import measure_workshop, workshop_unavailable
from tools.course import REPO, reference_notebooks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument("--skip-tests", action="store_true", help="do not time `make test`")
    parser.add_argument(
        "--skip-workshop", action="store_true", help="do not run learners through a real hub"
    )
    parser.add_argument("--quick", action="store_true", help="short timings (for checking)")
    args = parser.parse_args(argv)
    seconds = 0.05 if args.quick else 0.3
    torch.set_num_threads(1)
    machine = Machine(
        date=time.strftime("%Y-%m-%d"),
        python=platform.python_version(),
        torch=torch.__version__,
        cpus=os.cpu_count(),
        threads=torch.get_num_threads(),
    )
    results = Results(machine)
    print("notebooks…", flush=True)
    results.notebooks = measure.measure_notebooks(
        reference_notebooks(), *((1, 1) if args.quick else (2, 3))
    )
    print("import cost…", flush=True)
    results.imports = measure.measure_import(3 if args.quick else 15)
    print("teaching Functions…", flush=True)
    # nine interleaved rounds: with five, the worst ratio at 10⁶ moved by a fifth between runs
    results.functions = measure.measure_functions(
        (1_000, 100_000, MILLION), seconds, rounds=5 if args.quick else 9
    )
    print("containment in a check_function call…", flush=True)
    chapter_00 = next(p for p in reference_notebooks() if p.name.startswith("00"))
    results.containment = measure_containment(chapter_00, 5 if args.quick else 20)
    print("gradcheck explorer…", flush=True)
    results.widget_update_s = measure.measure_widget()
    print("Jacobians…", flush=True)
    results.jacobians = measure.measure_jacobians((16, 64, 256), seconds)
    print("chapter 06's timing exercises, with 8 busy processes…", flush=True)
    results.margins = margins.measure_margins(runs=2 if args.quick else 10, processes=8)
    if not args.skip_workshop:
        reason = workshop_unavailable()
        if reason is None:
            print("workshop: five learners through a hub…", flush=True)
            results.workshop = measure_workshop(2 if args.quick else 5)
        else:
            print(f"workshop skipped: {reason}", flush=True)
    if not args.skip_tests:
        print("make test…", flush=True)
        results.tests = measure.measure_tests()
    results.met = judge(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results.to_json(), indent=1) + "\n")
    (args.out / "results.md").write_text(to_markdown(results))
    print(f"wrote {args.out / 'results.json'} and {args.out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
