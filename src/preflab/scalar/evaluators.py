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


def rate_stream(
    config: EvaluatorConfig,
    quality: np.ndarray,
    rng: np.random.Generator,
    *,
    scale: float,
    start_expectation: float | None = None,
) -> np.ndarray:
    """Ratings in [−1, 1] of one evaluator for a stream of item qualities: (N,)."""
    q = np.asarray(quality, dtype=np.float64)
    if q.ndim != 1 or not np.all(np.isfinite(q)):
        raise DataError("quality must be a finite 1-D array")
    if not scale > 0:
        raise ConfigError(f"scale must be > 0, got {scale}")
    n = q.size
    out = np.empty(n)
    m = float(q[0]) if start_expectation is None and n else float(start_expectation or 0.0)
    e = rng.normal(0.0, config.noise) if config.noise > 0 else 0.0
    innov = config.noise * np.sqrt(1 - config.noise_corr**2)
    lapse_left = 0
    last = 0.0
    for t in range(n):
        e = config.noise_corr * e + (rng.normal(0.0, innov) if innov > 0 else 0.0)
        if lapse_left > 0:
            lapse_left -= 1
            out[t] = last
        else:
            if config.lapse > 0 and rng.random() < config.lapse:
                lapse_left = int(rng.geometric(1.0 / config.lapse_len))
            last = float(np.clip(np.tanh(config.gain * (q[t] - m) / scale) + e, -1.0, 1.0))
            out[t] = last
        m += config.adapt * (q[t] - m) + (
            rng.normal(0.0, config.drift * scale) if config.drift > 0 else 0.0
        )
    return out


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
