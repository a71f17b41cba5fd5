"""The reporting protocol for benchmark results (issue #27): interquartile means with stratified
bootstrap confidence intervals, probability of improvement and performance profiles (Agarwal
et al. 2021, "Deep RL at the edge of the statistical precipice", through its ``rliable``
package), ratios of IQMs between arms, a Bonferroni correction for extending an experiment
after looking, and the three verdict words.

Scores are arrays of shape ``(n_runs, n_tasks)``: one row per run (seed), one column per task
(env). rliable (and its arch / seaborn dependencies) is imported inside the functions, so
importing :mod:`preflab_bench` stays light.

rliable 1.2.0 draws its bootstrap indices from NumPy's global generator (``np.random.choice``)
and ignores its ``random_state`` argument. To make every interval here reproducible, each call
seeds the global generator with ``seed`` and restores its previous state afterwards
(:func:`_global_numpy_seed`); nothing else in PrefLab uses the global generator.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab_bench._plan import Direction as Direction  # re-exported: the protocol's words
from preflab_bench._plan import Plan
from preflab_bench._plan import Verdict as Verdict
from preflab_bench._plan import verdict as verdict


@dataclass(frozen=True, kw_only=True)
class Interval:
    """A point estimate with a two-sided confidence interval."""

    point: float
    """The statistic on the data as observed."""
    lo: float
    """Lower end of the interval."""
    hi: float
    """Upper end of the interval."""
    confidence: float
    """Two-sided coverage the interval was computed for, e.g. 0.95."""


@dataclass(frozen=True, kw_only=True)
class ArmSummary:
    """One arm's scores summarised under the protocol."""

    iqm: Interval
    """Interquartile mean over all runs and tasks, with its stratified bootstrap interval."""
    mean: float
    """Mean of the per-task means (rliable's ``aggregate_mean``)."""
    mean_half_width: float
    """Half-width of the Student-t interval of the mean at the same confidence, over the runs'
    task-averages (nan with one run)."""
    n_runs: int
    """Runs (rows of the score array)."""
    n_tasks: int
    """Tasks (columns of the score array)."""


@dataclass(frozen=True, kw_only=True)
class Profile:
    """A performance profile: the fraction of runs scoring above each threshold."""

    taus: np.ndarray
    """The thresholds, shape (n_taus,)."""
    fractions: np.ndarray
    """Fraction of (run, task) scores above each threshold, shape (n_taus,)."""
    lo: np.ndarray
    """Lower ends of the stratified bootstrap intervals, shape (n_taus,)."""
    hi: np.ndarray
    """Upper ends, shape (n_taus,)."""
    confidence: float
    """Two-sided coverage of the intervals."""


