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
"""

from __future__ import annotations

from dataclasses import dataclass

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

    def __post_init__(self) -> None:
        if self.gain < 0 or self.noise < 0 or self.drift < 0:
            raise ConfigError("gain, noise and drift must be ≥ 0")
        if not 0 <= self.adapt <= 1:
            raise ConfigError(f"adapt must be in [0, 1], got {self.adapt}")
        if not -1 < self.noise_corr < 1:
            raise ConfigError(f"noise_corr must be in (−1, 1), got {self.noise_corr}")
        if not 0 <= self.lapse <= 1 or self.lapse_len < 1:
            raise ConfigError("lapse must be in [0, 1] and lapse_len ≥ 1")


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
        col = lambda name: np.array([getattr(c, name) for c in configs], np.float64)[:, None]  # noqa: E731
        self.gain, self.adapt, self.drift = col("gain"), col("adapt"), col("drift")
        self.noise, self.rho = col("noise"), col("noise_corr")
        self.lapse, self.lapse_len = col("lapse"), col("lapse_len")
        shape = (len(configs), n_streams)
        self.m: np.ndarray | None = None
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
        rng = self.rng
        innov = self.noise * np.sqrt(1.0 - self.rho**2)
        self.e = self.rho * self.e + rng.normal(0.0, 1.0, self.e.shape) * innov
        frozen = self.lapse_left > 0
        self.lapse_left = np.where(frozen, self.lapse_left - 1, self.lapse_left)
        start = ~frozen & (rng.random(self.e.shape) < self.lapse)
        lengths = rng.geometric(1.0 / np.broadcast_to(self.lapse_len, self.e.shape))
        self.lapse_left = np.where(start, lengths, self.lapse_left)
        fresh = np.clip(np.tanh(self.gain * (q - self.m) / self.scale) + self.e, -1.0, 1.0)
        self.last = np.where(frozen, self.last, fresh)
        self.m = (
            self.m
            + self.adapt * (q - self.m)
            + rng.normal(0.0, 1.0, self.e.shape) * self.drift * self.scale
        )
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


def population(kind: str, n: int, rng: np.random.Generator) -> list[EvaluatorConfig]:
    """A population of evaluators: 'top' (attentive, low noise) or 'mixed' (a third each of
    top, middling and poor evaluators — noisy, drifting, lapsing, some barely responsive)."""
    if n < 1:
        raise ConfigError(f"n must be ≥ 1, got {n}")

    def top() -> EvaluatorConfig:
        return EvaluatorConfig(
            gain=rng.uniform(1.5, 3.0),
            adapt=rng.uniform(0.01, 0.03),
            drift=rng.uniform(0.0, 0.02),
            noise=rng.uniform(0.03, 0.08),
        )

    def middle() -> EvaluatorConfig:
        return EvaluatorConfig(
            gain=rng.uniform(0.8, 2.0),
            adapt=rng.uniform(0.02, 0.05),
            drift=rng.uniform(0.02, 0.05),
            noise=rng.uniform(0.15, 0.3),
            lapse=0.01,
        )

    def poor() -> EvaluatorConfig:
        return EvaluatorConfig(
            gain=rng.uniform(0.2, 0.8),
            adapt=rng.uniform(0.03, 0.1),
            drift=rng.uniform(0.05, 0.1),
            noise=rng.uniform(0.35, 0.6),
            lapse=0.03,
            lapse_len=20.0,
        )

    if kind == "top":
        return [top() for _ in range(n)]
    if kind == "mixed":
        makers = [top, middle, poor]
        return [makers[i % 3]() for i in range(n)]
    raise ConfigError(f"population kind must be 'top' or 'mixed', got {kind!r}")
