"""Simulated real-time evaluators: locally consistent, globally drifting, differently noisy.

An evaluator watches a stream of items (short stretches of agent behaviour) with true
quality q_t (e.g. the true return of the stretch) and moves a slider in [−1, 1]:

    rating_t = clip(tanh(gain · (q_t − m_t) / scale) + noise_t, −1, 1)

* m_t is the evaluator's expectation: an exponential moving average of the quality seen so
  far (rate ``adapt``) plus a random-walk drift (step std ``drift``·scale). As the agent
  improves, the same behaviour earns lower ratings later on — Pref-GUIDE §4.1's observation
  that scalar feedback drifts over time while nearby ratings stay comparable.
* noise_t is AR(1) noise with stationary std ``noise`` and correlation ``noise_corr``.
* with probability ``lapse`` per item the evaluator stops paying attention for a while
  (mean ``lapse_len`` items) and the slider stays where it was.
* ``bias``: a constant offset of the slider (an optimist rates everything higher, a harsh
  evaluator lower); it cancels in a comparison but not in a regression on raw ratings.
* criterion shifts: with probability ``shift_rate`` per step the expectation jumps up by
  |N(0, ``shift``)|·scale at once — the evaluator starts to demand more (Pref-GUIDE §4.1:
  behaviour rewarded early is penalised once goal-directed behaviour is expected).
* ``delay``: reaction time in steps; the rating of step t reacts to the quality of step
  t − delay (the first quality before that).

:func:`population` draws whole populations of evaluators from documented distributions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from preflab.errors import ConfigError, DataError


@dataclass(frozen=True, kw_only=True)
class EvaluatorConfig:
    """One simulated evaluator's habits."""

    gain: float = 2.0
    """Slope of the rating against (quality − expectation) / scale."""
    adapt: float = 0.02
    """Rate at which the expectation follows the quality seen (0: fixed expectation)."""
    drift: float = 0.02
    """Std of the expectation's random-walk step per item, in units of ``scale``."""
    noise: float = 0.05
    """Stationary std of the rating noise."""
    noise_corr: float = 0.5
    """Lag-1 correlation of the rating noise."""
    lapse: float = 0.0
    """Probability per item that a lapse of attention starts (slider frozen)."""
    lapse_len: float = 10.0
    """Mean length of a lapse in items."""
    bias: float = 0.0
    """Constant offset added to every rating before clipping (> 0 lenient, < 0 harsh)."""
    shift_rate: float = 0.0
    """Probability per step of a criterion shift (the expectation jumps up)."""
    shift: float = 0.0
    """Std of a criterion shift's jump, in units of ``scale`` (the jump is |N(0, shift)|)."""
    delay: int = 0
    """Reaction time in steps: the rating of step t reacts to the quality of step t − delay."""

    def __post_init__(self) -> None:
        if self.gain < 0 or self.noise < 0 or self.drift < 0:
            raise ConfigError("gain, noise and drift must be ≥ 0")
        if not 0 <= self.adapt <= 1:
            raise ConfigError(f"adapt must be in [0, 1], got {self.adapt}")
        if not -1 < self.noise_corr < 1:
            raise ConfigError(f"noise_corr must be in (−1, 1), got {self.noise_corr}")
        if not 0 <= self.lapse <= 1 or self.lapse_len < 1:
            raise ConfigError("lapse must be in [0, 1] and lapse_len ≥ 1")
        if not (np.isfinite(self.bias) and -1 <= self.bias <= 1):
            raise ConfigError(f"bias must be in [−1, 1], got {self.bias}")
        if not 0 <= self.shift_rate <= 1 or self.shift < 0:
            raise ConfigError("shift_rate must be in [0, 1] and shift ≥ 0")
        if self.delay < 0:
            raise ConfigError(f"delay must be ≥ 0 steps, got {self.delay}")


class Rater:
    """Evaluators rating several streams at once, one step at a time (vectorised).

    ``configs`` are S evaluators; each watches ``n_streams`` streams with its own
    expectation, noise and lapses per stream. :meth:`rate` takes the qualities of the current
    item of every stream and returns ratings of shape (S, n_streams).
    """

    def __init__(
        self,
        configs: list[EvaluatorConfig],
        n_streams: int,
        rng: np.random.Generator,
        *,
        scale: float,
    ) -> None:
        if not configs:
            raise ConfigError("a Rater needs at least one evaluator config")
        if not scale > 0:
            raise ConfigError(f"scale must be > 0, got {scale}")
        if n_streams < 1:
            raise ConfigError(f"n_streams must be ≥ 1, got {n_streams}")
        self.rng = rng
        self.scale = float(scale)

        def col(name: str) -> np.ndarray:
            return np.array([getattr(c, name) for c in configs], np.float64)[:, None]

        self.gain, self.adapt, self.drift = col("gain"), col("adapt"), col("drift")
        self.noise, self.rho = col("noise"), col("noise_corr")
        self.lapse, self.lapse_len = col("lapse"), col("lapse_len")
        self.bias, self.shift_rate, self.shift = col("bias"), col("shift_rate"), col("shift")
        self.delay = np.array([c.delay for c in configs], np.int64)
        shape = (len(configs), n_streams)
        self.m: np.ndarray | None = None
        self.seen: np.ndarray | None = None
        """(max delay + 1, n_streams) the qualities of the last steps, newest first."""
        self.e = rng.normal(0.0, 1.0, shape) * self.noise
        self.lapse_left = np.zeros(shape, np.int64)
        self.last = np.zeros(shape)

    def rate(self, quality: np.ndarray) -> np.ndarray:
        """Ratings in [−1, 1] of the current items (quality: (n_streams,)) → (S, n_streams)."""
        q = np.asarray(quality, np.float64)[None, :]
        if not np.all(np.isfinite(q)):
            raise DataError("quality must be finite")
        if self.m is None:
            self.m = np.broadcast_to(q, self.e.shape).copy()
        if self.seen is None:
            self.seen = np.repeat(q, int(self.delay.max()) + 1, axis=0)
        else:
            self.seen = np.concatenate([q, self.seen[:-1]])
        q = self.seen[self.delay]  # (S, n_streams): the quality each evaluator reacts to
        rng = self.rng
        innov = self.noise * np.sqrt(1.0 - self.rho**2)
        self.e = self.rho * self.e + rng.normal(0.0, 1.0, self.e.shape) * innov
        frozen = self.lapse_left > 0
        self.lapse_left = np.where(frozen, self.lapse_left - 1, self.lapse_left)
        start = ~frozen & (rng.random(self.e.shape) < self.lapse)
        lengths = rng.geometric(1.0 / np.broadcast_to(self.lapse_len, self.e.shape))
        self.lapse_left = np.where(start, lengths, self.lapse_left)
        fresh = np.tanh(self.gain * (q - self.m) / self.scale) + self.e + self.bias
        self.last = np.where(frozen, self.last, np.clip(fresh, -1.0, 1.0))
        self.m = (
            self.m
            + self.adapt * (q - self.m)
            + rng.normal(0.0, 1.0, self.e.shape) * self.drift * self.scale
        )
        if np.any(self.shift_rate > 0):
            jump = rng.random(self.e.shape) < self.shift_rate
            size = np.abs(rng.normal(0.0, 1.0, self.e.shape)) * self.shift * self.scale
            self.m = self.m + np.where(jump, size, 0.0)
        return self.last.copy()


