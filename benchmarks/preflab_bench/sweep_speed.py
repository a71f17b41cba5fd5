"""Sweep speed: the same 2 × 2 × 3 grid of short runs (selector × labels × seeds) run one after
another in one process, then on Ray (one CPU and one torch thread per trial), in one invocation.

``preflab bench sweep_speed [--steps 4000] [--num-cpus N]`` writes
``benchmarks/results/sweep_speed.md``. Target: Ray wall time ≤ 0.6 × sequential. Both modes
must give the same true returns (same seeds, same runs).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

from preflab.rundir.reporting import fmt_ci, md_table
from preflab.sweep import SweepSpec, run_sweep
from preflab_bench._report import RESULTS, header


def grid(steps: int) -> SweepSpec:
    return SweepSpec(
        name="sweep_speed",
        preset="smoke",
        base={"total_steps": steps, "steps_per_round": 500, "initial_steps": 500},
        axes={
            "selector": ["random", "disagreement"],
            "total_labels": [12, 24],
            "seed": [0, 1, 2],
        },
        x="total_labels",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="preflab bench sweep_speed", description=__doc__)
    ap.add_argument("--steps", type=int, default=4000, help="env steps per trial")
    ap.add_argument("--num-cpus", type=int, default=0, help="Ray CPUs (default: all)")
    ap.add_argument("--out", default=str(RESULTS / "sweep_speed.md"))
    args = ap.parse_args(argv)
    spec = grid(args.steps)
    cpus = args.num_cpus or os.cpu_count() or 1
    root = Path(tempfile.mkdtemp(prefix="preflab-sweep-speed-"))
    load0 = os.getloadavg()[0]
    try:
        t = time.perf_counter()
        seq = run_sweep(spec, root / "sequential", mode="sequential")
        t_seq = time.perf_counter() - t
        print(f"sequential: {t_seq:.1f} s", flush=True)
        t = time.perf_counter()
        ray = run_sweep(spec, root / "ray", mode="ray", num_cpus=cpus)
        t_ray = time.perf_counter() - t
        print(f"ray ({cpus} CPUs): {t_ray:.1f} s", flush=True)
        load1 = os.getloadavg()[0]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    same = all(
        math.isclose(a.summary.get("true_return", math.nan), b.summary.get("true_return", math.nan))
        for a, b in zip(seq, ray, strict=True)
    )
    failed = sum(o.status == "failed" for o in (*seq, *ray))
    ratio = t_ray / t_seq
    rows = [
        [
            "sequential (one process)",
            len(seq),
            f"{t_seq:.1f}",
            fmt_ci([o.wall_s for o in seq]),
            fmt_ci([o.cpu_s for o in seq]),
            "1.00",
        ],
        [
            f"Ray, {cpus} CPUs",
            len(ray),
            f"{t_ray:.1f}",
            fmt_ci([o.wall_s for o in ray]),
            fmt_ci([o.cpu_s for o in ray]),
            f"{ratio:.2f}",
        ],
    ]
    text = header(
        "Sweep speed: Ray vs one after another",
        "sweep_speed",
        argv,
        f"2 selectors × 2 label budgets × 3 seeds = {len(seq)} PPO runs on Pendulum-v1 "
        f"(smoke preset, {args.steps} env steps each); 2 cores shared with other jobs",
    )
    text += md_table(
        [
            "mode",
            "trials",
            "wall s",
            "per-trial wall s (mean ± 95% CI)",
            "per-trial CPU s",
            "ratio",
        ],
        rows,
    )
    verdict = "met" if ratio <= 0.6 else "NOT met"
    text += (
        f"\nRay / sequential wall time: **{ratio:.2f}** (target ≤ 0.6: {verdict}). "
        f"Same true returns in both modes: {'yes' if same else 'NO'}; failed trials: {failed}. "
        "The sequential mode imports everything once; Ray's time includes starting Ray "
        "(ray.init) and importing torch/SB3 in each worker. Load average (1 min) of the "
        f"machine: {load0:.1f} before, {load1:.1f} after ({cpus} cores): when other jobs keep "
        "the cores busy, a trial's wall time exceeds its CPU time and parallel trials gain "
        "little.\n"
    )
    Path(args.out).write_text(text)
    print(text)
    return 0 if failed == 0 else 1