@contextmanager
def _global_numpy_seed(seed: int) -> Iterator[None]:
    """Seed NumPy's global generator for one rliable call, then restore its state (see the
    module docstring: rliable samples from it and ignores ``random_state``)."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ConfigError(
            f"confidence must lie strictly between 0 and 1, got {confidence}; pass e.g. 0.95"
        )


def _scores(name: str, x: np.ndarray | Sequence[float] | Sequence[Sequence[float]]) -> np.ndarray:
    """``x`` as a float array (n_runs, n_tasks); a 1-D array is one task."""
    a = np.asarray(x, dtype=float)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise DataError(
            f"scores of {name!r} must have shape (n_runs, n_tasks) with at least one of each, "
            f"got shape {a.shape}; stack runs as rows and tasks as columns"
        )
    if not np.all(np.isfinite(a)):
        raise DataError(
            f"scores of {name!r} contain nan or inf; drop or repair those runs before reporting"
        )
    return a


@functools.cache
def _rliable() -> tuple[Any, Any]:
    """rliable's ``library`` and ``metrics`` modules, imported on first use (they pull in arch,
    pandas and seaborn)."""
    from rliable import library, metrics  # type: ignore[import-untyped]

    return library, metrics


def _iqm(scores: np.ndarray) -> float:
    """rliable's IQM (``metrics.aggregate_iqm``: scipy's 25 % trimmed mean over every run and
    task), computed the way scipy's ``trim_mean`` computes it, without scipy's argument
    handling around each call: a bootstrap calls it thousands of times, and that handling was
    most of a report's time. Equal to rliable's to the last bit (tests/bench/test_protocol.py)."""
    a = np.ravel(np.asarray(scores))
    if a.size == 0:
        return math.nan
    low = int(0.25 * a.size)
    high = a.size - low
    kept = np.partition(a, (low, high - 1))[low:high]
    return float(np.mean(kept if np.issubdtype(kept.dtype, np.floating) else kept.astype(float)))


def corrected_confidence(confidence: float, looks: int) -> float:
    """Bonferroni over ``looks`` looks at the data: ``1 − (1 − confidence) / looks``.

    Use it whenever an experiment was extended (more seeds) after its result was read; each
    look is one more chance to stop on a lucky interval."""
    _check_confidence(confidence)
    if isinstance(looks, bool) or not isinstance(looks, int) or looks < 1:
        raise ConfigError(
            f"looks must be an int ≥ 1 (1 = the result was read once, at the end), got {looks!r}"
        )
    return 1.0 - (1.0 - confidence) / looks


def rows_entry(
    rows: Sequence[Mapping[str, Any]], plan: Plan, confidence: float = 0.95
) -> tuple[str, float]:
    """The plan entry every row names and ``confidence`` corrected for its looks.

    ``("", confidence)`` when the rows name no entry, several, or one the plan does not hold:
    such rows are exploratory and carry no verdict."""
    named = {str(r.get("plan") or "") for r in rows}
    entry = next(iter(named)) if len(named) == 1 and named <= set(plan.ids()) else ""
    return entry, corrected_confidence(confidence, plan.looks(entry)) if entry else confidence


def iqm_ci(
    scores: Mapping[str, np.ndarray],
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, ArmSummary]:
    """Per arm: IQM with a stratified bootstrap (percentile) interval, the mean and its
    Student-t interval. ``scores``: arm → array (n_runs, n_tasks)."""
    from preflab.rundir.reporting import mean_ci

    library, metrics = _rliable()
    _check_confidence(confidence)
    arrays = {k: _scores(k, v) for k, v in scores.items()}
    with _global_numpy_seed(seed):
        points, cis = library.get_interval_estimates(
            arrays,
            lambda s: np.array([_iqm(s)]),
            reps=reps,
            confidence_interval_size=confidence,
        )
    out = {}
    for k, a in arrays.items():
        _, half = mean_ci(a.mean(axis=1).tolist(), confidence)
        out[k] = ArmSummary(
            iqm=Interval(
                point=float(np.ravel(points[k])[0]),
                lo=float(cis[k][0, 0]),
                hi=float(cis[k][1, 0]),
                confidence=confidence,
            ),
            mean=float(metrics.aggregate_mean(a)),
            mean_half_width=half,
            n_runs=a.shape[0],
            n_tasks=a.shape[1],
        )
    return out


def probability_of_improvement(
    x: np.ndarray,
    y: np.ndarray,
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """P(X > Y): the probability that a run of arm X beats a run of arm Y on the same task
    (ties count half), averaged over tasks, with a stratified bootstrap interval resampling
    each arm's runs independently (rliable's ``probability_of_improvement``)."""
    library, metrics = _rliable()

    _check_confidence(confidence)
    a, b = _scores("x", x), _scores("y", y)
    if a.shape[1] != b.shape[1]:
        raise DataError(
            f"x and y must cover the same tasks, got {a.shape[1]} and {b.shape[1]} columns"
        )
    with _global_numpy_seed(seed):
        points, cis = library.get_interval_estimates(
            {"xy": [a, b]},
            lambda s, t: np.array([metrics.probability_of_improvement(s, t)]),
            reps=reps,
            confidence_interval_size=confidence,
        )
    return Interval(
        point=float(np.ravel(points["xy"])[0]),
        lo=float(cis["xy"][0, 0]),
        hi=float(cis["xy"][1, 0]),
        confidence=confidence,
    )


def performance_profile(
    scores: Mapping[str, np.ndarray],
    taus: Sequence[float] | np.ndarray,
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Profile]:
    """Per arm: the fraction of (run, task) scores above each ``tau`` (rliable's score
    distribution), with stratified bootstrap intervals."""
    library, _ = _rliable()

    _check_confidence(confidence)
    arrays = {k: _scores(k, v) for k, v in scores.items()}
    t = np.asarray(taus, dtype=float)
    with _global_numpy_seed(seed):
        fractions, cis = library.create_performance_profile(
            arrays, t, reps=reps, confidence_interval_size=confidence
        )
    return {
        k: Profile(
            taus=t,
            fractions=np.asarray(fractions[k], dtype=float),
            lo=np.asarray(cis[k][0], dtype=float),
            hi=np.asarray(cis[k][1], dtype=float),
            confidence=confidence,
        )
        for k in arrays
    }


def _compare_ci(
    x: np.ndarray,
    y: np.ndarray,
    statistic: Callable[[float, float], float],
    *,
    paired: bool,
    reps: int,
    confidence: float,
    seed: int,
) -> Interval:
    library, _ = _rliable()

    _check_confidence(confidence)
    a, b = _scores("x", x), _scores("y", y)
    if paired and a.shape != b.shape:
        raise DataError(
            f"a paired comparison needs one run of each arm per seed and task, got shapes "
            f"{a.shape} and {b.shape}; align the arrays by seed or pass paired=False"
        )
    if a.shape[1] != b.shape[1]:
        raise DataError(
            f"x and y must cover the same tasks, got {a.shape[1]} and {b.shape[1]} columns"
        )

    def stat(s: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.array([statistic(_iqm(s), _iqm(t))])

    # Paired: one StratifiedBootstrap over both arrays draws the same run indices for both
    # (runs share seeds). Unpaired: runs are resampled within each task, independently per arm.
    bootstrap: Any
    with _global_numpy_seed(seed):
        if paired:
            bootstrap = library.StratifiedBootstrap(a, b)
        else:
            bootstrap = library.StratifiedIndependentBootstrap(a, b)
        ci = bootstrap.conf_int(stat, reps=reps, size=confidence, method="percentile")
    return Interval(
        point=float(stat(a, b)[0]),
        lo=float(ci[0, 0]),
        hi=float(ci[1, 0]),
        confidence=confidence,
    )


def ratio_ci(
    x: np.ndarray,
    y: np.ndarray,
    *,
    paired: bool = False,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """IQM(x) / IQM(y) with a stratified bootstrap (percentile) interval. ``paired``: runs of
    x and y share seeds row by row and are resampled together; otherwise each arm's runs are
    resampled within each task independently. The IQM of y should stay away from 0."""

    def ratio(p: float, q: float) -> float:
        return p / q if q != 0 else math.copysign(math.inf, p) if p != 0 else math.nan

    return _compare_ci(x, y, ratio, paired=paired, reps=reps, confidence=confidence, seed=seed)


def difference_ci(
    x: np.ndarray,
    y: np.ndarray,
    *,
    paired: bool = False,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """IQM(x) − IQM(y) with a stratified bootstrap interval; ``paired`` as in :func:`ratio_ci`."""
    return _compare_ci(
        x, y, lambda p, q: p - q, paired=paired, reps=reps, confidence=confidence, seed=seed
    )


def _num(v: float, digits: int) -> str:
    return f"{v:.{digits}g}" if math.isfinite(v) else str(v)


def fmt_interval(iv: Interval, digits: int = 4) -> str:
    """``point [lo, hi]`` with ``digits`` significant digits."""
    return f"{_num(iv.point, digits)} [{_num(iv.lo, digits)}, {_num(iv.hi, digits)}]"


def markdown_table(summaries: Mapping[str, ArmSummary], *, digits: int = 4) -> str:
    """One row per arm: IQM [lo, hi] (stratified bootstrap), mean ± Student-t half-width at
    the same confidence, and the number of runs (× tasks when there are several)."""
    from preflab.rundir.reporting import md_table

    confidences = {s.iqm.confidence for s in summaries.values()}
    pct = ", ".join(f"{100 * c:.4g}%" for c in sorted(confidences))
    rows = []
    for arm, s in summaries.items():
        half = _num(s.mean_half_width, digits) if math.isfinite(s.mean_half_width) else "n/a"
        n = f"{s.n_runs}" if s.n_tasks == 1 else f"{s.n_runs} × {s.n_tasks} tasks"
        rows.append([arm, fmt_interval(s.iqm, digits), f"{_num(s.mean, digits)} ± {half}", n])
    return md_table(
        ["arm", f"IQM [{pct} stratified bootstrap CI]", f"mean ± {pct} t-CI", "n runs"], rows
    )
