"""Simulated crowd members: the stochastic preference model (B-Pref) with Crowd-PrefRL's ranges.

User u answers a pair (A, B) with P[A ≻ B] = σ(β_u (R_u(A) − R_u(B)) / s), where
R_u(X) = Σ_t γ_u^(H−1−t) r_g(X)_t is the γ-discounted return under the reward r_g of the
user's group g (0 = majority, 1 = minority) and s is ``return_scale``; the sampled answer is
then flipped with probability ε_u. Crowd-PrefRL draws γ ∈ [0.98, 1], β ∈ [0.1, 10],
ε ∈ [0, 0.2] (its §4.1). B-Pref applies β to raw returns (s = 1); the scale lets a benchmark
express returns in units comparable to DMControl's [0, 1] per-step rewards.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from preflab.errors import ConfigError, DataError


@dataclass(frozen=True, kw_only=True)
class CrowdConfig:
    """How a simulated crowd is drawn and how it answers."""

    n_users: int = 15
    """Crowd size M (Crowd-PrefRL uses 7, 11, 15 and 150)."""
    n_minority: int = 0
    """How many of the users judge by the minority reward (group 1); the rest are group 0."""
    beta_range: tuple[float, float] = (0.1, 10.0)
    """Uniform range of the rationality β."""
    gamma_range: tuple[float, float] = (0.98, 1.0)
    """Uniform range of the myopia discount γ."""
    epsilon_range: tuple[float, float] = (0.0, 0.2)
    """Uniform range of the mistake probability ε."""
    return_scale: float = 1.0
    """Returns are divided by this before β multiplies them."""
    answer_rate: float = 1.0
    """Probability that a user answers a given query (< 1 gives a sparse crowd)."""

    def __post_init__(self) -> None:
        if self.n_users < 1:
            raise ConfigError(f"n_users must be ≥ 1, got {self.n_users}")
        if not 0 <= self.n_minority <= self.n_users:
            raise ConfigError(
                f"n_minority must be in [0, n_users={self.n_users}], got {self.n_minority}"
            )
        for name in ("beta_range", "gamma_range", "epsilon_range"):
            lo, hi = getattr(self, name)
            if not lo <= hi:
                raise ConfigError(f"{name} must be (low, high) with low ≤ high, got {(lo, hi)}")
        if not self.beta_range[0] > 0:
            raise ConfigError(f"beta_range must be positive, got {self.beta_range}")
        if not (self.gamma_range[0] > 0 and self.gamma_range[1] <= 1):
            raise ConfigError(f"gamma_range must lie in (0, 1], got {self.gamma_range}")
        if not (self.epsilon_range[0] >= 0 and self.epsilon_range[1] <= 1):
            raise ConfigError(f"epsilon_range must lie in [0, 1], got {self.epsilon_range}")
        if not self.return_scale > 0:
            raise ConfigError(f"return_scale must be > 0, got {self.return_scale}")
        if not 0 < self.answer_rate <= 1:
            raise ConfigError(f"answer_rate must be in (0, 1], got {self.answer_rate}")


@dataclass(frozen=True, kw_only=True)
class User:
    """One simulated crowd member."""

    id: str
    """Annotator id."""
    beta: float
    """Rationality β."""
    gamma: float
    """Myopia discount γ."""
    epsilon: float
    """Mistake probability ε."""
    group: int = 0
    """0 = majority reward, 1 = minority reward."""


def sample_users(
    config: CrowdConfig, rng: np.random.Generator, *, prefix: str = "user"
) -> list[User]:
    """Draw ``config.n_users`` users; the last ``n_minority`` of them are group 1."""
    n = config.n_users
    beta = rng.uniform(*config.beta_range, size=n)
    gamma = rng.uniform(*config.gamma_range, size=n)
    eps = rng.uniform(*config.epsilon_range, size=n)
    groups = np.zeros(n, dtype=int)
    if config.n_minority:
        groups[n - config.n_minority :] = 1
    return [
        User(
            id=f"{prefix}-{i:03d}",
            beta=float(beta[i]),
            gamma=float(gamma[i]),
            epsilon=float(eps[i]),
            group=int(groups[i]),
        )
        for i in range(n)
    ]


def discounted_returns(users: list[User], rewards: np.ndarray) -> np.ndarray:
    """R_u(X) = Σ_t γ_u^(H−1−t) r_t for rewards of shape (items, H): returns (users, items)."""
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2:
        raise DataError(f"rewards must have shape (items, H), got {r.shape}")
    h = r.shape[1]
    gam = np.array([u.gamma for u in users])
    w = gam[:, None] ** np.arange(h - 1, -1, -1)[None, :]
    return w @ r.T


def answer_pairs(
    users: list[User],
    rewards_a: dict[int, np.ndarray] | np.ndarray,
    rewards_b: dict[int, np.ndarray] | np.ndarray,
    rng: np.random.Generator,
    *,
    return_scale: float = 1.0,
) -> np.ndarray:
    """Every user's answer to every pair: (users, pairs) votes in {+1, −1}.

    ``rewards_a``/``rewards_b`` are (pairs, H) per-step rewards of the first/second segments,
    or a dict group → such array when groups judge by different rewards.
    """
    if not users:
        raise DataError("no users to answer")
    ra = rewards_a if isinstance(rewards_a, dict) else {0: rewards_a, 1: rewards_a}
    rb = rewards_b if isinstance(rewards_b, dict) else {0: rewards_b, 1: rewards_b}
    groups = np.array([u.group for u in users])
    n_pairs = next(iter(ra.values())).shape[0]
    diff = np.zeros((len(users), n_pairs))
    for g in np.unique(groups):
        if g not in ra or g not in rb:
            raise DataError(
                f"users of group {g} need rewards for group {g}; got groups {sorted(ra)}"
            )
        idx = np.flatnonzero(groups == g)
        sub = [users[i] for i in idx]
        diff[idx] = discounted_returns(sub, ra[g]) - discounted_returns(sub, rb[g])
    beta = np.array([u.beta for u in users])[:, None]
    z = np.clip(beta * diff / return_scale, -500, 500)
    p_a = 1.0 / (1.0 + np.exp(-z))
    votes = np.where(rng.random(p_a.shape) < p_a, 1, -1)
    eps = np.array([u.epsilon for u in users])[:, None]
    flip = rng.random(votes.shape) < eps
    return np.where(flip, -votes, votes).astype(np.int8)


def truth_labels(rewards_a: np.ndarray, rewards_b: np.ndarray) -> np.ndarray:
    """Oracle labels (β → ∞, γ = 1, ε = 0): +1 / −1 by the higher undiscounted return, 0 on ties."""
    return np.sign(np.asarray(rewards_a).sum(1) - np.asarray(rewards_b).sum(1)).astype(np.int8)


def error_rates(votes: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per row of ``votes`` (±1, 0 = missing): share of answered, decided queries that disagree
    with ``truth``."""
    v = np.asarray(votes)
    t = np.asarray(truth)[None, :]
    mask = (v != 0) & (t != 0)
    wrong = ((v != t) & mask).sum(1)
    return wrong / np.maximum(mask.sum(1), 1)
