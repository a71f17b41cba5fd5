"""A sweep's table (``results.md`` + ``results.csv``) and plot, read from the trial directories.

Trials that differ only by seed are one configuration: the table gives one row per
configuration (and x value) with the mean true return over its seeds and the half-width of the
95% Student-t confidence interval (``scipy.stats.t``, n − 1 degrees of freedom, n = seeds).
A sweep whose x axis is ``seed`` (e.g. ``--axis seed=0,1,2`` alone) is reported per
configuration, and its plot (``true_return.png``) draws each configuration's learning curve over
env steps (mean over seeds with a 95% CI band, from the trials' ``metrics.csv``) and its final
evaluation (mean ± 95% CI over seeds). Other sweeps plot true return against the x axis, one
line per method with 95% CI bars over seeds."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from preflab.rundir.reporting import md_table, mean_ci
from preflab.sweep.spec import SweepSpec

CI_NOTE = "95% CI: Student t interval (scipy.stats.t), n − 1 degrees of freedom, n = seeds"
"""How the report's confidence intervals are computed (stated in the table's header)."""

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
            read = _summary(d / "summary.json")
            row["status"] = "unreadable" if read is None else "done"
            summary = read or {}
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


def _summary(path: Path) -> dict[str, Any] | None:
    """A trial's summary.json; None when it is no JSON object (the trial is reported as
    'unreadable'; a number of the wrong type in one is reported as NaN)."""
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def _method(spec: SweepSpec, row: dict[str, Any]) -> str:
    axes = spec.method_axes
    return ", ".join(f"{k}={row[k]}" for k in axes) if axes else "all"


def _key(value: Any) -> Any:
    """A hashable stand-in for an axis value, to group on: a list (e.g. net_arch = [16, 16])
    becomes a tuple, a dict a tuple of its items, recursively; other values are themselves."""
    if isinstance(value, list | tuple):
        return tuple(_key(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _key(v)) for k, v in value.items()))
    return value


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
    if x == "seed":
        return _write_seed_report(spec, d, rows, head)
    groups: dict[tuple[str, Any], list[float]] = defaultdict(list)
    for r in rows:
        if r["status"] == "done" and math.isfinite(r["true_return"]):
            groups[(_method(spec, r), _key(r[x]))].append(float(r["true_return"]))
    methods = list(dict.fromkeys(_method(spec, r) for r in rows))
    xs = list(spec.axes[x])
    agg_rows = []
    for m in methods:
        for xv in xs:
            vals = groups.get((m, _key(xv)), [])
            mean, half = mean_ci(vals) if vals else (math.nan, math.nan)
            agg_rows.append([m, xv, len(vals), mean, half])
    n_done = sum(r["status"] == "done" for r in rows)
    text = (
        f"# Sweep {spec.name}\n\n"
        f"{n_done} of {len(rows)} trials finished. Spec: `sweep.json`; one run directory per "
        "trial under `trials/`.\n\n"
        f"## True return by {x} (mean and 95% CI half-width over seeds)\n\n{CI_NOTE}.\n\n"
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
    from matplotlib.figure import Figure  # outside pyplot: the caller's backend stays as it is

    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in xs)
    pos = list(xs) if numeric else list(range(len(xs)))
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for m in methods:
        pts = [
            (p, *mean_ci(groups[(m, _key(xv))]))
            for p, xv in zip(pos, xs, strict=True)
            if groups.get((m, _key(xv)))
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


# ----- seeds-only sweeps: one row per configuration, learning curves with bands -----------------
def configuration(row: dict[str, Any], axes: list[str]) -> str:
    """A trial's configuration: its values on every axis but ``seed`` ('all' when seed is the
    only axis)."""
    return ", ".join(f"{k}={row[k]}" for k in axes if k != "seed") or "all"


def over_seeds(rows: list[dict[str, Any]], axes: list[str]) -> list[dict[str, Any]]:
    """One row per configuration (trials that differ only by seed), in first-seen order: the
    seeds with a finished run, n, the mean true return, the half-width of its 95% Student-t
    CI (nan for n < 2), min and max. Only finished trials with a finite return count."""
    done: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        done.setdefault(configuration(r, axes), [])
        if r["status"] == "done" and math.isfinite(r["true_return"]):
            done[configuration(r, axes)].append(r)
    out = []
    for config, runs in done.items():
        vals = [float(r["true_return"]) for r in runs]
        mean, half = mean_ci(vals) if vals else (math.nan, math.nan)
        out.append(
            {
                "configuration": config,
                "seeds": ",".join(str(r.get("seed", "")) for r in runs),
                "n": len(vals),
                "true_return": mean,
                "ci95": half,
                "min": min(vals, default=math.nan),
                "max": max(vals, default=math.nan),
            }
        )
    return out


def _write_seed_report(
    spec: SweepSpec, d: Path, rows: list[dict[str, Any]], head: list[str]
) -> dict[str, Path]:
    axes = list(spec.axes)
    table = over_seeds(rows, axes)
    n_done = sum(r["status"] == "done" for r in rows)
    cols = ["configuration", "seeds", "n", "true_return", "ci95", "min", "max"]
    text = (
        f"# Sweep {spec.name}\n\n"
        f"{n_done} of {len(rows)} trials finished. Spec: `sweep.json`; one run directory per "
        "trial under `trials/`.\n\n"
        "## True return per configuration, over seeds\n\n"
        f"Final evaluation return: mean over seeds ± half-width of the {CI_NOTE}.\n\n"
        + md_table(
            ["configuration", "seeds", "n", "true return (mean)", "± 95% CI", "min", "max"],
            [[t[k] for k in cols] for t in table],
        )
        + "\n## Trials\n\n"
        + md_table(head, [[r[k] for k in head] for r in rows])
    )
    (d / "results.md").write_text(text)
    with (d / "results_by_configuration.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(table)
    plot = d / "true_return.png"
    curves: dict[str, list[tuple[list[float], list[float]]]] = defaultdict(list)
    for r in rows:
        if r["status"] == "done":
            curve = _training_curve(d / "trials" / r["trial"] / "metrics.csv")
            if curve[0]:
                curves[configuration(r, axes)].append(curve)
    _plot_seed_curves(table, curves, spec.name, plot)
    return {
        "csv": d / "results.csv",
        "md": d / "results.md",
        "plot": plot,
        "by_configuration": d / "results_by_configuration.csv",
    }


def _training_curve(path: Path) -> tuple[list[float], list[float]]:
    """(env steps, training-episode return) of one trial's metrics.csv, finite values only."""
    xs: list[float] = []
    ys: list[float] = []
    try:
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                try:
                    x, y = float(row["env_steps"]), float(row["train_true_return"])
                except (KeyError, TypeError, ValueError):
                    continue
                if math.isfinite(x) and math.isfinite(y):
                    xs.append(x)
                    ys.append(y)
    except OSError:
        pass
    return xs, ys


