"""A sweep's table (``results.md`` + ``results.csv``) and plot (true return vs the x axis, one
line per method with 95% confidence intervals over seeds), read from the trial directories."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from preflab.reporting import md_table, mean_ci
from preflab.sweep.spec import SweepSpec

METRICS = (
    "true_return",
    "true_return_std",
    "n_labels",
    "reward_accuracy",
    "reward_corr",
    "env_steps",
    "wall_s",
)


def trial_rows(spec: SweepSpec, sweep_dir: Path) -> list[dict[str, Any]]:
    """One row per trial: axis values, status and the numbers of its summary.json."""
    rows = []
    for t in spec.trials():
        d = sweep_dir / "trials" / t.name
        row: dict[str, Any] = {"trial": t.name, **t.values}
        summary: dict[str, Any] = {}
        if (d / "summary.json").is_file():
            try:
                summary = json.loads((d / "summary.json").read_text())
                row["status"] = "done"
            except (OSError, ValueError):
                row["status"] = "unreadable"
        elif (d / "error.txt").is_file():
            row["status"] = "failed"
        elif d.exists():
            row["status"] = "unfinished"
        else:
            row["status"] = "not started"
        for m in METRICS:
            v = summary.get(m)
            row[m] = v if isinstance(v, int | float) and v is not None else math.nan
        rows.append(row)
    return rows


def _method(spec: SweepSpec, row: dict[str, Any]) -> str:
    axes = spec.method_axes
    return ", ".join(f"{k}={row[k]}" for k in axes) if axes else "all"


def write_report(spec: SweepSpec, sweep_dir: str | Path) -> dict[str, Path]:
    """Write results.csv, results.md and true_return.png in ``sweep_dir``; returns the paths."""
    d = Path(sweep_dir)
    rows = trial_rows(spec, d)
    head = ["trial", *spec.axes, "status", *METRICS]
    with (d / "results.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=head)
        w.writeheader()
        for r in rows:
            w.writerow({k: r[k] for k in head})
    x = spec.x_axis
    groups: dict[tuple[str, Any], list[float]] = defaultdict(list)
    for r in rows:
        if r["status"] == "done" and math.isfinite(r["true_return"]):
            groups[(_method(spec, r), r[x])].append(float(r["true_return"]))
    methods = list(dict.fromkeys(_method(spec, r) for r in rows))
    xs = list(spec.axes[x])
    agg_rows = []
    for m in methods:
        for xv in xs:
            vals = groups.get((m, xv), [])
            mean, half = mean_ci(vals) if vals else (math.nan, math.nan)
            agg_rows.append([m, xv, len(vals), mean, half])
    n_done = sum(r["status"] == "done" for r in rows)
    text = (
        f"# Sweep {spec.name}\n\n"
        f"{n_done} of {len(rows)} trials finished. Spec: `sweep.json`; one run directory per "
        "trial under `trials/`.\n\n"
        f"## True return by {x} (mean and 95% CI half-width over seeds)\n\n"
        + md_table(["method", x, "n", "true return", "± 95% CI"], agg_rows)
        + "\n## Trials\n\n"
        + md_table(head, [[r[k] for k in head] for r in rows])
    )
    (d / "results.md").write_text(text)
    plot = d / "true_return.png"
    _plot(methods, xs, groups, x, spec.name, plot)
    return {"csv": d / "results.csv", "md": d / "results.md", "plot": plot}


def _plot(
    methods: list[str],
    xs: list[Any],
    groups: dict[tuple[str, Any], list[float]],
    x: str,
    title: str,
    path: Path,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in xs)
    pos = list(xs) if numeric else list(range(len(xs)))
    fig, ax = plt.subplots(figsize=(6, 4))
    for m in methods:
        pts = [
            (p, *mean_ci(groups[(m, xv)]))
            for p, xv in zip(pos, xs, strict=True)
            if groups.get((m, xv))
        ]
        if not pts:
            continue
        px, mean, half = zip(*pts, strict=True)
        err = [h if math.isfinite(h) else 0.0 for h in half]
        ax.errorbar(px, mean, yerr=err, marker="o", capsize=3, label=m)
    if not numeric:
        ax.set_xticks(pos, [str(v) for v in xs])
    elif x == "total_labels" and len(xs) > 2 and min(xs) > 0:
        ax.set_xscale("log", base=2)
        ax.set_xticks(pos, [str(v) for v in xs])
    ax.set_xlabel(x)
    ax.set_ylabel("true return (mean, 95% CI over seeds)")
    ax.set_title(title)
    if len(methods) > 1 or methods != ["all"]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