def rate_stream(
    config: EvaluatorConfig, quality: np.ndarray, rng: np.random.Generator, *, scale: float
) -> np.ndarray:
    """Ratings in [−1, 1] of one evaluator for one stream of item qualities: (N,)."""
    q = np.asarray(quality, dtype=np.float64)
    if q.ndim != 1 or not np.all(np.isfinite(q)):
        raise DataError("quality must be a finite 1-D array")
    rater = Rater([config], 1, rng, scale=scale)
    return np.array([rater.rate(q[t : t + 1])[0, 0] for t in range(q.size)])


TIERS: dict[str, dict[str, tuple[float, float]]] = {
    "top": {
        "gain": (1.5, 3.0),
        "adapt": (0.01, 0.03),
        "drift": (0.0, 0.02),
        "noise": (0.03, 0.08),
        "lapse": (0.0, 0.0),
        "lapse_len": (10.0, 10.0),
        "bias": (-0.1, 0.1),
        "shift_rate": (0.0, 0.001),
        "shift": (0.0, 0.3),
        "delay": (0, 2),
    },
    "middle": {
        "gain": (0.8, 2.0),
        "adapt": (0.02, 0.05),
        "drift": (0.02, 0.05),
        "noise": (0.15, 0.3),
        "lapse": (0.005, 0.015),
        "lapse_len": (10.0, 10.0),
        "bias": (-0.3, 0.3),
        "shift_rate": (0.001, 0.003),
        "shift": (0.2, 0.6),
        "delay": (1, 4),
    },
    "poor": {
        "gain": (0.2, 0.8),
        "adapt": (0.03, 0.1),
        "drift": (0.05, 0.1),
        "noise": (0.35, 0.6),
        "lapse": (0.02, 0.04),
        "lapse_len": (20.0, 20.0),
        "bias": (-0.5, 0.5),
        "shift_rate": (0.002, 0.006),
        "shift": (0.4, 1.0),
        "delay": (2, 8),
    },
}
"""The distribution of each evaluator tier: every parameter of :class:`EvaluatorConfig` is
drawn independently and uniformly from its (low, high) range (``delay``: an integer in
[low, high], steps). 'top' is attentive (low noise, small bias, rare small criterion shifts,
quick reactions); 'poor' is noisy, drifting, lapsing, strongly biased, often shifting and slow
to react; 'middle' lies between. Pendulum runs at 20 steps/s, so a delay of 8 is 0.4 s."""


def draw_evaluator(tier: str, rng: np.random.Generator) -> EvaluatorConfig:
    """One evaluator of a tier of :data:`TIERS` (every parameter drawn from its range)."""
    if tier not in TIERS:
        raise ConfigError(f"evaluator tier must be one of {sorted(TIERS)}, got {tier!r}")
    ranges = TIERS[tier]
    kw: dict[str, Any] = {
        name: float(rng.uniform(lo, hi)) for name, (lo, hi) in ranges.items() if name != "delay"
    }
    lo, hi = ranges["delay"]
    kw["delay"] = int(rng.integers(int(lo), int(hi) + 1))
    return EvaluatorConfig(**kw)


def population(kind: str, n: int, rng: np.random.Generator) -> list[EvaluatorConfig]:
    """A population of ``n`` evaluators drawn from :data:`TIERS`: 'top' (all from the top
    tier, like Pref-GUIDE's "Top 15") or 'mixed' (top, middle and poor in turn, a third each,
    like its "All 50": evaluator k is of tier k mod 3). Deterministic given ``rng``."""
    if n < 1:
        raise ConfigError(f"n must be ≥ 1, got {n}")
    if kind == "top":
        return [draw_evaluator("top", rng) for _ in range(n)]
    if kind == "mixed":
        tiers = ("top", "middle", "poor")
        return [draw_evaluator(tiers[k % 3], rng) for k in range(n)]
    raise ConfigError(f"population kind must be 'top' or 'mixed', got {kind!r}")