def band(
    curves: list[tuple[list[float], list[float]]],
) -> tuple[list[float], list[float], list[float]]:
    """Steps, mean and 95% CI half-width over the curves at every step any of them has (the
    half-width is nan where fewer than two curves have a value)."""
    by_step: dict[float, list[float]] = defaultdict(list)
    for xs, ys in curves:
        for x, y in zip(xs, ys, strict=True):
            by_step[x].append(y)
    steps = sorted(by_step)
    stats = [mean_ci(by_step[x]) for x in steps]
    return steps, [m for m, _ in stats], [h for _, h in stats]


def _plot_seed_curves(
    table: list[dict[str, Any]],
    curves: dict[str, list[tuple[list[float], list[float]]]],
    title: str,
    path: Path,
) -> None:
    import numpy as np
    from matplotlib import rcParams
    from matplotlib.figure import Figure  # outside pyplot: the caller's backend stays as it is

    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    colors = rcParams["axes.prop_cycle"].by_key()["color"]
    last_step = max((x for cs in curves.values() for xs, _ in cs for x in xs), default=0.0)
    for i, t in enumerate(table):
        color = colors[i % len(colors)]
        cs = curves.get(t["configuration"], [])
        name = t["configuration"] if len(table) > 1 else "training episodes"
        if cs:
            for xs, ys in cs:  # each seed, thin
                ax.plot(xs, ys, color=color, alpha=0.3, linewidth=0.8)
            steps, mean, half = band(cs)
            ax.plot(steps, mean, color=color, label=f"{name} (mean of {len(cs)} seeds)")
            h = np.asarray(half, float)
            ok = np.isfinite(h)
            if ok.any():
                m = np.asarray(mean, float)
                ax.fill_between(
                    np.asarray(steps, float),
                    m - np.where(ok, h, 0.0),
                    m + np.where(ok, h, 0.0),
                    where=ok,
                    color=color,
                    alpha=0.2,
                    linewidth=0,
                )
        if math.isfinite(t["true_return"]):
            ci = t["ci95"]
            ax.errorbar(
                [last_step],
                [t["true_return"]],
                yerr=[ci if math.isfinite(ci) else 0.0],
                fmt="*",
                markersize=12,
                capsize=5,
                color=color,
                label=f"final evaluation: {t['true_return']:.1f}"
                + (f" ± {ci:.1f}" if math.isfinite(ci) else "")
                + f" (n={t['n']})",
            )
    ax.set_xlabel("environment steps")
    ax.set_ylabel("true return")
    ax.set_title(f"{title}: learning curves over seeds (mean, 95% CI band)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
