"""Training curves of finished runs, read back from their run directories: one column of each
run's ``metrics.csv`` against env steps, the IQM across seeds at every step with the protocol's
stratified bootstrap interval (:func:`preflab_bench._protocol.iqm_ci`), the IQM at fractions of
the step budget, and a PNG with one panel per report section.

A bench's report calls it with the runs its run log holds (finished runs); this module never
looks for run directories of its own.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from preflab_bench._protocol import Interval, iqm_ci


def read_column(path: Path, column: str, *, x: str = "env_steps") -> dict[float, float] | None:
    """``x`` → ``column`` of a run's ``metrics.csv`` (finite values only; a step written twice
    keeps its last row); None when the file is missing or unreadable."""
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return None
    out: dict[float, float] = {}
    for row in rows:
        try:
            s, v = float(row[x]), float(row[column])
        except (KeyError, TypeError, ValueError):
            continue
        if math.isfinite(s) and math.isfinite(v):
            out[s] = v
    return out


@dataclass(frozen=True, kw_only=True)
class Curve:
    """The IQM across runs of one arm at every step all its runs have a value at."""

    steps: np.ndarray
    """Env steps, increasing, shape (n,)."""
    points: tuple[Interval, ...]
    """IQM with its stratified bootstrap interval at each step."""
    n_runs: int
    """Runs (seeds) behind every point."""


def iqm_curve(
    runs: Sequence[Mapping[float, float]], *, confidence: float = 0.95, reps: int = 2000
) -> Curve:
    """The IQM across ``runs`` (one step → value map per seed) at every step all of them have,
    each with its stratified bootstrap interval (``confidence``, ``reps`` resamples; seeded,
    so the same runs give the same band)."""
    common = set.intersection(*(set(r) for r in runs)) if runs else set()
    steps = sorted(common)
    if not steps:
        return Curve(steps=np.zeros(0), points=(), n_runs=len(runs))
    scores = {f"{s!r}": np.array([[r[s]] for r in runs]) for s in steps}
    summary = iqm_ci(scores, confidence=confidence, reps=reps)
    return Curve(
        steps=np.asarray(steps, dtype=float),
        points=tuple(summary[f"{s!r}"].iqm for s in steps),
        n_runs=len(runs),
    )


def at_fractions(
    curve: Curve, total: float, fractions: Sequence[float] = (0.25, 0.5, 0.75, 1.0)
) -> list[tuple[float, Interval] | None]:
    """Per fraction f of the ``total`` steps: (step, IQM interval) at the curve's last step at
    or below f × total, or None when the curve has no step that early."""
    out: list[tuple[float, Interval] | None] = []
    for f in fractions:
        idx = np.flatnonzero(curve.steps <= f * total)
        out.append((float(curve.steps[idx[-1]]), curve.points[idx[-1]]) if idx.size else None)
    return out


@dataclass(frozen=True, kw_only=True)
class Panel:
    """One report section's figure row: the return curves, and optionally a second quantity per
    feedback round."""

    title: str
    """The section (env · plan entry)."""
    curves: Mapping[str, Curve]
    """Arm → its return curve."""
    ylabel: str
    """What the return axis shows."""
    reference: float | None = None
    """A reference return drawn as a dashed line (e.g. the true reward's), if any."""
    reference_label: str = ""
    """Its legend entry."""
    per_round: Mapping[str, Sequence[float]] = field(default_factory=dict)
    """Arm → a value per feedback round (e.g. IQM label error); empty: no second panel."""
    per_round_label: str = ""
    """What the per-round axis shows."""


def plot(panels: Sequence[Panel], path: Path) -> Path | None:
    """Draw ``panels`` (one figure row each: the curves with their bands, and the per-round
    values beside them when a panel has any) into the PNG ``path``; None, and no file, when no
    panel has a point."""
    from matplotlib.figure import Figure  # Agg canvas when saved as PNG; no pyplot state

    drawn = [p for p in panels if any(c.points for c in p.curves.values())]
    if not drawn:
        return None
    cols = 2 if any(p.per_round for p in drawn) else 1
    fig = Figure(figsize=(6.0 * cols, 3.8 * len(drawn)))
    for i, p in enumerate(drawn):
        ax = fig.add_subplot(len(drawn), cols, cols * i + 1)
        for arm, c in p.curves.items():
            if not c.points:
                continue
            (line,) = ax.plot(c.steps, [v.point for v in c.points], label=f"{arm} (n={c.n_runs})")
            ax.fill_between(
                c.steps,
                [v.lo for v in c.points],
                [v.hi for v in c.points],
                color=line.get_color(),
                alpha=0.2,
                linewidth=0,
            )
        if p.reference is not None:
            ax.axhline(p.reference, linestyle="--", color="k", label=p.reference_label)
        ax.set_xlabel("env steps")
        ax.set_ylabel(p.ylabel, fontsize=8)
        ax.set_title(p.title, fontsize=9)
        ax.legend(fontsize=7)
        if cols == 2 and p.per_round:
            ax2 = fig.add_subplot(len(drawn), cols, cols * i + 2)
            for arm, ys in p.per_round.items():
                ax2.plot(np.arange(1, len(ys) + 1), ys, label=arm)
            ax2.set_xlabel("feedback round")
            ax2.set_ylabel(p.per_round_label, fontsize=8)
            ax2.set_title(p.title, fontsize=9)
            ax2.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path
